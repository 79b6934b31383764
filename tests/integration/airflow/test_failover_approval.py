"""The failover DAG asks a person before anything is fenced, with the preflight
findings and the plan in the question: Approve fails over; Reject, and no answer
within the approval timeout, leave the applications, their fences, the flows and the
group offsets exactly as they were, record the run as "rejected", and no step of it
can run afterwards; a dry run asks nobody and changes nothing. Real clusters, a real
`replicator run`, real `dag.test()`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.procedures import live_workers
from replicator.procedures.orchestration import run_steps
from replicator.procedures.steps import ProcedureEnded

from helpers.airflow import answering, dagbag, failover_conf, task_request, task_states, xcom
from helpers.procedures import ProcedureScene, SceneMaker, committed_offsets

pytestmark = pytest.mark.integration


@pytest.fixture
def scene(airflow_home: Path, procedure_scene: SceneMaker) -> Iterator[ProcedureScene]:
    """A flow with its `replicator run` and its reverse flow (stopped), one
    application on the primary with committed offsets."""
    scene = procedure_scene("dag.approval", records=200, offsets={0: 40, 1: 70}, reverse=True)
    with scene.running():
        yield scene


def _snapshot(scene: ProcedureScene) -> dict[str, Any]:
    """Everything a failover could change, which a rejected one must leave as it was."""
    app = scene.store.application(scene.app)
    return {
        "application": (app.active_cluster, app.fenced, app.epoch),
        "flows": {f.flow: (f.state, f.detail) for f in scene.store.flow_states()},
        "workers": sorted(w.worker for w in live_workers(scene.flows[0])),
        "offsets on primary": committed_offsets("primary", scene.primary, scene.app),
        "offsets on dr": committed_offsets("dr", scene.dr, scene.app),
    }


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


def test_approve_fails_over_after_asking_with_the_plan(scene: ProcedureScene) -> None:
    with answering("failover", "approval", "Approve", by="alice"):
        run = dagbag().get_dag("failover").test(run_conf=failover_conf(scene))

    assert run.state == "success"
    states = task_states(run)
    assert all(states[t] == "success" for t in ("preflight", "plan", "approval", "cutover"))
    assert all(states[t] == "success" for t in ("start_reverse", "verify", "report"))
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
    scene: ProcedureScene, answer: str | None, reason: str
) -> None:
    before = _snapshot(scene)
    conf = failover_conf(scene, approval_timeout_minutes=0.05 if answer is None else 30)

    with answering("failover", "approval", answer, by="bob"):
        run = dagbag().get_dag("failover").test(run_conf=conf)

    assert run.state == "success"  # a "no" is an answer, not a failure
    states = task_states(run)
    assert states["approval"] == "success"
    after_approval = ("cutover", "start_reverse", "verify", "report")
    assert all(states[t] == "skipped" for t in after_approval), states
    assert _snapshot(scene) == before
    [history] = scene.store.runs("failover")
    assert (history.outcome, history.details["reason"]) == ("rejected", reason)
    assert history.downtime_seconds == 0.0
    # A task of the rejected run cleared by someone still fences nothing.
    procedure_id = history.params["procedure_id"]
    with pytest.raises(ProcedureEnded, match="was rejected"):
        run_steps(task_request(scene, "failover", conf), procedure_id, ["fence"])
    assert _snapshot(scene) == before


def test_a_dry_run_asks_nobody_and_changes_nothing(scene: ProcedureScene) -> None:
    before = _snapshot(scene)

    run = dagbag().get_dag("failover").test(run_conf=failover_conf(scene, dry_run=True))

    assert run.state == "success"
    states = task_states(run)
    assert (states["plan"], states["approval"]) == ("success", "skipped")
    assert all(states[t] == "skipped" for t in ("preflight", "cutover", "report"))
    assert xcom(run, "plan")["switch"] == {"would_switch": {scene.app: "primary -> dr"}}
    assert _snapshot(scene) == before
    assert scene.store.runs("failover") == []
