"""The failover DAG asks a person before anything is fenced, with the preflight
findings and the plan in the question: Approve fails over; Reject, and no answer
within the approval timeout, leave the applications, their fences, the flows and the
group offsets exactly as they were, record the run as "rejected", and no step of it
can run afterwards; a dry run asks nobody and changes nothing.

Nobody bypasses it (issue 26 point 6): `skip_approval` in a run's conf is refused
unless the deployment's approval policy allows it; under the two-person rule the run's
own triggerer may not answer (Airflow refuses them as a respondent) and an approval by
them is recorded as refused; an `approval` task marked successful by hand lets the
cutover fence nothing; a question may not wait longer than the procedure's lease.
Real clusters, a real `replicator run`, real `dag.test()`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replicator.procedures import ApprovalRefused, live_workers
from replicator.procedures.orchestration import run_steps
from replicator.procedures.steps import ProcedureEnded

from helpers.airflow import (
    answering,
    approval_policy,
    dagbag,
    failover_conf,
    task_request,
    task_states,
    xcom,
)
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
    app = scene.store.applications.get(scene.app)
    return {
        "application": (app.active_cluster, app.fenced, app.epoch),
        "flows": {f.flow: (f.state, f.detail) for f in scene.store.flows.all()},
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
    assert scene.store.applications.get(scene.app).active_cluster == "dr"
    remote = f"primary.{scene.topic}"
    assert committed_offsets("dr", scene.dr, scene.app) == {(remote, 0): 40, (remote, 1): 70}
    [history] = scene.store.runs.recent("failover")
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
    [history] = scene.store.runs.recent("failover")
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
    assert scene.store.runs.recent("failover") == []


#: Who triggers a `dag.test()` run (Airflow names it so).
TRIGGERER = "dag_test"


def test_skip_approval_in_the_conf_is_refused_unless_the_deployment_allows_it(
    scene: ProcedureScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replicator_airflow.operators import request  # noqa: PLC0415 - after airflow_home

    before = _snapshot(scene)
    conf = failover_conf(scene, skip_approval=True)

    for mode in ("planned", "unplanned"):
        run = dagbag().get_dag("failover").test(run_conf={**conf, "mode": mode})

        assert run.state == "failed"
        states = task_states(run)
        assert states["preflight"] == "failed", states
        assert states["cutover"] == "upstream_failed", states
        assert states["approval"] in ("upstream_failed", None), states
    assert _snapshot(scene) == before
    assert scene.store.runs.recent("failover") == []
    # What the first task said: the deployment's policy, not the run, decides.
    failover = dagbag().get_dag("failover")
    params = {key: failover.params[key] for key in failover.params} | conf
    context = {
        "dag": failover,
        "dag_run": SimpleNamespace(conf=conf, triggering_user_name="mallory", run_type="manual"),
        "params": params,
    }
    with pytest.raises(ApprovalRefused, match="does not let a planned failover run without an"):
        request("failover", context, "replicator_default")
    approval_policy(monkeypatch, skip=["unplanned_failover"])
    with pytest.raises(ApprovalRefused, match=r"lets these skip: unplanned_failover\)"):
        request("failover", context, "replicator_default")
    assert request("failover", {**context, "params": params | {"mode": "unplanned"}}, "x")


def test_the_triggerer_may_not_approve_their_own_run_under_the_two_person_rule(
    scene: ProcedureScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Approvers named: Airflow itself refuses the triggerer as a respondent.
    approval_policy(monkeypatch, approvers=[TRIGGERER, "alice"], two_person=True)
    with answering("failover", "approval", "Approve", by=[TRIGGERER, "alice"]) as answers:
        run = dagbag().get_dag("failover").test(run_conf=failover_conf(scene))

    assert [a.status for a in answers] == [403, 200], answers
    assert run.state == "success"
    assert task_states(run)["cutover"] == "success"
    assert _assigned(run) == [{"id": "alice", "name": "alice"}]
    [history] = scene.store.runs.recent("failover")
    approved = scene.store.approvals.get(history.params["procedure_id"])
    assert approved is not None
    assert (approved.decision, approved.approver, approved.triggered_by) == (
        "approved",
        "alice",
        TRIGGERER,
    )


def test_an_approval_by_the_triggerer_is_refused_when_anyone_may_answer(
    scene: ProcedureScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No approvers named: whoever Airflow lets answer may, but not the triggerer.
    approval_policy(monkeypatch, two_person=True)
    before = _snapshot(scene)

    with answering("failover", "approval", "Approve", by=TRIGGERER):
        run = dagbag().get_dag("failover").test(run_conf=failover_conf(scene))

    assert run.state == "success"  # a "no" is an answer, not a failure
    states = task_states(run)
    assert all(states[t] == "skipped" for t in ("cutover", "start_reverse", "report")), states
    assert _snapshot(scene) == before
    [history] = scene.store.runs.recent("failover")
    assert history.outcome == "rejected"
    assert "dag_test triggered the run and may not approve it" in history.details["reason"]
    recorded = scene.store.approvals.get(history.params["procedure_id"])
    assert recorded is not None and recorded.decision == "refused"


def test_an_approval_marked_successful_by_hand_fences_nothing(scene: ProcedureScene) -> None:
    before = _snapshot(scene)

    run = (
        dagbag()
        .get_dag("failover")
        .test(run_conf=failover_conf(scene), mark_success_pattern="approval")
    )

    assert run.state == "failed"
    states = task_states(run)
    assert (states["approval"], states["cutover"]) == ("success", "failed"), states
    assert _snapshot(scene) == before
    [history] = scene.store.runs.recent("failover")
    assert history.outcome == "failed"
    assert "no approval is recorded for this run" in history.details["error"]
    assert scene.store.runs.step(history.params["procedure_id"], "fence").state == "failed"


def test_an_approval_timeout_longer_than_the_lease_is_refused(
    scene: ProcedureScene,
) -> None:
    from airflow.sdk.definitions.param import ParamValidationError  # noqa: PLC0415
    from replicator_airflow.operators import request  # noqa: PLC0415 - after airflow_home

    before = _snapshot(scene)
    conf = failover_conf(scene, approval_timeout_minutes=90)

    with pytest.raises(ParamValidationError, match="approval_timeout_minutes"):
        dagbag().get_dag("failover").test(run_conf=conf)
    # Params that reach a task without the form's validation are refused there too.
    failover = dagbag().get_dag("failover")
    context = {
        "dag": failover,
        "dag_run": SimpleNamespace(conf=conf, triggering_user_name="bob", run_type="manual"),
        "params": {key: failover.params[key] for key in failover.params} | conf,
    }
    with pytest.raises(
        ApprovalRefused, match=r"90 is longer than the procedure's lease \(60 min\)"
    ):
        request("failover", context, "replicator_default")
    assert _snapshot(scene) == before
    assert scene.store.runs.recent("failover") == []


def _assigned(run: Any) -> list[dict[str, str]]:
    """Who the run's approval question was assigned to."""
    from airflow.models.hitl import HITLDetail  # noqa: PLC0415
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from sqlalchemy import select  # noqa: PLC0415

    with create_session() as session:
        detail = session.scalar(
            select(HITLDetail)
            .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
            .where(TaskInstance.run_id == run.run_id, TaskInstance.task_id == "approval")
        )
        return list(detail.assigned_users)
