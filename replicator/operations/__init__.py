"""Running and watching the replicator: the `runner` that keeps a configuration's flows
running (replication tasks and the checkpoint loop in supervised, restarted
worker processes; it sits here, not in `engine`, because it starts the offsets
layer's checkpoint loop too), `launchers` that start workers (local processes, or
containers: `docker_launcher`, or Kubernetes Deployments: `kubernetes_launcher`; the
supervisor's is chosen by `launcher_choice`, which imports the last two only when
chosen, so their client libraries load only where used), `supervision`
(the supervisor DAG's run; its per-flow checks are `health`), `lag` measured
from the data, `diagnose`, the periodic `sync_round` and the DR status page's
snapshot (`dr_status`, whose checkpoint counts a page's server keeps between loads
in `CheckpointTallies`). It may
import `offsets`, `engine` and everything below them, and the other packages of
its layer (`procedures`, `verification`) as long as no import
circle forms; only `cli` (and the Airflow plugins) import it. The names below
are what `dags/` and `plugins/` use: they import them from here, not from the
modules.
"""

from replicator.operations.checkpoint_reads import CheckpointTallies
from replicator.operations.diagnose import DEFAULT_LAG_THRESHOLD, diagnose
from replicator.operations.dr_status import (
    HISTORY_KINDS,
    DrStatus,
    FlowStatus,
    PartitionLag,
    RunSummary,
    dr_status,
)
from replicator.operations.health import Problem
from replicator.operations.incident_messages import (
    approval_finding,
    notice_subject,
    notice_text,
    verification_finding,
)
from replicator.operations.incidents import IncidentPolicy, Notice, release, track
from replicator.operations.lag import LagReport, measure_lag
from replicator.operations.launcher_choice import launcher_from_environment
from replicator.operations.launchers import LocalProcessLauncher
from replicator.operations.samples import DEFAULT_RETENTION as DEFAULT_SAMPLE_RETENTION
from replicator.operations.supervision import Bounds, SupervisionError, supervise
from replicator.operations.sync_round import Concern, sync_round
from replicator.operations.verdicts import SEVERITY, FlowVerdict, Overview, Verdict, overview

__all__ = [
    "DEFAULT_LAG_THRESHOLD",
    "DEFAULT_SAMPLE_RETENTION",
    "HISTORY_KINDS",
    "SEVERITY",
    "Bounds",
    "CheckpointTallies",
    "Concern",
    "DrStatus",
    "FlowStatus",
    "FlowVerdict",
    "IncidentPolicy",
    "LagReport",
    "LocalProcessLauncher",
    "Notice",
    "Overview",
    "PartitionLag",
    "Problem",
    "RunSummary",
    "SupervisionError",
    "Verdict",
    "approval_finding",
    "diagnose",
    "dr_status",
    "launcher_from_environment",
    "measure_lag",
    "notice_subject",
    "notice_text",
    "overview",
    "release",
    "supervise",
    "sync_round",
    "track",
    "verification_finding",
]
