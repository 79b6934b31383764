"""Operators that run the replicator's DR procedures step by step.

Each task runs one named step under the DAG run's procedure id
(`<dag id>/<run id>`), so the UI shows progress step by step, a failed step can
be cleared and retried alone, and a retry never applies a completed step twice
(the state store remembers it; see `replicator.procedures.steps`).

Where the configuration and the state store are comes from the Airflow
connection (or the environment, see `hooks`), never from a run's conf, and a
conf may set only the params its DAG declares: whoever may trigger a DAG
cannot point a failover at another file or database.

So does the approval policy (`approval_policy`): the same connection's extra
`"approval"` object, else `$REPLICATOR_APPROVAL` (the same object as JSON); see
`replicator.procedures.approval` for its keys. Every task of a run that changes
production puts it in its request, so a run that asks to skip the question where
the deployment does not allow it fails at its first task, and the run's first
changing step acts only on the answer the approval task recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.common.compat.sdk import conf as airflow_conf
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import BaseBranchOperator, BaseHook, BaseOperator, Context, TriggerRule
from airflow.sdk.exceptions import AirflowNotFoundException, AirflowSkipException

from replicator.errors import ReplicatorError
from replicator.procedures import (
    ApprovalPolicy,
    Kind,
    ProcedureReport,
    ProcedureRequest,
    abort,
    answer,
    approval_needed,
    phases_line,
    plan,
    reject,
    report,
    run_all,
    run_steps,
)
from replicator.statestore import StateStore
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings
from replicator_airflow.notifiers import approval_answered
from replicator_airflow.procedure_ids import procedure_id


def settings(context: Context, conn_id: str) -> ReplicatorSettings:
    """The connection's settings, once the run's conf is known to set nothing but
    the DAG's declared params (Airflow copies any conf key into the params)."""
    declared = set(context["dag"].params)
    conf = context["dag_run"].conf or {}
    undeclared = sorted(set(conf) - declared)
    if undeclared:
        raise ReplicatorError(
            f"the run's conf sets {', '.join(undeclared)}, which DAG "
            f"{context['dag'].dag_id!r} does not declare (it takes "
            f"{', '.join(sorted(declared))}); the configuration and the state store are the "
            f"Airflow connection {conn_id!r}'s, not a run's: trigger it again without them"
        )
    return ReplicatorHook(conn_id).settings()


def request(kind: Kind, context: Context, conn_id: str) -> ProcedureRequest:
    """The run's params, with where the configuration and the state store are, the
    secrets the configuration may reference and the approval policy taken from the
    connection (they win over any param), and who triggered the run. Raises
    ApprovalRefused when the run asks to skip its approval where the deployment
    does not allow that, or would wait for it longer than the procedure's lease."""
    where = settings(context, conn_id)
    params = {
        **context["params"],
        "config": where.config,
        "state_url": where.state_url,
        "started_by": started_by(context),
    }
    wanted = replace(
        ProcedureRequest.from_params(kind, params),
        connection=where.secrets,
        approval=approval_policy(conn_id),
    )
    approval_needed(wanted)  # refuses a skip or a timeout the deployment does not allow
    return wanted


#: Without the connection: the approval policy as JSON (the connection's extra
#: "approval" object otherwise).
APPROVAL_ENV = "REPLICATOR_APPROVAL"


def approval_policy(conn_id: str) -> ApprovalPolicy:
    """The deployment's approval policy: the extra's "approval" object of connection
    `conn_id`, or without that connection `$REPLICATOR_APPROVAL`; the default (ask
    for every change, anyone Airflow lets answer) when neither sets one."""
    try:
        extra = BaseHook.get_connection(conn_id).extra_dejson
    except AirflowNotFoundException:
        raw = os.environ.get(APPROVAL_ENV)
        where = f"${APPROVAL_ENV}"
        try:
            given = json.loads(raw) if raw else None
        except ValueError as exc:
            raise ReplicatorError(f"{where} is not JSON ({exc}); see the approval policy") from exc
        return ApprovalPolicy.from_settings(given, where)
    return ApprovalPolicy.from_settings(
        extra.get("approval"), f'Airflow connection {conn_id!r}, extra "approval"'
    )


def airflow_roles() -> dict[str, str] | None:
    """Each Airflow user's role (lower case) where the auth manager is Airflow's
    simple one (`[core] simple_auth_manager_users`, "user:role"); None with any other
    auth manager, whose roles this plugin cannot read."""
    manager = airflow_conf.get("core", "auth_manager", fallback="") or ""
    if manager and not manager.endswith("SimpleAuthManager"):
        return None
    users = airflow_conf.get("core", "simple_auth_manager_users", fallback="admin:admin")
    roles = {}
    for entry in (u.strip() for u in users.split(",")):
        if entry:
            user, _, role = entry.partition(":")
            roles[user.strip()] = role.strip().lower()
    return roles


def assigned_approvers(policy: ApprovalPolicy, triggered_by: str | None) -> list[dict[str, str]]:
    """Who may answer the question (the HITL assigned users; [] when the policy names
    nobody: then whoever Airflow lets answer may). The run's own triggerer is left
    out under the two-person rule. ReplicatorError when that leaves nobody, or the
    policy names roles the auth manager's users cannot be read for."""
    if not policy.restricted:
        return []
    users = list(policy.users)
    if policy.roles:
        roles = airflow_roles()
        if roles is None:
            raise ReplicatorError(
                f"{policy.where} names roles ({', '.join(policy.roles)}), which this plugin can "
                "resolve only with Airflow's simple auth manager; list the approvers' user ids"
            )
        wanted = {r.lower() for r in policy.roles}
        users += sorted(user for user, role in roles.items() if role in wanted)
    if policy.two_person and triggered_by:
        users = [u for u in users if u != triggered_by]
    if not users:
        raise ReplicatorError(
            f"nobody may answer this approval: {policy.where} allows "
            f"{policy.describe_approvers()}"
            + (f", and {triggered_by} triggered the run (two-person rule)" if triggered_by else "")
            + "; add approvers to the policy, or have someone else trigger the run"
        )
    return [{"id": user, "name": user} for user in dict.fromkeys(users)]


def started_by(context: Context) -> str:
    """Who started the DAG run: the Airflow user who triggered it, else how it
    was started (a schedule, an asset event)."""
    run = context["dag_run"]
    user = run.triggering_user_name
    return f"{user} (Airflow user)" if user else f"Airflow ({run.run_type} run)"


def summary(outcome: ProcedureReport) -> dict[str, Any]:
    """A procedure's outcome and figures, for the log and XCom."""
    return {
        "procedure_id": outcome.procedure_id,
        "outcome": outcome.outcome,
        "rpo_records": outcome.rpo_records,
        "rto_seconds": outcome.rto_seconds,
        "duration_seconds": outcome.duration_seconds,
        "downtime_seconds": outcome.downtime_seconds,
        "phases": outcome.phases,
        "steps": {step.name: step.report for step in outcome.steps},
    }


def _log_figures(operator: BaseOperator, outcome: ProcedureReport) -> None:
    operator.log.info(
        "%s %s %s: RPO %s records, RTO %s s, duration %s s, applications down %s s",
        outcome.kind,
        outcome.procedure_id,
        outcome.outcome,
        outcome.rpo_records,
        outcome.rto_seconds,
        outcome.duration_seconds,
        outcome.downtime_seconds,
    )
    if outcome.phases:
        operator.log.info("cutover phases, s after the fence: %s", phases_line(outcome.phases))


class _ProcedureOperator(BaseOperator):
    """A task of procedure `kind`; runs after skipped upstream tasks (trigger rule
    none_failed: steps a mode does not have are skipped)."""

    template_fields = ()

    def __init__(
        self,
        *,
        kind: Kind,
        replicator_conn_id: str = ReplicatorHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(**kwargs)
        self.kind = kind
        self.replicator_conn_id = replicator_conn_id

    def request(self, context: Context) -> ProcedureRequest:
        return request(self.kind, context, self.replicator_conn_id)


class ProcedureStepOperator(_ProcedureOperator):
    """Run `steps` of procedure `kind` in order (one, or the cutover's; see
    `replicator.procedures.orchestration.dag_tasks`); skipped when the run's mode
    has none of them, and in a dry run (the `plan` task says what each would do).
    Returns the step's report, or with several steps each one's by name."""

    ui_color = "#e8f1fb"

    def __init__(self, *, steps: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps = list(steps)

    def execute(self, context: Context) -> Any:
        wanted = self.request(context)
        if wanted.dry_run:
            raise AirflowSkipException("dry run: the plan task says what each step would do")
        outcomes = run_steps(wanted, procedure_id(context), self.steps)
        if not outcomes:
            raise AirflowSkipException(
                f"a {wanted.mode or 'default'} {self.kind} has no {' or '.join(self.steps)}"
            )
        for step, outcome in outcomes.items():
            self.log.info("%s %s: %s", self.kind, step, outcome)
        return outcomes if len(self.steps) > 1 else outcomes[self.steps[0]]


class ProcedurePlanOperator(_ProcedureOperator):
    """What every step would do (a dry run of the whole procedure, which changes
    nothing): the answer of a dry-run DAG run, and with `for_approval` the body of
    the approval question. Skipped when neither is asked for."""

    def __init__(self, *, for_approval: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.for_approval = for_approval

    def execute(self, context: Context) -> dict[str, Any]:
        wanted = self.request(context)
        if not (wanted.dry_run or (self.for_approval and approval_needed(wanted))):
            raise AirflowSkipException("not a dry run, and nobody to ask: no plan needed")
        planned = plan(wanted)
        for step in planned.steps:
            self.log.info("%s %s would: %s", self.kind, step.name, step.report)
        return {step.name: step.report for step in planned.steps}


class ProcedureReportOperator(_ProcedureOperator):
    """The run's outcome with RPO, RTO, duration and downtime, read from the state
    store: it runs no step. Fails when the procedure did not succeed; skipped in a
    dry run (the `plan` task has the answer)."""

    def execute(self, context: Context) -> dict[str, Any]:
        wanted = self.request(context)
        if wanted.dry_run:
            raise AirflowSkipException("dry run: the plan task says what each step would do")
        outcome = report(wanted, procedure_id(context))
        _log_figures(self, outcome)
        return summary(outcome)


class ProcedureRunOperator(_ProcedureOperator):
    """Run every step of procedure `kind` in one task (the drill, whose steps are
    not worth a task each); its outcome and figures."""

    def execute(self, context: Context) -> dict[str, Any]:
        outcome = run_all(self.request(context), procedure_id(context))
        _log_figures(self, outcome)
        return summary(outcome)


class ApprovalBranchOperator(BaseBranchOperator):
    """Before anything is changed: ask a person (task `approval`) when the run of
    procedure `kind` must (`replicator.procedures.approval_needed`: the deployment's
    policy decides, never the run), then go on with task `then`, which waits for the
    answer. Skipping the question here lets nothing through: the run's first
    changing step checks the recorded answer itself."""

    def __init__(
        self,
        *,
        kind: Kind,
        approval: str,
        then: str,
        replicator_conn_id: str = ReplicatorHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(**kwargs)
        self.kind = kind
        self.approval = approval
        self.then = then
        self.replicator_conn_id = replicator_conn_id

    def choose_branch(self, context: Context) -> list[str]:
        # Both stay in the run when approval is needed: `then` waits for the human.
        needed = approval_needed(request(self.kind, context, self.replicator_conn_id))
        return [self.approval, self.then] if needed else [self.then]


class ProcedureApprovalOperator(ApprovalOperator):
    """Ask a person whether procedure `kind` may go on, with the findings of the
    tasks `findings` (their XCom) in the question.

    Who may answer is the deployment's approval policy (`approval_policy`): its
    users and the users of its roles are the question's assigned users (Airflow
    refuses anyone else), less the run's triggerer under the two-person rule. The
    question waits at most `approval_timeout_minutes`, which may not exceed the
    procedure's lease.

    The answer is recorded in the state store (`replicator.procedures.answer`),
    where the run's first changing step checks it: Approve by an allowed approver,
    the tasks after it run. Reject, no answer within the timeout, or an answer the
    policy refuses (the triggerer under the two-person rule, someone not allowed):
    the run is recorded as "rejected" in the history (whatever it fenced or stopped
    would run again; asked before the fence, that is nothing), and every task after
    it is skipped, whatever its trigger rule, `report` included; no step of the run
    can run afterwards, not even cleared (`replicator.procedures.steps.ProcedureEnded`)."""

    def __init__(
        self,
        *,
        kind: Kind,
        findings: Sequence[str] = ("preflight", "plan"),
        replicator_conn_id: str = ReplicatorHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("defaults", ApprovalOperator.REJECT)  # no answer is a no
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(ignore_downstream_trigger_rules=True, **kwargs)
        self.kind = kind
        self.findings = list(findings)
        self.replicator_conn_id = replicator_conn_id

    def execute(self, context: Context) -> Any:
        wanted = request(self.kind, context, self.replicator_conn_id)  # checks the timeout
        minutes = float(context["params"]["approval_timeout_minutes"])
        self.response_timeout = timedelta(minutes=minutes)
        assert wanted.approval is not None  # `request` always sets the policy
        self.assigned_users = assigned_approvers(wanted.approval, triggered_by(context)) or None
        found = {task: context["ti"].xcom_pull(task_ids=task) for task in self.findings}
        self.body = question(self.body or "", found, minutes, wanted.approval)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if "error" not in event and not self._record(context, event):
            event = {**event, "chosen_options": [self.REJECT]}  # skip every task after it
        return super().execute_complete(context, event)

    def _record(self, context: Context, event: dict[str, Any]) -> bool:
        """Record the answer, who gave it and who triggered the run, where the run's
        first changing step checks it; anything but an approval the policy accepts
        ends the run as rejected (False)."""
        wanted = request(self.kind, context, self.replicator_conn_id)
        person = event.get("responded_by_user") or {}
        who, name = person.get("id"), person.get("name")
        roles = airflow_roles() or {}
        recorded = answer(
            wanted,
            procedure_id(context),
            chosen=list(event.get("chosen_options") or []),
            approver=str(who) if who is not None else None,
            approver_name=name,
            approver_roles=[roles[str(who)]] if str(who) in roles else [],
            triggered_by=triggered_by(context),
            answered_at=event.get("responded_at") or datetime.now(UTC),
            timed_out=bool(event.get("timedout")) or not who,
        )
        by = recorded.approver_name or recorded.approver
        said = f"{recorded.decision} by {by}" if by else recorded.decision
        approval_answered(context, procedure_id(context), said)
        if recorded.decision == "approved":
            return True
        minutes = float(context["params"]["approval_timeout_minutes"])
        reason = {
            "no answer": f"no answer to the approval within {minutes:g} min",
            "rejected": f"rejected by {by}",
        }.get(recorded.decision, f"approval refused: {recorded.details.get('reason')}")
        rejected = reject(wanted, procedure_id(context), reason)
        self.log.warning("%s rejected (%s): %s", self.kind, reason, rejected.as_dict())
        return False


def triggered_by(context: Context) -> str | None:
    """The Airflow user who triggered the run (None: a schedule or an event)."""
    return context["dag_run"].triggering_user_name or None


def question(intro: str, findings: dict[str, Any], minutes: float, policy: ApprovalPolicy) -> str:
    """The approval's body: the question, who may answer, then each finding as JSON
    (Markdown)."""
    who = f"May answer: {policy.describe_approvers()}"
    if policy.two_person:
        who += ", not whoever triggered the run"
    parts = [intro.strip(), f"No answer within {minutes:g} min counts as Reject. {who}."]
    for task, found in findings.items():
        if found is not None:
            shown = json.dumps(found, indent=1, sort_keys=True, default=str)
            parts.append(f"**{task}**\n\n```json\n{shown}\n```")
    return "\n\n".join(parts)


class ProcedureAbortOperator(BaseOperator):
    """Abort the procedure whose id is the run's `procedure_id` param: unfence its
    applications, restart the flows it stopped, record it as aborted (see
    `replicator.procedures.abort`)."""

    template_fields = ()

    def __init__(
        self, *, replicator_conn_id: str = ReplicatorHook.default_conn_name, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.replicator_conn_id = replicator_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        where = settings(context, self.replicator_conn_id)
        params = context["params"]
        undone = abort(
            StateStore(where.state_url),
            params["procedure_id"],
            reason=params.get("reason") or f"aborted by {procedure_id(context)}",
        )
        self.log.info("aborted: %s", undone.as_dict())
        return undone.as_dict()
