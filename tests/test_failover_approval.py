"""The failover DAG asks a person before anything is fenced, with the preflight
findings and the plan in the question: Approve fails over; Reject, and no answer
within the approval timeout, leave the applications, their fences, the flows and the
group offsets exactly as they were, record the run as "rejected", and no step of it
can run afterwards; a dry run asks nobody and changes nothing. Real clusters, a real
`replicator run`, real `dag.test()`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow_helpers import answering, dagbag, xcom
from procedure_helpers import commit_offsets, committed_offsets, runner
from replication_helpers import preload, wait_until, write_config

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.procedures import live_workers
from replicator.procedures.orchestration import ProcedureRequest, run_step
from replicator.procedures.steps import ProcedureEnded
from replicator.statestore import STATE_URL_ENV, StateStore

from kafka_helpers import create_topic, unique_topic

pytestmark = pytest.mark.integration


@dataclass
class Scene:
    """A flow with its `replicator run`, one application on the primary with
    committed offsets, and everything a failover could change."""

    app: str
    topic: str
    config: Path
    flows: list[FlowConfig]
    primary: str
    dr: str
    state_url: str
    store: StateStore

    def conf(self, **more: Any) -> dict[str, Any]:
        return {
            "flow": "primary->dr",
            "mode": "planned",
            "applications": [self.app],
            "reverse": True,
            "timeout_s": 90,
            **more,
        }

    def snapshot(self) -> dict[str, Any]:
        """What a rejected failover must leave as it was."""
        app = self.store.application(self.app)
        return {
            "application": (app.active_cluster, app.fenced, app.epoch),
            "flows": {f.flow: (f.state, f.detail) for f in self.store.flow_states()},
            "workers": sorted(w["worker"] for w in live_workers(self.flows[0])),
            "offsets on primary": committed_offsets("primary", self.primary, self.app),
            "offsets on dr": committed_offsets("dr", self.dr, self.app),
        }


@pytest.fixture
def scene(
    airflow_home: Path,
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Scene]:
    topic = unique_topic("dag.approval")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=2)
    preload(primary, topic, 200, 2)
    reverse = ("dr->primary.enabled = true", f"dr->primary.topics = {topic}")
    config_path = write_config(tmp_path, primary, dr, topic, extra=reverse)
    config = load_config(config_path)
    flows = [config.flow("primary->dr"), config.flow("dr->primary")]
    app = f"approval-app-{uuid.uuid4().hex[:8]}"
    store.register_application(app, "primary")
    store.set_flow_state("dr->primary", "stopped")  # the failover starts it
    commit_offsets(flows[0].source, app, {(topic, 0): 40, (topic, 1): 70})
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config_path))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    with runner(flows, store):
        wait_until(lambda: live_workers(flows[0]), 90, "the flow running")
        yield Scene(app, topic, config_path, flows, primary, dr, state_url, store)


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def _question(run: Any) -> str:
    """The body of the run's approval question, as the Required Actions page shows it."""
    from airflow.models.hitl import HITLDetail  # noqa: PLC0415
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from sqlalchemy import select  # noqa: PLC0415

    with create_session() as session:
        return session.scalar(
            select(HITLDetail.body)
            .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
            .where(TaskInstance.run_id == run.run_id, TaskInstance.task_id == "approval")
        )


def test_approve_fails_over_after_asking_with_the_plan(scene: Scene) -> None:
    with answering("failover", "approval", "Approve", by="alice"):
        run = dagbag().get_dag("failover").test(run_conf=scene.conf())

    assert run.state == "success"
    states = _states(run)
    assert all(states[t] == "success" for t in ("preflight", "plan", "approval", "fence"))
    assert all(states[t] == "success" for t in ("switch", "start_reverse", "verify", "report"))
    body = _question(run)
    assert '"lag": 0' in body and '"would_fence"' in body and '"would_switch"' in body
    assert scene.store.application(scene.app).active_cluster == "dr"
    remote = f"primary.{scene.topic}"
    assert committed_offsets("dr", scene.dr, scene.app) == {(remote, 0): 40, (remote, 1): 70}
    [history] = scene.store.runs("failover")
    assert history.outcome == "succeeded"
    # The applications were down from the fence to the switch: after the approval.
    assert history.downtime_seconds is not None and history.duration_seconds is not None
    assert 0 < history.downtime_seconds < history.duration_seconds
    assert history.downtime_seconds <= history.rto_seconds
    report = xcom(run, "report")
    assert report["downtime_seconds"] == history.downtime_seconds
    assert report["duration_seconds"] == history.duration_seconds


@pytest.mark.parametrize(
    ("answer", "reason"),
    [("Reject", "rejected by bob"), (None, "no answer to the approval within 0.05 min")],
    ids=["reject", "timeout"],
)
def test_reject_or_no_answer_leaves_everything_as_it_was(
    scene: Scene, answer: str | None, reason: str
) -> None:
    before = scene.snapshot()
    conf = scene.conf(approval_timeout_minutes=0.05 if answer is None else 30)

    with answering("failover", "approval", answer, by="bob"):
        run = dagbag().get_dag("failover").test(run_conf=conf)

    assert run.state == "success"  # a "no" is an answer, not a failure
    states = _states(run)
    assert states["approval"] == "success"
    after_approval = ("fence", "drain", "stop_flow", "commit_offsets", "switch", "report")
    assert all(states[t] == "skipped" for t in after_approval), states
    assert scene.snapshot() == before
    [history] = scene.store.runs("failover")
    assert (history.outcome, history.details["reason"]) == ("rejected", reason)
    assert history.downtime_seconds == 0.0
    # A task of the rejected run cleared by someone still fences nothing.
    procedure_id = history.params["procedure_id"]
    request = ProcedureRequest.from_params(
        "failover", {**conf, "config": str(scene.config), "state_url": scene.state_url}
    )
    with pytest.raises(ProcedureEnded, match="was rejected"):
        run_step(request, procedure_id, "fence")
    assert scene.snapshot() == before


def test_a_dry_run_asks_nobody_and_changes_nothing(scene: Scene) -> None:
    before = scene.snapshot()

    run = dagbag().get_dag("failover").test(run_conf=scene.conf(dry_run=True))

    assert run.state == "success"
    states = _states(run)
    assert (states["plan"], states["approval"]) == ("success", "skipped")
    assert all(states[t] == "skipped" for t in ("preflight", "fence", "switch", "report"))
    assert xcom(run, "plan")["switch"] == {"would_switch": {scene.app: "primary -> dr"}}
    assert scene.snapshot() == before
    assert scene.store.runs("failover") == []
