"""DR procedures as resumable steps: failover (planned and unplanned) and the
flow control they use. Each step is idempotent and reports what it did; see
`replicator.procedures.steps`."""

from replicator.procedures.failover import Failover, GroupCommit
from replicator.procedures.flows import live_workers, start_flow, stop_flow
from replicator.procedures.steps import (
    Procedure,
    ProcedureReport,
    Step,
    StepFailed,
    StepOutcome,
)

__all__ = [
    "Failover",
    "GroupCommit",
    "Procedure",
    "ProcedureReport",
    "Step",
    "StepFailed",
    "StepOutcome",
    "live_workers",
    "start_flow",
    "stop_flow",
]
