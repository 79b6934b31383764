"""Operators that run the replicator's DR procedures step by step.

Each task runs one named step under the DAG run's procedure id
(`<dag id>/<run id>`), so the UI shows progress step by step, a failed step can
be cleared and retried alone, and a retry never applies a completed step twice
(the state store remembers it; see `replicator.procedures.steps`).

Where the configuration and the state store are comes from the Airflow
connection (or the environment, see `hooks`), never from a run's conf, and a
conf may set only the params its DAG declares: whoever may trigger a DAG
cannot point a failover at another file or database.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import BaseBranchOperator, BaseOperator, Context, TriggerRule
from airflow.sdk.exceptions import AirflowSkipException

from replicator.errors import ReplicatorError
from replicator.procedures import (
    Kind,
    ProcedureReport,
    ProcedureRequest,
    abort,
    decide,
    plan,
    reject,
    report,
    run_all,
    run_steps,
)
from replicator.statestore import StateStore
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings
from replicator_airflow.notifiers import approval_answered


def procedure_id(context: Context) -> str:
    return f"{context['dag'].dag_id}/{context['run_id']}"


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
    """The run's params, with where the configuration and the state store are and
    the secrets the configuration may reference taken from the connection (they win
    over any param), and who triggered the run."""
    where = settings(context, conn_id)
    params = {
        **context["params"],
        "config": where.config,
        "state_url": where.state_url,
        "started_by": started_by(context),
    }
    return replace(ProcedureRequest.from_params(kind, params), connection=where.secrets)


def started_by(context: Context) -> str:
    """Who started the DAG run: the Airflow user who triggered it, else how it
    was started (a schedule, an asset event)."""
    run = context["dag_run"]
    user = run.triggering_user_name
    return f"{user} (Airflow user)" if user else f"Airflow ({run.run_type} run)"


def approval_needed(params: dict[str, Any]) -> bool:
    """A planned failover asks a person, unless it is a dry run, or its
    `skip_approval` param says so (drills); an unplanned one does not: nobody waits
    at 3 a.m. for a dead primary."""
    return (
        params.get("mode", "planned") == "planned"
        and not params.get("skip_approval")
        and not params.get("dry_run")
    )


def summary(outcome: ProcedureReport) -> dict[str, Any]:
    """A procedure's outcome and figures, for the log and XCom."""
    return {
        "procedure_id": outcome.procedure_id,
        "outcome": outcome.outcome,
        "rpo_records": outcome.rpo_records,
        "rto_seconds": outcome.rto_seconds,
        "duration_seconds": outcome.duration_seconds,
        "downtime_seconds": outcome.downtime_seconds,
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
        params = context["params"]
        if not (params.get("dry_run") or (self.for_approval and approval_needed(params))):
            raise AirflowSkipException("not a dry run, and nobody to ask: no plan needed")
        planned = plan(self.request(context))
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
    """Before anything is changed: ask a person (task `approval`) when
    `approval_needed`, then go on with task `then`, which waits for the answer."""

    def __init__(self, *, approval: str, then: str, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(**kwargs)
        self.approval = approval
        self.then = then

    def choose_branch(self, context: Context) -> list[str]:
        # Both stay in the run when approval is needed: `then` waits for the human.
        needed = approval_needed(context["params"])
        return [self.approval, self.then] if needed else [self.then]


class ProcedureApprovalOperator(ApprovalOperator):
    """Ask a person whether procedure `kind` may go on, with the findings of the
    tasks `findings` (their XCom) in the question.

    Approve: the tasks after it run. Reject, or no answer within the run's
    `approval_timeout_minutes` param: the run is recorded as "rejected" in the
    history (whatever it fenced or stopped would run again; asked before the fence,
    that is nothing), and every task after it is skipped, whatever its trigger
    rule, `report` included; no step of the run can run afterwards, not even
    cleared (`replicator.procedures.steps.ProcedureEnded`)."""

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
        minutes = float(context["params"]["approval_timeout_minutes"])
        self.response_timeout = timedelta(minutes=minutes)
        found = {task: context["ti"].xcom_pull(task_ids=task) for task in self.findings}
        self.body = question(self.body or "", found, minutes)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if "error" not in event:
            self._record(context, event)
        return super().execute_complete(context, event)

    def _record(self, context: Context, event: dict[str, Any]) -> None:
        """Record the answer and who gave it, for the run's report; anything but
        Approve ends the run as rejected."""
        wanted = request(self.kind, context, self.replicator_conn_id)
        who = (event.get("responded_by_user") or {}).get("name")
        approved = event.get("chosen_options") == [self.APPROVE]
        timed_out = bool(event.get("timedout")) or not who
        answer = "approved" if approved else "no answer" if timed_out else "rejected"
        at = event.get("responded_at") or datetime.now(UTC)
        decide(wanted, procedure_id(context), answer, who, at)
        approval_answered(context, procedure_id(context), f"{answer} by {who}" if who else answer)
        if not approved:
            minutes = float(context["params"]["approval_timeout_minutes"])
            reason = (
                f"no answer to the approval within {minutes:g} min"
                if timed_out
                else f"rejected by {who}"
            )
            rejected = reject(wanted, procedure_id(context), reason)
            self.log.warning("%s rejected (%s): %s", self.kind, reason, rejected.as_dict())


def question(intro: str, findings: dict[str, Any], minutes: float) -> str:
    """The approval's body: the question, then each finding as JSON (Markdown)."""
    parts = [intro.strip(), f"No answer within {minutes:g} min counts as Reject."]
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
