"""Operators that run the replicator's DR procedures step by step.

Each task runs one named step under the DAG run's procedure id
(`<dag id>/<run id>`), so the UI shows progress step by step, a failed step can
be cleared and retried alone, and a retry never applies a completed step twice
(the state store remembers it; see `replicator.procedures.steps`).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseBranchOperator, BaseOperator, Context, TriggerRule
from airflow.sdk.exceptions import AirflowSkipException

from replicator.procedures.orchestration import Kind, ProcedureRequest, run_all, run_step
from replicator_airflow.hooks import ReplicatorHook


def procedure_id(context: Context) -> str:
    return f"{context['dag'].dag_id}/{context['run_id']}"


def request(kind: Kind, context: Context, conn_id: str) -> ProcedureRequest:
    """The run's params plus where the configuration and the state store are."""
    settings = ReplicatorHook(conn_id).settings()
    params = {"config": settings.config, "state_url": settings.state_url, **context["params"]}
    return ProcedureRequest.from_params(kind, params)


class ProcedureStepOperator(BaseOperator):
    """Run step `step` of procedure `kind`; skipped when the run's mode has no such
    step. Runs after skipped upstream steps (trigger rule none_failed)."""

    template_fields = ()
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        kind: Kind,
        step: str,
        replicator_conn_id: str = "replicator_default",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(**kwargs)
        self.kind = kind
        self.step = step
        self.replicator_conn_id = replicator_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        wanted = request(self.kind, context, self.replicator_conn_id)
        if wanted.dry_run:
            raise AirflowSkipException("dry run: the plan task says what each step would do")
        report = run_step(wanted, procedure_id(context), self.step)
        if report is None:
            raise AirflowSkipException(
                f"a {wanted.mode or 'default'} {self.kind} has no {self.step}"
            )
        self.log.info("%s %s: %s", self.kind, self.step, report)
        return report


class ProcedureReportOperator(BaseOperator):
    """The whole procedure's outcome with RPO and RTO (every step done: all skipped),
    or in a dry run, what every step would do."""

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

    def execute(self, context: Context) -> dict[str, Any]:
        report = run_all(
            request(self.kind, context, self.replicator_conn_id), procedure_id(context)
        )
        self.log.info(
            "%s %s %s: RPO %s records, RTO %s s",
            self.kind,
            report.procedure_id,
            report.outcome,
            report.rpo_records,
            report.rto_seconds,
        )
        return {
            "procedure_id": report.procedure_id,
            "outcome": report.outcome,
            "rpo_records": report.rpo_records,
            "rto_seconds": report.rto_seconds,
            "steps": {step.name: step.report for step in report.steps},
        }


class ApprovalBranchOperator(BaseBranchOperator):
    """Before the switch of a planned failover: ask a human (task `approval`), unless
    the run is a dry run, unplanned (nobody waits at 3 a.m. for a dead primary), or
    its `skip_approval` param says so (drills)."""

    def __init__(self, *, approval: str, then: str, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.NONE_FAILED)
        super().__init__(**kwargs)
        self.approval = approval
        self.then = then

    def choose_branch(self, context: Context) -> list[str]:
        params = context["params"]
        needed = (
            params.get("mode", "planned") == "planned"
            and not params.get("skip_approval")
            and not params.get("dry_run")
        )
        # Both stay in the run when approval is needed: the step waits for the human.
        return [self.approval, self.then] if needed else [self.then]
