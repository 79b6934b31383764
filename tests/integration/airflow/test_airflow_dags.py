"""The DAGs parse cleanly and fast; the failover, failback, drill and verification DAGs
run with `dag.test()` against the real clusters and a real metadata DB; a retried
failover step applies nothing twice; a run's conf cannot choose the configuration or
the state store. (The failover's approval: test_failover_approval.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from replicator.errors import ReplicatorError
from replicator.procedures.orchestration import STEPS, run_steps
from replicator.statestore import STATE_URL_ENV
from replicator.verification.plan import plan_verification

from helpers.airflow import (
    DAGS,
    approval_policy,
    dagbag,
    failover_conf,
    task_request,
    task_states,
    xcom,
)
from helpers.procedures import SceneMaker, committed_offsets
from helpers.replication import wait_until
from helpers.verification_server import verification_server

pytestmark = pytest.mark.integration


def test_dags_import_without_errors_and_parse_fast(airflow_home: Path) -> None:
    started = time.monotonic()
    bag = dagbag()
    assert bag.import_errors == {}
    assert {"failover"} <= set(bag.dag_ids)
    assert time.monotonic() - started < 5 * max(1, len(bag.dag_ids))
    for path in DAGS.glob("*.py"):
        began = time.monotonic()
        _dagbag_file(path)
        assert time.monotonic() - began < 1.0, f"{path.name} does work at parse time"


def _dagbag_file(path: Path) -> None:
    assert dagbag(path).import_errors == {}


def test_failover_and_failback_dags_run_every_step_and_a_retry_applies_nothing_twice(
    airflow_home: Path, procedure_scene: SceneMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This deployment lets both go without asking when a run says so (the approval:
    # test_failover_approval.py).
    approval_policy(monkeypatch, skip=["planned_failover", "failback"])
    original = {0: 100, 1: 150}
    scene = procedure_scene("dag.failover", records=400, offsets=original, reverse=True)
    app, store = scene.app, scene.store
    bag = dagbag()
    conf = failover_conf(scene, skip_approval=True)

    with scene.running():
        run = bag.get_dag("failover").test(run_conf=conf)
        failed_over = store.applications.get(app)
        on_dr = committed_offsets("dr", scene.dr, app)
        back = bag.get_dag("failback").test(
            run_conf={
                "flow": "primary->dr",
                "applications": [app],
                "timeout_s": 90,
                "skip_approval": True,
            }
        )

    assert run.state == "success"
    states = task_states(run)
    assert states["approval"] == states["plan"] == "skipped"  # nobody to ask
    tasks = ("preflight", "cutover", "checkpoint", "verify", "report")
    assert all(states[s] == "success" for s in tasks), states
    # The cutover ran its steps in one task; a planned failover has no `unreplicated`;
    # its checkpoints are written after the switch, outside the applications' downtime.
    assert list(xcom(run, "cutover")) == [
        "fence", "drain", "stop_flow", "commit_offsets", "switch"
    ]  # fmt: skip
    assert failed_over.active_cluster == "dr"
    remote = f"primary.{scene.topic}"
    assert on_dr == {(remote, 0): 100, (remote, 1): 150}
    [history] = store.runs.recent("failover")
    assert (history.outcome, history.rpo_records) == ("succeeded", 0)
    # The report task reads the figures from the history (it runs no step).
    report = xcom(run, "report")
    assert report["outcome"] == "succeeded"
    assert (report["duration_seconds"], report["downtime_seconds"]) == (
        history.duration_seconds,
        history.downtime_seconds,
    )
    assert 0 < history.downtime_seconds < history.duration_seconds
    # Every step ran once under the run's procedure id; its epoch shows one fence, one switch.
    assert failed_over.epoch == 2
    # Each task retried (cleared and run again in the same DAG run) changes nothing.
    procedure_id = history.params["procedure_id"]
    assert procedure_id == f"failover/{run.run_id}"
    request = task_request(scene, "failover", conf)
    for step in STEPS["failover"]:
        report = run_steps(request, procedure_id, [step]).get(step)
        assert report == (
            store.runs.step(procedure_id, step).result if report is not None else None
        )
    assert len(store.runs.recent("failover")) == 1

    # The failback DAG returned everything to where it was.
    assert back.state == "success"
    skipped = {"plan", "approval"}  # nobody to ask
    assert {task for task, state in task_states(back).items() if state != "success"} == skipped
    assert store.applications.get(app).active_cluster == "primary"
    assert committed_offsets("primary", scene.primary, app) == {
        (scene.topic, p): o for p, o in original.items()
    }
    assert store.flows.get("primary->dr").state == "running"
    assert store.flows.get("dr->primary").state == "stopped"
    [returned] = store.runs.recent("failback")
    assert (returned.outcome, returned.rpo_records) == ("succeeded", 0)
    assert returned.downtime_seconds is not None and returned.duration_seconds is not None
    assert 0 < returned.downtime_seconds < returned.duration_seconds


def test_verify_and_drill_dags_store_their_results(
    airflow_home: Path, procedure_scene: SceneMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene = procedure_scene("dag.verify", records=2_000, offsets={0: 300, 1: 1_000})
    [flow] = scene.flows
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_LOCAL",
        '{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}',
    )
    bag = dagbag()

    with scene.running():
        wait_until(
            lambda: sum(w.source_end for w in plan_verification(flow).windows) == 2_000,
            90,
            "everything replicated",
        )
        drill = bag.get_dag("dr_drill").test(
            run_conf={"flow": "primary->dr", "applications": [scene.app], "timeout_s": 90}
        )
        verification = bag.get_dag("verify_replication").test(
            run_conf={"flow": "primary->dr", "topics": [scene.topic]}
        )
    # Again, nothing new: the Spark task submits no job, the suites pass on the plan.
    again = bag.get_dag("verify_replication").test(
        run_conf={"flow": "primary->dr", "topics": [scene.topic]}
    )

    assert drill.state == "success"
    [drilled] = scene.store.runs.recent("drill")
    assert (drilled.mode, drilled.outcome, drilled.rpo_records) == (
        "non-disruptive",
        "succeeded",
        0,
    )
    # A non-disruptive drill stops no application.
    assert drilled.downtime_seconds == 0.0 and drilled.duration_seconds is not None
    assert xcom(drill, "drill")["duration_seconds"] == drilled.duration_seconds
    assert verification.state == "success" and again.state == "success"
    second, verified = scene.store.runs.recent("verification")  # newest first
    assert verified.outcome == second.outcome == "succeeded"
    assert Path(verified.details["data_docs"]).exists()
    assert (Path(verified.details["results"]) / "parity").is_dir()
    assert second.details["verified"]["records_now"] == 0
    assert not (Path(second.details["results"]) / "parity").exists()  # no Spark job


def test_the_verify_dag_runs_its_job_on_a_verification_server(
    airflow_home: Path,
    procedure_scene: SceneMaker,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The Spark connection names a verification server (host sc://..., its port): the
    DAG's Spark task runs the job as the server's client and submits nothing, and its
    suites task runs them in the server's warm suites."""
    scene = procedure_scene("dag.server", records=2_000, offsets={0: 300})
    [flow] = scene.flows
    with verification_server(tmp_path / "server.log") as url:
        host, port = url.rsplit(":", 1)
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_LOCAL",
            json.dumps({"conn_type": "spark", "host": host, "port": int(port)}),
        )
        with scene.running():
            wait_until(
                lambda: sum(w.source_end for w in plan_verification(flow).windows) == 2_000,
                90,
                "everything replicated",
            )
        verification = (
            dagbag()
            .get_dag("verify_replication")
            .test(run_conf={"flow": "primary->dr", "topics": [scene.topic]})
        )

    assert verification.state == "success"
    [verified] = scene.store.runs.recent("verification")
    assert verified.outcome == "succeeded"
    assert verified.params["master"] == url  # the server, as the history names it
    results = Path(verified.details["results"])
    assert (results / "parity").is_dir()
    # The job's client wrote its output there; a submit's goes to the task's log.
    assert (results / "spark.log").is_file()
    # The suites task ran GX in the process the server kept ready, on its next port.
    assert verified.details["suites_ran"] == f"warm, on 127.0.0.1:{int(port) + 1}"


def test_a_run_conf_cannot_choose_the_configuration_or_the_state_store(
    airflow_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replicator_airflow.operators import request  # noqa: PLC0415 - after airflow_home

    ours = tmp_path / "mm2.properties"
    monkeypatch.setenv("REPLICATOR_CONFIG", str(ours))
    monkeypatch.setenv(STATE_URL_ENV, "sqlite:///ours.db")
    failover = dagbag().get_dag("failover")
    elsewhere = {"config": "/tmp/theirs.properties", "state_url": "postgresql://evil/db"}

    def context(conf: dict[str, object]) -> dict[str, object]:
        """A task's context, with the params Airflow makes of the DAG's and the conf."""
        params = {key: failover.params[key] for key in failover.params}
        run = SimpleNamespace(conf=conf, triggering_user_name="admin", run_type="manual")
        return {"dag": failover, "dag_run": run, "params": params | conf}

    with pytest.raises(ReplicatorError, match="conf sets config, state_url, which DAG"):
        request("failover", context({"applications": ["x"], **elsewhere}), "replicator_default")
    # Even a param of that name (were a DAG to declare one) loses to the connection.
    asked = context({"applications": ["x"]})
    asked["params"] = {**asked["params"], **elsewhere}  # type: ignore[dict-item]
    wanted = request("failover", asked, "replicator_default")
    assert (wanted.config, wanted.state_url, wanted.applications) == (
        str(ours),
        "sqlite:///ours.db",
        ["x"],
    )
