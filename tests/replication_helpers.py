"""Helpers for tests that run the replication engine against the real clusters."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from confluent_kafka import Consumer, KafkaException, TopicPartition

from replicator.config.model import ClusterConfig, FlowConfig, NameFilter
from replicator.task import ReplicationTask


def cluster(alias: str, bootstrap: str) -> ClusterConfig:
    base = {"bootstrap.servers": bootstrap}
    return ClusterConfig(
        alias, bootstrap, consumer=dict(base), producer=dict(base), admin=dict(base)
    )


def flow_config(
    source: tuple[str, str], target: tuple[str, str], topics: str, **overrides: object
) -> FlowConfig:
    """A flow for one test: only `topics` (a regex), one-replica internal topics."""
    flow = FlowConfig(
        source=cluster(*source),
        target=cluster(*target),
        topics=NameFilter(include=(re.compile(topics),)),
        groups=NameFilter(include=(re.compile(".*"),)),
        replication_factor=1,
        heartbeats_topic_replication_factor=1,
        checkpoints_topic_replication_factor=1,
        offset_syncs_topic_replication_factor=1,
        status_topic_replication_factor=1,
        refresh_topics_interval_seconds=1.0,
    )
    return replace(flow, **overrides)


@contextmanager
def running(flow: FlowConfig) -> Iterator[ReplicationTask]:
    """Run a replication task in a thread for the duration of the block."""
    task = ReplicationTask(flow)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            task.run()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=f"task-{flow.name}", daemon=True)
    thread.start()
    try:
        yield task
    finally:
        task.stop_event.set()
        thread.join(timeout=60)
        assert not thread.is_alive(), "task did not stop within 60 s"
        if failure:  # the task's own error explains a timeout in the block
            raise failure[0]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int] | None:
    """High watermarks of `topic`'s first `partitions` partitions; None until it has them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None or len(metadata.partitions) < partitions:
            return None
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    except KafkaException:
        return None  # leadership still settling on a new topic
    finally:
        consumer.close()


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Poll `condition` until true; on timeout say what was awaited and what was last seen."""
    deadline = time.monotonic() + timeout
    while not (seen := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.2)
    del seen
