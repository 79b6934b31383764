"""Procedure runs recorded without Kafka, through the real procedure machinery
(`replicator.procedures.steps.Procedure`: its history run, step records, step
starts, leases, downtime), by procedures whose steps touch no cluster: for the
report tests and the offline browser test."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from replicator.errors import ReplicatorError
from replicator.procedures.steps import Procedure, Step, StepReport, record_decision
from replicator.statestore import StateStore

FLOW = "primary->dr"


class Recorded(Procedure):
    """A procedure of `kind` whose steps return canned reports (or raise)."""

    recovery_step = "switch"

    def __init__(self, store: StateStore, kind: str, reports: dict[str, StepReport | None]):
        super().__init__(store)
        self.kind = kind  # type: ignore[misc] - a ClassVar on real procedures
        self.reports = reports
        self.applications = ["orders"]

    def steps(self) -> list[Step]:
        return [Step(name, self._action(name)) for name in self.reports]

    def _action(self, name: str) -> Any:
        def act() -> StepReport:
            report = self.reports[name]
            if report is None:
                raise ReplicatorError(f"{name} could not reach cluster dr")
            return report

        return act

    def params(self) -> dict[str, Any]:
        return {"flow": FLOW, "applications": self.applications}

    def flow_name(self) -> str:
        return FLOW

    def mode(self) -> str:
        return "planned" if self.kind == "failover" else "non-disruptive"

    def rpo(self) -> int | None:
        return 0


def recorded_failover(store: StateStore) -> str:
    """A planned failover started by an Airflow user and approved by another; a
    verification of the flow afterwards (failed: lag)."""
    failover = Recorded(
        store,
        "failover",
        {
            "preflight": {"lag": 0},
            "fence": {"fenced": {"orders": {"epoch": 2}}},
            "drain": {"drained": True},
            "switch": {"switched": {"orders": "dr"}},
            "verify": {"ok": True},
        },
    )
    failover.started_by = "alice (Airflow user)"
    procedure_id = "failover/manual__2026-11-24T09:00:00+00:00"
    failover.run_step(procedure_id, "preflight")
    record_decision(store.runs, procedure_id, "approved", "bob", datetime.now(UTC))
    assert failover.run(procedure_id).outcome == "succeeded"
    return procedure_id
