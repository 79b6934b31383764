"""`ReplicationLagSensor`: wait until a flow's copy is within `max_lag` records.

Before work that needs the DR copy current (maintenance of the primary, a
drill, an export from the DR side), a DAG waits on this sensor. Every
partition of the flow (or of `topics`) must be at most `max_lag` records
behind its source, measured from the data (`replicator.operations.lag`). In poke mode it
checks once per `poke_interval`; with `deferrable=True` it hands the waiting
to `ReplicationLagTrigger` in the triggerer and frees its worker slot.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from replicator_airflow.hooks import ReplicatorHook
from replicator_airflow.triggers import ReplicationLagTrigger, lag_of


class ReplicationLagSensor(BaseSensorOperator):
    """Succeeds once every partition of `flow` (or of `topics`, source names) is at
    most `max_lag` records behind; fails with the partitions furthest behind on
    timeout, and with the error when the lag cannot be measured."""

    template_fields = ("flow", "max_lag", "topics")
    ui_color = "#e6f2ea"

    def __init__(
        self,
        *,
        flow: str,
        max_lag: int | str = 0,
        topics: list[str] | None = None,
        deferrable: bool = False,
        replicator_conn_id: str = ReplicatorHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 10)
        kwargs.setdefault("timeout", 3600)
        super().__init__(**kwargs)
        self.flow = flow
        self.max_lag = max_lag
        self.topics = topics
        self.deferrable = deferrable
        self.replicator_conn_id = replicator_conn_id

    def poke(self, context: Context) -> bool:
        lag = lag_of(self.replicator_conn_id, self.flow, self.topics or None)
        self.log.info("%s", lag.describe(int(self.max_lag)))
        return not lag.over(int(self.max_lag))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):  # no trigger for what is already true
            return None
        self.defer(
            trigger=ReplicationLagTrigger(
                replicator_conn_id=self.replicator_conn_id,
                flow=self.flow,
                max_lag=int(self.max_lag),
                topics=self.topics or None,
                poll_interval_s=self.poke_interval,
                timeout_s=self.timeout,
            ),
            method_name="execute_complete",
            # A little later than the trigger's own timeout, which says what is behind.
            timeout=timedelta(seconds=self.timeout + 60),
        )
        return None

    def execute_complete(self, context: Context, event: dict[str, Any]) -> int:
        """The trigger's event: the worst lag when caught up; else fail with its message."""
        status = event.get("status")
        if status == "timeout":
            raise AirflowSensorTimeout(f"replication lag: {event.get('message')}")
        if status != "caught_up":
            raise AirflowException(
                f"cannot measure the replication lag of flow {self.flow}: {event.get('message')}"
            )
        self.log.info("%s", event["message"])
        return int(event["max_behind"])
