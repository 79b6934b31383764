"""A failover that stops midway (here: its commit_offsets step fails after the fence
and the stop of the flow) leaves production standing still until it is aborted:
`abort_procedure` (DAG) and `replicator abort` (CLI) unfence the applications,
restart the flow, record the run as "aborted", and no step of it runs again. A run
that switched is never undone silently: abort refuses and says to fail back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from replicator.cli import main
from replicator.procedures import Procedure, Step, applications, live_workers
from replicator.procedures.abort import abort
from replicator.procedures.orchestration import run_steps
from replicator.procedures.steps import ProcedureEnded, StepReport
from replicator.statestore import StateStore

from helpers.airflow import approval_policy, dagbag, failover_conf, task_request, task_states
from helpers.procedures import SceneMaker
from helpers.replication import wait_until


@pytest.mark.integration
def test_abort_of_a_failover_stopped_after_fence_and_stop_flow(
    airflow_home: Path, procedure_scene: SceneMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    approval_policy(monkeypatch, skip=["planned_failover"])  # this deployment lets it skip
    scene = procedure_scene("abort", records=200, offsets={0: 50, 1: 60})
    app, store, [flow] = scene.app, scene.store, scene.flows
    bag = dagbag()
    conf = failover_conf(scene, skip_approval=True, timeout_s=60)
    # An instance of the application already started on the DR side: its group has a
    # member there, so the failover cannot commit the group's offsets on DR.
    early = Consumer({"bootstrap.servers": scene.dr, "group.id": app, "enable.auto.commit": False})

    with scene.running():
        early.subscribe([f"primary.{scene.topic}"])
        wait_until(lambda: _joined(early), 60, "a member of the group on DR")
        stopped = bag.get_dag("failover").test(run_conf=conf)
        early.close()
        states = task_states(stopped)
        fenced = store.applications.get(app)
        flow_state = store.flows.get("primary->dr")
        aborted = bag.get_dag("abort_procedure").test(
            run_conf={"procedure_id": f"failover/{stopped.run_id}", "reason": "given up"}
        )
        wait_until(lambda: live_workers(flow), 90, "the flow running again")

    assert stopped.state == "failed"
    assert states["cutover"] == "failed"
    procedure_id = f"failover/{stopped.run_id}"
    saved = {
        step: store.runs.step(procedure_id, step)
        for step in ("fence", "stop_flow", "commit_offsets")
    }
    assert {step: s.state if s else None for step, s in saved.items()} == {
        "fence": "done",
        "stop_flow": "done",
        "commit_offsets": "failed",
    }
    assert (fenced.fenced, flow_state.state) == (True, "stopped")
    assert aborted.state == "success"
    now = store.applications.get(app)
    assert (now.active_cluster, now.fenced, now.epoch) == ("primary", False, fenced.epoch + 1)
    assert store.flows.get("primary->dr").state == "running"
    [history] = store.runs.recent("failover")
    assert (history.outcome, history.details["reason"]) == ("aborted", "given up")
    assert history.details["undone"] == {
        "unfenced": {app: fenced.epoch + 1},
        "restarted_flows": ["primary->dr"],
    }
    assert history.downtime_seconds is not None and history.downtime_seconds > 0
    # The failed step, retried after the abort, does nothing.
    with pytest.raises(ProcedureEnded, match="was aborted"):
        run_steps(
            task_request(scene, "failover", conf),
            history.params["procedure_id"],
            ["commit_offsets"],
        )
    assert store.applications.get(app) == now


def _joined(consumer: Consumer) -> bool:
    consumer.poll(0.5)
    return bool(consumer.assignment())


class _Move(Procedure):
    """The application moves of a failover, without clusters: fence, switch, and a
    last step that fails while `broken`."""

    kind = "failover"
    recovery_step = "switch"

    def __init__(self, store: StateStore, app: str) -> None:
        super().__init__(store)
        self.applications = [app]
        self.broken = False

    def steps(self) -> list[Step]:
        return [
            Step("fence", self._fence),
            Step("switch", self._switch),
            Step("verify", self._verify),
        ]

    def _verify(self) -> StepReport:
        if self.broken:
            raise RuntimeError("verification failed")
        return {}

    def _fence(self) -> StepReport:
        return applications.fence(self.store.applications, self.applications, 5)

    def _switch(self) -> StepReport:
        return applications.switch(self.store.applications, self.applications, "dr")

    def params(self) -> dict[str, Any]:
        return {"applications": self.applications}

    def flow_name(self) -> None:
        return None

    def mode(self) -> None:
        return None

    def rpo(self) -> None:
        return None


def test_abort_undoes_a_fence_and_refuses_after_a_switch(
    state_url: str, store: StateStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.applications.register("cli-app", "primary")
    move = _Move(store, "cli-app")
    move.run_step("cli-1", "fence")

    assert main(["abort", "cli-1", "--state-url", state_url, "--reason", "test"]) == 0
    assert 'unfenced         {"cli-app": 2}' in capsys.readouterr().out
    assert store.applications.get("cli-app").fenced is False
    [aborted] = store.runs.recent("failover")
    assert (aborted.outcome, aborted.details["undone"]["unfenced"]) == ("aborted", {"cli-app": 2})
    with pytest.raises(ProcedureEnded):
        move.run_step("cli-1", "switch")

    move.broken = True
    assert not move.run("cli-2").ok  # fenced and switched: the applications are on DR
    assert main(["abort", "cli-2", "--state-url", state_url]) == 1
    refused = capsys.readouterr().err
    assert "already switched the applications" in refused and "run a failback" in refused
    assert store.applications.get("cli-app").active_cluster == "dr"
    move.broken = False
    finished = move.run("cli-2")
    assert finished.ok and finished.downtime_seconds is not None
    assert finished.duration_seconds is not None
    assert 0 < finished.downtime_seconds < finished.duration_seconds
    assert main(["abort", "cli-2", "--state-url", state_url]) == 1
    assert "succeeded, so there is nothing to abort" in capsys.readouterr().err

    assert main(["abort", "no-such-run", "--state-url", state_url]) == 1
    assert "no procedure 'no-such-run'" in capsys.readouterr().err


def test_abort_of_a_full_drill_half_releases_the_drills_leases(store: StateStore) -> None:
    """A full drill holds the leases of both halves under its own id: aborting the
    half that stopped must free them, or the applications stay locked for an hour."""
    store.applications.register("drill-app", "primary")
    half = _Move(store, "drill-app")
    half.lease_owner = "drill-7"
    half.run_step("drill-7.failover", "fence")
    assert {lease.owner for lease in store.leases.all()} == {"drill-7"}

    abort(store, "drill-7.failover", reason="drill abandoned")

    assert store.leases.all() == []
    assert store.applications.get("drill-app").fenced is False
