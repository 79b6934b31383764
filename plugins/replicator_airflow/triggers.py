"""`ReplicationLagTrigger`: waits in the triggerer until a flow's lag is within a bound.

A deferred `ReplicationLagSensor` holds no worker slot while replication catches
up (that can take hours after an outage). The trigger measures the lag with the
same function as the sensor's poke (`replicator.operations.lag.measure_lag`), in a thread
(`asyncio.to_thread`: the Kafka clients block), so the triggerer's event loop
keeps serving every other trigger. It fires once: caught up, timed out (with
the partitions still behind), or an error (with its message).

Its arguments are stored in the metadata DB: only the replicator's connection
id, never a state store URL or any secret. The triggerer reads the connection as
a task does (`lag_of`), so the configuration's `${conn:NAME}` secrets resolve
there too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from confluent_kafka import KafkaException

from replicator.errors import ReplicatorError
from replicator.operations import LagReport, measure_lag
from replicator_airflow.hooks import ReplicatorHook


def lag_of(conn_id: str, flow: str, topics: list[str] | None) -> LagReport:
    """The current lag of `flow` (its `topics`), from the configuration of the
    replicator's connection `conn_id`."""
    return measure_lag(ReplicatorHook(conn_id).settings().load_config().flow(flow), topics)


class ReplicationLagTrigger(BaseTrigger):
    """Fires `{"status": "caught_up" | "timeout" | "error", "message": ..., "max_behind": ...}`
    once every partition of `flow` (or of `topics`) is at most `max_lag` records
    behind, or after `timeout_s` (None: never), polling every `poll_interval_s`."""

    def __init__(
        self,
        *,
        replicator_conn_id: str,
        flow: str,
        max_lag: int,
        topics: list[str] | None = None,
        poll_interval_s: float = 10.0,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__()
        self.replicator_conn_id = replicator_conn_id
        self.flow = flow
        self.max_lag = max_lag
        self.topics = topics
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "replicator_conn_id": self.replicator_conn_id,
                "flow": self.flow,
                "max_lag": self.max_lag,
                "topics": self.topics,
                "poll_interval_s": self.poll_interval_s,
                "timeout_s": self.timeout_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            try:
                lag = await asyncio.to_thread(
                    lag_of, self.replicator_conn_id, self.flow, self.topics
                )
            except (ReplicatorError, KafkaException) as exc:
                yield TriggerEvent({"status": "error", "message": str(exc), "max_behind": None})
                return
            message = lag.describe(self.max_lag)
            if not lag.over(self.max_lag):
                yield TriggerEvent(
                    {"status": "caught_up", "message": message, "max_behind": lag.max_behind}
                )
                return
            if deadline is not None and time.monotonic() >= deadline:
                yield TriggerEvent(
                    {
                        "status": "timeout",
                        "message": f"still behind after {self.timeout_s:g} s: {message}",
                        "max_behind": lag.max_behind,
                    }
                )
                return
            self.log.info("%s", message)
            await asyncio.sleep(self.poll_interval_s)
