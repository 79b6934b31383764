"""DR procedures as resumable steps: failover (planned and unplanned), failback, the DR drill,
offset reset, and the flow control they use. Each step is idempotent and reports what it did; see
`replicator.procedures.steps`."""

from replicator.procedures.drill import Drill, DrillPosition, PartitionCheck
from replicator.procedures.failback import Failback
from replicator.procedures.failover import Failover
from replicator.procedures.flows import live_workers, start_flow, stop_flow
from replicator.procedures.full_drill import FullDrill
from replicator.procedures.group_moves import GroupMove
from replicator.procedures.offset_reset import OffsetReset
from replicator.procedures.steps import (
    Procedure,
    ProcedureReport,
    Step,
    StepFailed,
    StepOutcome,
)

__all__ = [
    "Drill",
    "DrillPosition",
    "Failback",
    "Failover",
    "FullDrill",
    "GroupMove",
    "OffsetReset",
    "PartitionCheck",
    "Procedure",
    "ProcedureReport",
    "Step",
    "StepFailed",
    "StepOutcome",
    "live_workers",
    "start_flow",
    "stop_flow",
]
