"""DR drill, full mode: really fail a set of drill applications over and back.

Where the non-disruptive drill (`replicator.procedures.drill`) proves that the
DR side *would* resume every group right, the full drill does it: a planned
failover of the drill applications (typically the demo applications on drill
topics, so production is untouched) to the flow's target, with the reverse flow
started, then a failback with the forward flow resumed. Each half is the real
procedure, run under its own id (`<drill id>.failover`, `<drill id>.failback`)
and recorded in the history as such; rerunning the drill with the same id
resumes whichever half stopped, at the step it stopped.

The drill's own run records the failover's RPO and RTO (the figures an outage
would have had) and, in its details, the failback's.
"""

from __future__ import annotations

from typing import Any

from replicator.config.model import ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.procedures.approval import ApprovalGate, guarded
from replicator.procedures.failback import Failback
from replicator.procedures.failover import Failover
from replicator.procedures.steps import Procedure, ProcedureReport, Step, StepReport
from replicator.statestore import StateStore


class FullDrill(Procedure):
    """Failover and failback of `applications` over `flow` ("A->B"), measured."""

    kind = "drill"
    recovery_step = "failover"
    #: Set by an orchestrator that asks a person (`replicator.procedures.approval`):
    #: both halves first check the run's recorded answer (the halves themselves run
    #: under the drill's approval, so they carry no gate of their own).
    #: Always set here (Procedure's default is None).
    timeout_s: float

    def __init__(
        self,
        config: ReplicatorConfig,
        flow: str,
        applications: list[str],
        store: StateStore,
        *,
        dry_run: bool = False,
        max_lag: int = 100_000,
        timeout_s: float = 120.0,
        approval_gate: ApprovalGate | None = None,
    ) -> None:
        super().__init__(store, dry_run=dry_run, approval_gate=approval_gate)
        self.config = config
        self.flow = config.flow(flow)
        self.applications = applications
        self.max_lag = max_lag
        self.timeout_s = timeout_s

    def steps(self) -> list[Step]:
        steps = [Step("failover", self._failover), Step("failback", self._failback)]
        return guarded(self, steps, names=("failover", "failback"))

    def params(self) -> dict[str, Any]:
        return {"flow": self.flow.name, "applications": self.applications, "max_lag": self.max_lag}

    def flow_name(self) -> str:
        return self.flow.name

    def mode(self) -> str:
        return "full"

    def rpo(self) -> int | None:
        report = self.reported("failover")
        return None if report is None else report["rpo_records"]

    def rto(self) -> float | None:
        """The failover's RTO: how long the applications would have been down."""
        report = self.reported("failover")
        return None if report is None else report["rto_seconds"]

    def downtime(self) -> float | None:
        """The drill applications stop twice: from the failover's fence to its switch,
        and from the failback's; None until both halves switched."""
        halves = [self.reported(half) for half in ("failover", "failback")]
        downtimes: list[float | None] = [h.get("downtime_seconds") if h else None for h in halves]
        if None in downtimes:
            return None
        return round(sum(d for d in downtimes if d is not None), 3)

    def _failover(self) -> StepReport:
        failover = Failover(
            self.config,
            self.flow.name,
            self.applications,
            self.store,
            reverse=True,
            dry_run=self.dry_run,
            max_lag=self.max_lag,
            timeout_s=self.timeout_s,
        )
        return self._half(failover, "failover")

    def _failback(self) -> StepReport:
        failback = Failback(
            self.config,
            self.flow.name,
            self.applications,
            self.store,
            dry_run=self.dry_run,
            timeout_s=self.timeout_s,
        )
        return self._half(failback, "failback")

    def _half(self, procedure: Procedure, name: str) -> StepReport:
        """Run one half under its own id (resumed by a rerun); its figures and steps.
        The half holds its leases under the drill's id, so the drill keeps them from
        the failover to the end of the failback."""
        procedure.lease_owner = self.procedure_id
        procedure.started_by = self.started_by
        report: ProcedureReport = procedure.run(f"{self.procedure_id}.{name}")
        if not report.ok:
            raise ReplicatorError(
                f"the drill's {name} ({report.procedure_id}) failed: {report.error}"
            )
        return {
            "procedure_id": report.procedure_id,
            "outcome": report.outcome,
            "rpo_records": report.rpo_records,
            "rto_seconds": report.rto_seconds,
            "duration_seconds": report.duration_seconds,
            "downtime_seconds": report.downtime_seconds,
            "steps": {step.name: step.status for step in report.steps},
        }
