"""What every Kafka DR DAG shares: one run at a time (two failovers or two
supervisor passes must never interleave), no catch-up (a missed supervisor minute
or drill quarter is not worth replaying), and one tag to filter the UI by."""

from __future__ import annotations

from airflow.sdk import Param

from replicator.statestore import DEFAULT_LEASE_TTL_S

DAG_DEFAULTS: dict[str, object] = {"catchup": False, "max_active_runs": 1, "tags": ["kafka-dr"]}


def approval_params(skip_description: str) -> dict[str, Param]:
    """The trigger form's approval fields of a DAG that changes production:
    `skip_approval` (honoured only where the deployment's approval policy lets this
    kind skip; `skip_description` says so) and the answer's timeout, at most the
    procedure's lease (docs/failover-approval.md)."""
    return {
        "skip_approval": Param(False, type="boolean", description=skip_description),
        "approval_timeout_minutes": Param(
            30,
            type="number",
            exclusiveMinimum=0,
            maximum=DEFAULT_LEASE_TTL_S / 60,
            description="no answer by then counts as Reject; at most the procedure's lease",
        ),
    }
