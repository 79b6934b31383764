"""The approval is checked where the action is (no Kafka: a real SQLite state store,
the real procedures built as a DAG task builds them): the first step of a failover,
failback or full drill that changes anything acts only on a recorded Approve, by an
allowed approver, for this run, and not by its own triggerer under the two-person
rule; a run may skip the question only where the deployment's policy allows it; the
question never waits longer than the procedure's lease; a late answer runs the
preflight again first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.procedures import (
    ApprovalPolicy,
    ApprovalRefused,
    ProcedureRequest,
    StepFailed,
    answer,
    approval_needed,
    reject,
    run_steps,
)
from replicator.procedures.approval import answer_of, check_timeout
from replicator.procedures.steps import ProcedureEnded
from replicator.statestore import ApprovalRecord, StateStore

APP = "orders"
RUN = "failover/manual__2026-11-27"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = primary, dr\n"
        "primary.bootstrap.servers = 127.0.0.1:1\n"
        "dr.bootstrap.servers = 127.0.0.1:2\n"
        "primary->dr.enabled = true\n"
        "primary->dr.topics = orders\n"
        "dr->primary.enabled = true\n"
        "dr->primary.topics = orders\n"
    )
    return path


@pytest.fixture
def state(tmp_path: Path) -> StateStore:
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    store.applications.register(APP, "primary")
    return store


@pytest.fixture
def failover(config_path: Path, state: StateStore, tmp_path: Path) -> ProcedureRequest:
    """A planned failover as a DAG task asks for it, with the deployment's policy:
    alice and the role Op approve, never the run's own triggerer."""
    params = {
        "config": str(config_path),
        "state_url": f"sqlite:///{tmp_path / 'state.db'}",
        "flow": "primary->dr",
        "applications": [APP],
        "timeout_s": 1,
        "approval_timeout_minutes": 30,
    }
    request = ProcedureRequest.from_params("failover", params)
    policy = ApprovalPolicy.from_settings(
        {"approvers": ["alice", "role:Op"], "two_person": True}, "the test's policy"
    )
    return replace(request, approval=policy)


def _answer(
    request: ProcedureRequest,
    by: str | None,
    chosen: str = "Approve",
    *,
    procedure_id: str = RUN,
    triggered_by: str = "bob",
    roles: tuple[str, ...] = (),
    at: datetime | None = None,
) -> ApprovalRecord:
    return answer(
        request,
        procedure_id,
        chosen=[chosen],
        approver=by,
        approver_name=by,
        approver_roles=list(roles),
        triggered_by=triggered_by,
        answered_at=at or datetime.now(UTC),
        timed_out=by is None,
    )


def _fence(request: ProcedureRequest, procedure_id: str = RUN) -> None:
    run_steps(request, procedure_id, ["fence"])


def test_the_fence_refuses_a_run_with_no_recorded_answer(
    failover: ProcedureRequest, state: StateStore
) -> None:
    # What marking the `approval` task successful by hand leaves: no answer recorded.
    with pytest.raises(StepFailed, match="no approval is recorded for this run"):
        _fence(failover)
    assert not state.applications.get(APP).fenced
    assert state.approvals.get(RUN) is None


@pytest.mark.parametrize(
    ("by", "chosen", "triggered_by", "roles", "refusal"),
    [
        ("alice", "Reject", "bob", (), "answered 'rejected' by alice"),
        (None, "Reject", "bob", (), "answered 'no answer'"),
        ("mallory", "Approve", "bob", ("user",), "mallory is not an allowed approver"),
        ("alice", "Approve", "alice", (), "alice triggered the run and may not approve it"),
    ],
    ids=["rejected", "no-answer", "not-an-approver", "own-triggerer"],
)
def test_the_fence_acts_only_on_an_approve_by_an_allowed_approver(
    failover: ProcedureRequest,
    state: StateStore,
    by: str | None,
    chosen: str,
    triggered_by: str,
    roles: tuple[str, ...],
    refusal: str,
) -> None:
    recorded = _answer(failover, by, chosen, triggered_by=triggered_by, roles=roles)
    assert recorded.decision != "approved"
    with pytest.raises(StepFailed, match=refusal) as refused:
        _fence(failover)
    assert "nothing is changed" in str(refused.value)
    assert not state.applications.get(APP).fenced


@pytest.mark.parametrize(("by", "roles"), [("alice", ()), ("carol", ("op",))])
def test_an_approve_by_an_approver_or_a_role_member_lets_the_fence_run(
    failover: ProcedureRequest, state: StateStore, by: str, roles: tuple[str, ...]
) -> None:
    assert _answer(failover, by, roles=roles).decision == "approved"
    _fence(failover)
    assert state.applications.get(APP).fenced


def test_the_gate_rechecks_a_record_the_policy_no_longer_accepts(
    failover: ProcedureRequest, state: StateStore
) -> None:
    # Recorded as approved (the policy allowed alice then); the policy now names only dave.
    _answer(failover, "alice")
    narrower = ApprovalPolicy.from_settings({"approvers": ["dave"]}, "the new policy")
    with pytest.raises(StepFailed, match="alice, who is not an allowed approver"):
        _fence(replace(failover, approval=narrower))
    assert not state.applications.get(APP).fenced
    # Forged directly in the store: approved by the run's own triggerer.
    state.approvals.record(
        ApprovalRecord(
            "failover/forged", "failover", "approved", "alice", "alice", (), "alice",
            datetime.now(UTC), datetime.now(UTC),
        )
    )  # fmt: skip
    with pytest.raises(StepFailed, match="approved by alice, who triggered it; the deployment"):
        _fence(failover, "failover/forged")
    assert not state.applications.get(APP).fenced


def test_an_approval_of_another_run_or_kind_does_not_count(
    failover: ProcedureRequest, state: StateStore, config_path: Path
) -> None:
    _answer(failover, "alice", procedure_id="failover/another-run")
    with pytest.raises(StepFailed, match="no approval is recorded for this run"):
        _fence(failover)
    failback = replace(failover, kind="failback", mode="replicate")
    _answer(failback, "alice", procedure_id="failback/run")
    state.approvals.record(
        ApprovalRecord(
            "failover/kind", "failback", "approved", "alice", "alice", (), "bob",
            datetime.now(UTC), datetime.now(UTC),
        )
    )  # fmt: skip
    with pytest.raises(StepFailed, match="the recorded approval is of a failback"):
        _fence(failover, "failover/kind")
    assert not state.applications.get(APP).fenced


def test_failback_and_full_drill_check_it_before_their_first_change(
    failover: ProcedureRequest, state: StateStore
) -> None:
    state.applications.switch(APP, "dr")
    failback = replace(failover, kind="failback", mode="replicate")
    with pytest.raises(StepFailed, match="failback failback/run: no approval is recorded"):
        run_steps(failback, "failback/run", ["replicate_missing"])
    with pytest.raises(StepFailed, match="failback failback/run: no approval is recorded"):
        run_steps(failback, "failback/run", ["fence"])
    assert state.flows.all() == []  # the forward flow was not started
    drill = replace(failover, kind="drill", mode="full")
    with pytest.raises(StepFailed, match="full drill dr_drill/run: no approval is recorded"):
        run_steps(drill, "dr_drill/run", ["failover"])
    assert (
        state.applications.get(APP).active_cluster == "dr"
        and not state.applications.get(APP).fenced
    )


def test_skip_approval_only_where_the_deployment_allows_it(
    failover: ProcedureRequest, state: StateStore
) -> None:
    skipping = replace(failover, skip_approval=True)
    with pytest.raises(ApprovalRefused, match="does not let a planned failover run without"):
        approval_needed(skipping)
    with pytest.raises(ApprovalRefused, match="skip_approval"):
        _fence(skipping)
    unplanned = replace(skipping, mode="unplanned")
    with pytest.raises(ApprovalRefused, match="unplanned failover"):
        approval_needed(unplanned)
    for kind, mode in (("failback", "replicate"), ("drill", "full")):
        with pytest.raises(ApprovalRefused, match="skip_approval"):
            approval_needed(replace(skipping, kind=kind, mode=mode))
    assert approval_needed(replace(failover, kind="drill", mode="non-disruptive")) is False
    assert approval_needed(replace(failover, dry_run=True)) is False
    assert approval_needed(failover) and approval_needed(replace(failover, mode="unplanned"))
    assert not state.applications.get(APP).fenced
    # The deployment lets planned failovers skip: a run that asks goes without a record.
    allowed = ApprovalPolicy.from_settings({"skip": ["planned_failover"]}, "the policy")
    assert approval_needed(replace(skipping, approval=allowed)) is False
    _fence(replace(skipping, approval=allowed))
    assert state.applications.get(APP).fenced
    # The command line asks nobody: no policy in its request, no gate.
    assert approval_needed(replace(skipping, approval=None)) is False


def test_the_question_waits_at_most_the_lease() -> None:
    check_timeout(60)
    with pytest.raises(ApprovalRefused, match="longer than the procedure's lease"):
        check_timeout(61)
    with pytest.raises(ApprovalRefused, match="more than 0"):
        check_timeout(0)


def test_a_timeout_beyond_the_lease_is_refused_in_the_request(
    failover: ProcedureRequest,
) -> None:
    with pytest.raises(ApprovalRefused, match="approval_timeout_minutes 90 is longer"):
        approval_needed(replace(failover, approval_timeout_minutes=90))


def test_a_late_answer_runs_the_preflight_again_before_the_fence(
    failover: ProcedureRequest, state: StateStore
) -> None:
    state.runs.save_step(RUN, "preflight", "done", {"lag": 0})
    preflight = state.runs.step(RUN, "preflight")
    assert preflight is not None
    # Meanwhile someone moved the application elsewhere: the preflight fails now.
    state.applications.switch(APP, "elsewhere")
    late = preflight.updated_at + timedelta(minutes=11)
    _answer(failover, "alice", at=late)
    with pytest.raises(StepFailed, match="approved 11 min after its preflight, which ran again"):
        _fence(failover)
    assert not state.applications.get(APP).fenced


def test_an_answer_in_time_does_not_rerun_the_preflight(
    failover: ProcedureRequest, state: StateStore
) -> None:
    state.runs.save_step(RUN, "preflight", "done", {"lag": 0})
    preflight = state.runs.step(RUN, "preflight")
    assert preflight is not None
    state.applications.switch(APP, "elsewhere")  # the preflight would fail, were it run again
    _answer(failover, "alice", at=preflight.updated_at + timedelta(minutes=9))
    _fence(failover)
    assert state.applications.get(APP).fenced
    recorded = state.approvals.get(RUN)
    assert recorded is not None and recorded.preflight_rechecked_at is None


def test_the_first_answer_stays_and_the_policy_is_validated(state: StateStore) -> None:
    now = datetime.now(UTC)
    first = answer_of(
        ApprovalPolicy(), procedure_id=RUN, kind="failover", chosen=["Reject"],
        approver="bob", approver_name="bob", triggered_by="carol", answered_at=now,
    )  # fmt: skip
    assert state.approvals.record(first).decision == "rejected"
    second = replace(first, decision="approved", approver="alice")
    kept = state.approvals.record(second)
    assert (kept.decision, kept.approver) == ("rejected", "bob")
    assert state.approvals.get(RUN) == kept
    for wrong, message in (
        ({"approvers": "alice"}, "must be a list"),
        ({"skip": ["everything"]}, "must list some of planned_failover"),
        ({"two_person": "yes"}, "true or false"),
        ({"skipp": []}, "unknown key"),
        ({"recheck_preflight_after_minutes": -1}, "0 or more"),
    ):
        with pytest.raises(ApprovalRefused, match=message):
            ApprovalPolicy.from_settings(wrong, "the connection")
    policy = ApprovalPolicy.from_settings({"approvers": ["role:Op", "alice"]}, "x")
    assert (policy.users, policy.roles) == (("alice",), ("op",))


def test_a_full_drill_rejected_before_any_step_is_in_the_history_and_never_runs(
    failover: ProcedureRequest, state: StateStore
) -> None:
    drill = replace(failover, kind="drill", mode="full")
    recorded = _answer(drill, "alice", "Reject", procedure_id="dr_drill/run")
    assert recorded.decision == "rejected"
    rejected = reject(drill, "dr_drill/run", "rejected by alice")
    assert (rejected.kind, rejected.outcome) == ("drill", "rejected")
    [history] = state.runs.recent("drill")
    assert (history.outcome, history.mode, history.details["reason"]) == (
        "rejected",
        "full",
        "rejected by alice",
    )
    with pytest.raises(ProcedureEnded, match="was rejected"):
        run_steps(drill, "dr_drill/run", ["failover"])
    assert state.applications.get(APP).active_cluster == "primary"


@pytest.mark.parametrize(("kind", "modes"), [("failover", "planned, unplanned"),
                                             ("failback", "replicate, report")])  # fmt: skip
def test_a_mode_the_procedure_does_not_have_is_refused_by_name(
    failover: ProcedureRequest, kind: str, modes: str
) -> None:
    """The request's mode is checked against the procedure's own before anything is
    built on it (an unknown one used to reach the procedure as it was)."""
    request = replace(failover, kind=kind, mode="sideways")
    with pytest.raises(ReplicatorError, match=f"mode 'sideways' is none of {modes}"):
        run_steps(request, RUN, ["fence"])
