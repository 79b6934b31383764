"""Who may let a procedure change production, and the check at the point of action.

Every run that changes production asks a person first: a planned or unplanned
failover, a failback, a full drill (`change_of`). Only the deployment's approval
policy (`ApprovalPolicy`, which the orchestrator reads from where the deployment
keeps its settings, never from a run's parameters) may let a kind of run go
without one (`skip`), and even then only a run that asks for it (`skip_approval`);
a run that asks for it where the policy does not allow it is refused before it
does anything (`check_request`).

The policy names who may answer (`approvers`: Airflow user ids, and `role:NAME`
for every user of a role), whether the run's own triggerer may not
(`two_person`), and after how many minutes between the preflight and the answer
the preflight runs again before anything changes (`recheck_preflight_after_minutes`).

The orchestrator's approval task records the answer in the state store
(`answer_of`, `store.approvals.record`); the first step of the run that changes
anything reads it there (`ApprovalGate`, which the failover, failback and full drill
put in front of their changing steps) and refuses unless it is Approve, by an
allowed approver, for this run. So a question nobody answered (the approval task
marked successful by hand, a cleared branch, a forged run) changes nothing: the
answer is checked where the action is, not where it was asked.

The question waits at most as long as the procedure's lease lasts
(`check_timeout`): a longer wait would let the lease on the flow and the
applications lapse between the preflight and the fence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from replicator.errors import ReplicatorError
from replicator.statestore import DEFAULT_LEASE_TTL_S, ApprovalRecord
from replicator.statestore.approvals import ApprovalStore

if TYPE_CHECKING:
    from replicator.procedures.steps import Procedure, Step, StepReport

log = logging.getLogger(__name__)

#: The kinds of run that change production, as the policy's `skip` names them.
CHANGES = ("planned_failover", "unplanned_failover", "failback", "full_drill")
#: Minutes between the preflight and the answer after which the preflight runs again.
DEFAULT_RECHECK_AFTER_MINUTES = 10.0
#: The policy's keys.
_KEYS = ("approvers", "two_person", "skip", "recheck_preflight_after_minutes")
_ROLE = "role:"
APPROVED, REJECTED, NO_ANSWER, REFUSED = "approved", "rejected", "no answer", "refused"


class ApprovalRefused(ReplicatorError):
    """A run may not do what it asks without an approval it does not have."""


def change_of(kind: str, mode: str | None) -> str | None:
    """The kind of production change a run of procedure `kind` in `mode` is (one of
    CHANGES), or None when it changes no production (a non-disruptive drill)."""
    if kind == "failover":
        return f"{mode or 'planned'}_failover"
    if kind == "failback":
        return "failback"
    if kind == "drill" and mode == "full":
        return "full_drill"
    return None


@dataclass(frozen=True)
class ApprovalPolicy:
    """The deployment's rules for approvals (see the module's docstring). The
    default asks a person for every change, lets any user who may answer the
    question answer it, and re-runs the preflight after 10 minutes."""

    #: Airflow user ids who may answer (empty, with no roles: whoever Airflow lets).
    users: tuple[str, ...] = ()
    #: Airflow roles whose users may answer (lower case: Airflow's role names).
    roles: tuple[str, ...] = ()
    #: The run's own triggerer may not approve it.
    two_person: bool = False
    #: The changes a run may make without asking (when it asks for that).
    skip: frozenset[str] = frozenset()
    recheck_after_minutes: float = DEFAULT_RECHECK_AFTER_MINUTES
    #: Where the policy was read, for messages (e.g. the Airflow connection's extra).
    where: str = "the deployment's approval policy"

    @classmethod
    def from_settings(cls, given: object, where: str) -> ApprovalPolicy:
        """The policy a deployment setting holds, e.g.
        `{"approvers": ["alice", "role:Op"], "two_person": true,
        "skip": ["unplanned_failover"], "recheck_preflight_after_minutes": 10}`;
        None or {} is the default. ApprovalRefused naming `where` and the key when
        a value is wrong."""
        if given is None:
            return cls(where=where)
        if not isinstance(given, Mapping):
            raise ApprovalRefused(f"{where}: expected an object with {', '.join(_KEYS)}")
        unknown = sorted(set(given) - set(_KEYS))
        if unknown:
            raise ApprovalRefused(
                f"{where}: unknown key(s) {', '.join(unknown)}; the policy takes {', '.join(_KEYS)}"
            )
        approvers = given.get("approvers", [])
        if not isinstance(approvers, list) or not all(
            isinstance(a, str) and a.strip() and a.strip() != _ROLE for a in approvers
        ):
            raise ApprovalRefused(
                f'{where}: "approvers" must be a list of Airflow user ids and "role:NAME" '
                'entries, e.g. ["alice", "role:Op"]'
            )
        names = [a.strip() for a in approvers]
        two_person = given.get("two_person", False)
        if not isinstance(two_person, bool):
            raise ApprovalRefused(f'{where}: "two_person" must be true or false')
        skip = given.get("skip", [])
        if not isinstance(skip, list) or not set(skip) <= set(CHANGES):
            raise ApprovalRefused(
                f'{where}: "skip" must list some of {", ".join(CHANGES)} '
                f"(the changes a run may make without asking), got {skip!r}"
            )
        minutes = given.get("recheck_preflight_after_minutes", DEFAULT_RECHECK_AFTER_MINUTES)
        if isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes < 0:
            raise ApprovalRefused(
                f'{where}: "recheck_preflight_after_minutes" must be a number of minutes '
                f"(0 or more), got {minutes!r}"
            )
        return cls(
            users=tuple(n for n in names if not n.startswith(_ROLE)),
            roles=tuple(n[len(_ROLE) :].strip().lower() for n in names if n.startswith(_ROLE)),
            two_person=two_person,
            skip=frozenset(skip),
            recheck_after_minutes=float(minutes),
            where=where,
        )

    @property
    def restricted(self) -> bool:
        """Only the listed users and roles may answer."""
        return bool(self.users or self.roles)

    def may_approve(self, user: str | None, roles: Iterable[str]) -> bool:
        """Whether `user` (holding `roles`) is an allowed approver."""
        if not user:
            return False
        held = {role.lower() for role in roles}
        return not self.restricted or user in self.users or bool(held & set(self.roles))

    def describe_approvers(self) -> str:
        if not self.restricted:
            return "any user Airflow lets answer the question"
        listed = [*self.users, *(f"role {r}" for r in self.roles)]
        return ", ".join(listed)


def check_timeout(minutes: float, lease_ttl_s: float = DEFAULT_LEASE_TTL_S) -> None:
    """Refuse an approval timeout longer than the procedure's lease."""
    if not minutes > 0:
        raise ApprovalRefused(f"approval_timeout_minutes must be more than 0, got {minutes:g}")
    if minutes * 60 > lease_ttl_s:
        raise ApprovalRefused(
            f"approval_timeout_minutes {minutes:g} is longer than the procedure's lease "
            f"({lease_ttl_s / 60:g} min): the run's hold on its flow and applications would "
            f"lapse while the question waits; trigger it again with at most "
            f"{lease_ttl_s / 60:g} minutes"
        )


def check_request(
    policy: ApprovalPolicy,
    kind: str,
    mode: str | None,
    *,
    dry_run: bool,
    skip_requested: bool,
    timeout_minutes: float | None = None,
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
) -> bool:
    """Whether a run must ask a person before it changes anything. Raises
    ApprovalRefused when it asks to skip the question where the policy does not
    allow it, or would wait longer than its lease."""
    if timeout_minutes is not None:
        check_timeout(timeout_minutes, lease_ttl_s)
    change = change_of(kind, mode)
    if change is None or dry_run:
        return False
    if skip_requested:
        if change not in policy.skip:
            allowed = ", ".join(sorted(policy.skip)) or "none"
            raise ApprovalRefused(
                f"skip_approval: this deployment does not let a {change.replace('_', ' ')} run "
                f"without an approval (its policy, {policy.where}, lets these skip: {allowed}); "
                f"nothing was changed: trigger it again without skip_approval and have "
                f"{policy.describe_approvers()} approve it"
            )
        return False
    return True


def answer_of(
    policy: ApprovalPolicy,
    *,
    procedure_id: str,
    kind: str,
    chosen: Collection[str],
    approver: str | None,
    approver_name: str | None,
    approver_roles: Iterable[str] = (),
    triggered_by: str | None,
    answered_at: datetime,
    timed_out: bool = False,
) -> ApprovalRecord:
    """The answer to record from a person's response (`chosen`: the options picked,
    "Approve" or "Reject"), judged by the policy: an Approve by someone the policy
    does not allow, or by the run's own triggerer under the two-person rule, is
    recorded as "refused" with the reason."""
    roles = tuple(sorted(set(approver_roles)))
    details: dict[str, Any] = {
        "approvers": policy.describe_approvers(),
        "two_person": policy.two_person,
    }
    if timed_out or not approver:
        decision = NO_ANSWER
    elif list(chosen) != ["Approve"]:
        decision = REJECTED
    elif not policy.may_approve(approver, roles):
        decision = REFUSED
        details["reason"] = (
            f"{approver_name or approver} is not an allowed approver "
            f"({policy.describe_approvers()}, {policy.where})"
        )
    elif policy.two_person and triggered_by and triggered_by in (approver, approver_name):
        decision = REFUSED
        details["reason"] = (
            f"{approver_name or approver} triggered the run and may not approve it: the "
            f"deployment's two-person rule ({policy.where}) needs another approver"
        )
    else:
        decision = APPROVED
    return ApprovalRecord(
        procedure_id=procedure_id,
        kind=kind,
        decision=decision,
        approver=approver or None,
        approver_name=approver_name or None,
        approver_roles=roles,
        triggered_by=triggered_by,
        answered_at=answered_at.astimezone(UTC),
        recorded_at=answered_at.astimezone(UTC),
        details=details,
    )


@dataclass(frozen=True)
class ApprovalGate:
    """What the first changing step of a run checks (see the module's docstring):
    built by the orchestrator from the deployment's policy and the run's request."""

    policy: ApprovalPolicy
    change: str | None
    skip_requested: bool = False

    def check(self, procedure: Procedure) -> None:
        """Return when `procedure`'s run may change production now; else raise
        ApprovalRefused saying what is missing. After a late answer the preflight
        runs again first (once), and its failure stops the run here."""
        if procedure.dry_run or self.change is None:
            return
        if self.skip_requested and self.change in self.policy.skip:
            return
        pid, what = procedure.procedure_id, self.change.replace("_", " ")
        if self.skip_requested:  # the policy changed since the run was checked
            raise ApprovalRefused(
                f"{what} {pid}: skip_approval is no longer allowed by {self.policy.where}; "
                "nothing was changed: start a new run and have it approved"
            )
        answer = procedure.store.approvals.get(pid)
        if answer is None:
            raise ApprovalRefused(
                f"{what} {pid}: no approval is recorded for this run, so nothing is changed. "
                "The deployment requires one (was the approval task marked successful by hand, "
                "or skipped?); start a new run and have "
                f"{self.policy.describe_approvers()} answer its question"
            )
        if answer.kind != procedure.kind:
            raise ApprovalRefused(
                f"{what} {pid}: the recorded approval is of a {answer.kind}, not this run's "
                f"{procedure.kind}; nothing is changed: start a new run"
            )
        if answer.decision != APPROVED:
            reason = answer.details.get("reason") or (
                f"by {answer.approver_name or answer.approver}" if answer.approver else ""
            )
            raise ApprovalRefused(
                f"{what} {pid}: its approval was answered {answer.decision!r} {reason}".rstrip()
                + "; nothing is changed: start a new run to try again"
            )
        self._check_approver(answer, what, pid)
        self._recheck_preflight(procedure, answer)

    def _check_approver(self, answer: ApprovalRecord, what: str, pid: str) -> None:
        who = answer.approver_name or answer.approver
        if not self.policy.may_approve(answer.approver, answer.approver_roles):
            raise ApprovalRefused(
                f"{what} {pid}: approved by {who}, who is not an allowed approver "
                f"({self.policy.describe_approvers()}, {self.policy.where}); nothing is changed"
            )
        if (
            self.policy.two_person
            and answer.triggered_by
            and answer.triggered_by in (answer.approver, who)
        ):
            raise ApprovalRefused(
                f"{what} {pid}: approved by {who}, who triggered it; the deployment's "
                f"two-person rule ({self.policy.where}) needs another approver; nothing is changed"
            )

    def _recheck_preflight(self, procedure: Procedure, answer: ApprovalRecord) -> None:
        """Run the preflight again when the answer came long after it (once per run)."""
        if answer.preflight_rechecked_at is not None:
            return
        steps = {step.name: step for step in procedure.steps()}
        saved = procedure.store.runs.step(procedure.procedure_id, "preflight")
        if "preflight" not in steps or saved is None or saved.state != "done":
            return
        late = answer.answered_at - saved.updated_at
        if late <= timedelta(minutes=self.policy.recheck_after_minutes):
            return
        minutes = late.total_seconds() / 60
        try:
            found = steps["preflight"].action()
        except Exception as exc:
            raise ApprovalRefused(
                f"{procedure.kind} {procedure.procedure_id}: approved {minutes:.0f} min after "
                f"its preflight, which ran again before anything changes and now fails: {exc}; "
                "nothing is changed"
            ) from exc
        procedure.store.approvals.preflight_rechecked(procedure.procedure_id, datetime.now(UTC))
        log.info(
            "%s %s: approved %.0f min after its preflight; preflight ran again: %s",
            procedure.kind,
            procedure.procedure_id,
            minutes,
            found,
        )


def guarded(procedure: Procedure, steps: list[Step], names: Collection[str] = ()) -> list[Step]:
    """`steps` with the procedure's approval gate (if it has one) in front of each
    step that changes something: those named, or else those with a preview (the
    steps' contract: a step without one is read-only)."""
    gate = procedure.approval_gate
    if gate is None:
        return steps
    wanted = set(names) or {step.name for step in steps if step.preview is not None}
    return [
        replace(step, action=_checked(gate, procedure, step.action))
        if step.name in wanted
        else step
        for step in steps
    ]


def _checked(
    gate: ApprovalGate, procedure: Procedure, action: Callable[[], StepReport]
) -> Callable[[], StepReport]:
    def run() -> StepReport:
        gate.check(procedure)
        return action()

    return run


def record(store: ApprovalStore, answer: ApprovalRecord) -> ApprovalRecord:
    """Record `answer` (the first answer of a run stays: a question is answered once)."""
    recorded = store.record(answer)
    log.info(
        "%s %s: approval %s by %s (triggered by %s)",
        recorded.kind,
        recorded.procedure_id,
        recorded.decision,
        recorded.approver_name or recorded.approver or "nobody",
        recorded.triggered_by or "a schedule",
    )
    return recorded
