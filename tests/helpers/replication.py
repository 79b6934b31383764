"""Helpers for tests that run the replication engine against the real clusters."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, TOPIC_HEADER, decode_offset
from replicator.engine.status import PartitionStatus, read_status
from replicator.engine.task import ReplicationTask

from helpers.kafka import create_topic, unique_topic


def flow_config(
    source: tuple[str, str],
    target: tuple[str, str],
    topics: str,
    properties: dict[str, str] | None = None,
    **overrides: object,
) -> FlowConfig:
    """A flow for one test, loaded the way users load theirs (MM2 properties with
    MM2's defaults): only `topics` (a regex), one-replica topics for one-broker
    clusters, fast refreshes. `properties` adds MM2 keys; `overrides` set fields."""
    (source_alias, source_bootstrap), (target_alias, target_bootstrap) = source, target
    name = f"{source_alias}->{target_alias}"
    config = load_config(
        {
            "clusters": f"{source_alias}, {target_alias}",
            f"{source_alias}.bootstrap.servers": source_bootstrap,
            f"{target_alias}.bootstrap.servers": target_bootstrap,
            f"{name}.enabled": "true",
            f"{name}.topics": topics,
            "replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "status.topic.replication.factor": "1",
            "refresh.topics.interval.seconds": "1",
            "sync.topic.configs.interval.seconds": "1",
            **(properties or {}),
        }
    )
    return replace(config.flow(name), **overrides)


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


def settled_end_offsets(bootstrap: str, topic: str, partitions: int, timeout: float) -> list[int]:
    """`end_offsets` once the cluster answers for every partition: right after a broker
    restart it is still recovering its logs and electing leaders."""
    found: list[int] = []

    def answered() -> bool:
        found[:] = end_offsets(bootstrap, topic, partitions) or []
        return bool(found)

    wait_until(answered, timeout, f"{bootstrap} to answer for {topic}'s end offsets")
    return found


#: wait_until's first pause and its longest: a condition often opens a client to the
#: brokers (`end_offsets`: about 30 ms of CPU a call, most of it the broker's), and the
#: suite's many waits ran on two busy cores.
_POLL_FIRST_S, _POLL_MAX_S = 0.2, 1.0


def wait_until(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    *,
    every_s: float | None = None,
    state: Callable[[], object] | None = None,
) -> None:
    """Poll `condition` until true, every 0.2 s at first and less often as the wait goes
    on (up to once a second), or every `every_s` (a wait that must catch a moment that
    passes quickly); on timeout say what was awaited and what was last seen (`state()`,
    when given: what explains a wait that did not end)."""
    deadline = time.monotonic() + timeout
    pause = every_s or _POLL_FIRST_S
    while not (seen := condition()):
        left = deadline - time.monotonic()
        assert left > 0, (
            f"timed out after {timeout}s waiting for {what}; last seen: "
            f"{seen!r}{'' if state is None else f', {state()}'}"
        )
        time.sleep(min(pause, left))
        pause = every_s or min(_POLL_MAX_S, pause * 1.5)
    del seen


def preload(
    bootstrap: str,
    topic: str,
    records: int,
    partitions: int,
    client: Mapping[str, str] | None = None,
) -> list[int]:
    """`records` small records round-robin over `partitions`, fast (no delivery
    callbacks); returns the count per partition. `client`: more client settings
    (a secured cluster's credentials)."""
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000}
    producer = Producer({**settings, **(client or {})})
    for i in range(records):
        _produce_small(producer, topic, i, partitions)
    assert producer.flush(60) == 0
    return _round_robin(records, partitions)


def _produce_small(producer: Producer, topic: str, i: int, partitions: int) -> None:
    """Record `i` of a round-robin series: key `i`, 100 bytes of value."""
    _produce_to(producer, topic, i, i % partitions)


def forwarded_headers(cluster: str, offset: int) -> list[tuple[str, bytes]]:
    """The provenance headers of `cluster`'s replica of `orders` at `offset`, as an
    application that forwards a replica's headers (Kafka Streams' default) writes them
    on its own records."""
    return [
        (SOURCE_HEADER, cluster.encode()),
        (OFFSET_HEADER, struct.pack(">q", offset)),
        (TOPIC_HEADER, b"orders"),
    ]


def _produce_to(
    producer: Producer, topic: str, i: int, partition: int, forwarded_from: str | None = None
) -> None:
    """Record `i` (key `i`, 100 bytes of value) to `partition`; with `forwarded_from`,
    every other record carries that cluster's provenance (`forwarded_headers`)."""
    headers = forwarded_headers(forwarded_from, i) if forwarded_from and i % 2 else None
    while True:
        try:
            producer.produce(
                topic, value=b"x" * 100, key=b"%d" % i, partition=partition, headers=headers
            )
            return
        except BufferError:
            producer.poll(0.1)


def _round_robin(records: int, partitions: int) -> list[int]:
    """Records per partition of a round-robin series."""
    return [
        records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)
    ]


class PacedProduction:
    """`records` small records round-robin over `partitions`, produced from a thread at
    about `rate` per second: a source that is still being written while a test acts
    (the engine copies a preloaded backlog faster than a test can act mid-stream).
    `only`: round-robin over those partitions alone (the others get nothing);
    `forwarded_from`: every other record carries that cluster's provenance, as an
    application forwarding a replica's headers writes it."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        records: int,
        partitions: int,
        rate: int,
        only: Sequence[int] | None = None,
        forwarded_from: str | None = None,
    ):
        written = list(range(partitions) if only is None else only)
        self.wanted = [0] * partitions
        for partition, count in zip(written, _round_robin(records, len(written)), strict=True):
            self.wanted[partition] = count
        self._written = written
        self._forwarded_from = forwarded_from
        self._args = (bootstrap, topic, records, partitions, rate)
        self._thread = threading.Thread(target=self._produce, name="paced-producer")
        self.error: BaseException | None = None

    def __enter__(self) -> PacedProduction:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._thread.join()
        assert self.error is None, f"producing failed: {self.error!r}"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _produce(self) -> None:
        bootstrap, topic, records, _partitions, rate = self._args
        written = self._written
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        slice_records, started = max(rate // 20, 1), time.monotonic()
        try:
            for i in range(records):
                if i % slice_records == 0:  # each 1/20 s holds rate/20 records
                    time.sleep(max(0.0, started + i / rate - time.monotonic()))
                    producer.poll(0)
                _produce_to(producer, topic, i, written[i % len(written)], self._forwarded_from)
            assert producer.flush(60) == 0
        except BaseException as exc:  # reported by __exit__
            self.error = exc


def write_config(
    tmp_path: Path,
    primary: str,
    dr: str,
    topic: str,
    extra: tuple[str, ...] = (),
    source: str = "primary",
) -> Path:
    """An mm2.properties for `replicator run`: primary->dr for `topic` (`source`->dr
    when the source cluster goes by another alias: a flow of its own, with its own
    consumer group, on the same clusters)."""
    path = tmp_path / "mm2.properties"
    path.write_text(
        "\n".join(
            [
                f"clusters = {source}, dr",
                f"{source}.bootstrap.servers = {primary}",
                f"dr.bootstrap.servers = {dr}",
                f"{source}->dr.enabled = true",
                f"{source}->dr.topics = {topic}",
                "replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "status.topic.replication.factor = 1",
                *extra,
            ]
        )
    )
    return path


def start_replicator(config: Path, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """`replicator run --config` (plus `options`) as a separate process, logging its
    stdout and stderr to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", "--config", str(config), *options],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def source_offsets_on_target(
    bootstrap: str, topic: str, partition: int, end: int | None = None, timeout: float = 120.0
) -> list[int]:
    """The `__dr_off` header of every committed record of a target partition, in
    order, up to target offset `end` (default: the partition's end when called)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    tp = TopicPartition(topic, partition)
    offsets: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        if end is None:
            end = consumer.get_watermark_offsets(tp, timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        while consumer.position([tp])[0].offset < end:
            assert time.monotonic() < deadline, (
                f"{topic}[{partition}] not read to offset {end} within {timeout}s "
                f"(got {len(offsets)} records)"
            )
            for message in consumer.consume(10_000, timeout=1.0):
                assert message.error() is None, message.error()
                offsets.append(decode_offset(dict(message.headers())[OFFSET_HEADER]))
    finally:
        consumer.close()
    return offsets


@dataclass(frozen=True)
class PreloadedFlow:
    """A source topic full of records and the config of a replicator for it."""

    topic: str
    remote: str
    wanted: list[int]  # records per partition
    config: Path


def preloaded_flow(
    tmp_path: Path,
    primary: str,
    dr: str,
    prefix: str,
    records: int,
    partitions: int,
    extra: tuple[str, ...] = (),
) -> PreloadedFlow:
    """Create a topic on `primary`, preload it and write a primary->dr config for it."""
    topic = unique_topic(prefix)
    create_topic(primary, topic, partitions=partitions)
    wanted = preload(primary, topic, records, partitions)
    config = write_config(tmp_path, primary, dr, topic, extra=extra)
    return PreloadedFlow(topic, f"primary.{topic}", wanted, config)


def recreate_topic(bootstrap: str, topic: str) -> None:
    """Delete `topic` and create it again (one partition), waiting out the deletion."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)

    def created() -> bool:
        try:
            create_topic(bootstrap, topic)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False  # the deletion is still being completed
            raise
        return True

    wait_until(created, 30, f"{topic} recreated")


def partition_status(flow: FlowConfig, topic: str, partition: int) -> PartitionStatus | None:
    """The newest status the flow's workers published for `topic[partition]`."""
    found = None
    for record in read_status(flow.target, flow.name):
        if isinstance(record, PartitionStatus) and (record.topic, record.partition) == (
            topic,
            partition,
        ):
            found = record
    return found
