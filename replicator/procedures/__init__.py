"""DR procedures as resumable steps: failover (planned and unplanned), failback, the DR drill,
offset reset, aborting a run, the flow control they use, and `orchestration`, the functions
behind each procedure DAG task. Each step is idempotent and reports what it did; see
`replicator.procedures.steps`. It may import `offsets`, `engine` and everything below them,
and the other packages of its layer (`operations`, `verification`) as long
as no import circle forms; only `cli` and the Airflow plugins and DAGs import it, through
the names below."""

from replicator.engine.status import live_workers
from replicator.procedures.abort import AbortReport, abort
from replicator.procedures.approval import ApprovalPolicy, ApprovalRefused
from replicator.procedures.drill import Drill
from replicator.procedures.drill_check import DrillPosition, PartitionCheck
from replicator.procedures.failback import Failback
from replicator.procedures.failover import Failover
from replicator.procedures.flows import start_flow, stop_flow
from replicator.procedures.full_drill import FullDrill
from replicator.procedures.group_moves import GroupMove
from replicator.procedures.offset_reset import OffsetReset
from replicator.procedures.orchestration import (
    Kind,
    ProcedureRequest,
    answer,
    approval_needed,
    dag_tasks,
    decide,
    plan,
    reject,
    report,
    run_all,
    run_steps,
)
from replicator.procedures.phases import describe as describe_phases
from replicator.procedures.phases import phases_line
from replicator.procedures.steps import (
    Procedure,
    ProcedureReport,
    Step,
    StepFailed,
    StepOutcome,
)

__all__ = [
    "AbortReport",
    "ApprovalPolicy",
    "ApprovalRefused",
    "Drill",
    "DrillPosition",
    "Failback",
    "Failover",
    "FullDrill",
    "GroupMove",
    "Kind",
    "OffsetReset",
    "PartitionCheck",
    "Procedure",
    "ProcedureReport",
    "ProcedureRequest",
    "Step",
    "StepFailed",
    "StepOutcome",
    "abort",
    "answer",
    "approval_needed",
    "dag_tasks",
    "decide",
    "describe_phases",
    "live_workers",
    "phases_line",
    "plan",
    "reject",
    "report",
    "run_all",
    "run_steps",
    "start_flow",
    "stop_flow",
]
