"""The settings of a replication task's source consumer: how it takes part in the
flow's consumer group, and what replication's guarantees rest on (never committing
automatically, reading committed records only, never jumping over a gap in silence).

The user's settings come first where they may tune (batching, timeouts, security);
what the guarantees rest on comes last, so no setting of theirs undoes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from replicator.config.model import FlowConfig


def group_membership(consumer: Mapping[str, str]) -> tuple[dict[str, object], dict[str, object]]:
    """How the source consumer takes part in the flow's group: settings the user's
    may override, and settings that must hold. Both protocols rebalance
    incrementally, so a worker joining or leaving never stops the others.

    - `classic` (the default, any Kafka since 2.4): the client assigns, with the
      cooperative-sticky assignor, which balances partition counts, not topics.
      A worker that dies hands its partitions over within seconds.
    - `consumer` (KIP-848, Kafka 4.0 and later): the broker assigns, by default
      with `range`, which spreads every topic over the workers, so a busy topic
      is shared even when an idle one has as many partitions. The session timeout
      is the broker's (`group.consumer.session.timeout.ms`, 45 s by default).
    """
    if consumer.get("group.protocol", "classic") == "consumer":
        return {"group.remote.assignor": "range"}, {}
    defaults: dict[str, object] = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000}
    return defaults, {"partition.assignment.strategy": "cooperative-sticky"}


def source_consumer_config(flow: FlowConfig) -> dict[str, object]:
    """The source consumer's settings for `flow` (callbacks are the caller's)."""
    group_defaults, group_fixed = group_membership(flow.source.consumer)
    return {
        **group_defaults,
        # librdkafka stops fetching a partition whose prefetch queue is full
        # (queued.min.messages, queued.max.messages.kbytes) and, by default,
        # tries again only 1 s later; the loop drains a full queue in well
        # under that and then waited for fetches half the time (165,000 ->
        # 310,000 records/s at 100 B, 86,000 -> 169,000 at 1 KB; the run is
        # in git history).
        "fetch.queue.backoff.ms": 10,
        "topic.metadata.refresh.interval.ms": 10_000,
        **flow.source.consumer,
        "group.id": flow.engine_group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        # Never jump silently: an out-of-range position is a retention gap
        # or a recreated topic, and the failure policies decide.
        "auto.offset.reset": "error",
        **group_fixed,
    }
