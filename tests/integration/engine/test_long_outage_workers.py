"""Two workers of one flow, the target away for longer than `max.poll.interval.ms`
(issue 26, point 4): nothing lost, nothing copied twice. Every other record carries
another flow's provenance, as an application forwarding a replica's headers writes
it (issue 42): on the compiled path those are settled by the verdict the Mover
learnt, and must be exactly once too.

The workers' producer queues fill while the target is away. The loop used to wait
for room polling only the producer: a worker then missed its poll interval, dropped
out of the group, the other worker resumed its partitions from the target tail, and
the first one's queue drained into the same partitions when the target came back
(measured: 29,900 records written twice). Now the wait for room is bounded below
the poll interval, after which the partitions rewind (queue dropped, resumed from
the target tail), and a worker never gives partitions up while its producer holds
their records.

Every timeout is the default except a short poll interval (15 s, the session 10 s
below it); the producer queue is smaller than the default only so that it fills
within seconds at this test's rate. The clusters are this module's own (the target
broker is killed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator.engine.tail import TailReader
from replicator.errors import ReplicatorError
from replicator_lab import LocalStack

from helpers.kafka import create_topic, own_cluster_pair, unique_topic
from helpers.replication import (
    PacedProduction,
    end_offsets,
    source_offsets_on_target,
    start_replicator,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
RATE = 4_000  # records per second, to the partitions of one of the workers
#: The target's outage: longer than the poll interval plus the time that worker's
#: producer queue (20,000 records) takes to fill.
OUTAGE_S = 45.0
RECORDS = RATE * 150  # written from before the outage to after it (a restart takes long)
GROUP = "replicator-primary-dr"
SETTINGS = (
    "consumer.max.poll.interval.ms = 15000",
    "consumer.session.timeout.ms = 10000",
    "dr.producer.queue.buffering.max.messages = 20000",
)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with own_cluster_pair(tmp_path_factory.mktemp("long-outage")) as stack:
        yield stack


def _owned(primary: str, topic: str) -> list[list[int]]:
    """The partitions of `topic` each member of the flow's group owns."""
    admin = AdminClient({"bootstrap.servers": primary})
    try:
        group = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)
    except (KafkaException, TimeoutError):
        return []  # the group coordinator is still loading or moving
    return [
        sorted(tp.partition for tp in member.assignment.topic_partitions if tp.topic == topic)
        for member in group.members
    ]


def _shared(primary: str, topic: str) -> list[list[int]]:
    """What each worker owns once both own some of `topic` and all of it is owned."""
    owned = [partitions for partitions in _owned(primary, topic) if partitions]
    return owned if len(owned) == 2 and sum(map(len, owned)) == PARTITIONS else []


def _tails(dr: str, remote: str) -> list[int]:
    """Per partition, the source offset after the last copy on the target (0 while
    it has none or cannot be read)."""
    reader = TailReader({"bootstrap.servers": dr}, "primary")
    try:
        return [reader.position(remote, p).next_source_offset or 0 for p in range(PARTITIONS)]
    except ReplicatorError:
        return [0] * PARTITIONS
    finally:
        reader.close()


def _kill_target_for(stack: LocalStack, seconds: float) -> None:
    broker = stack.brokers["dr"]
    began = time.monotonic()
    for pid in broker.pids():
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not broker.pids(), 30, "the target's broker gone")
    # The outage's length is the experiment itself, not a wait for a condition.
    time.sleep(max(0.0, seconds - (time.monotonic() - began)))
    stack.up(timeout=120, keep_running=True)


def _stop(worker: subprocess.Popen[bytes], log: Path) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(120) == 0, log.read_text(errors="replace")[-3000:]


@pytest.mark.timeout(900)  # 75 s of traffic, a 45 s outage and the catch-up, on a busy machine
def test_two_workers_and_a_target_away_longer_than_the_poll_interval_copy_each_record_once(
    clusters: LocalStack, tmp_path: Path
) -> None:
    primary, dr = clusters.bootstrap("primary"), clusters.bootstrap("dr")
    topic = unique_topic("long-outage")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    config = write_config(tmp_path, primary, dr, topic, extra=SETTINGS)
    logs = [tmp_path / "worker-a.log", tmp_path / "worker-b.log"]
    workers = [start_replicator(config, log) for log in logs]
    shared: list[list[int]] = []
    try:
        wait_until(lambda: shared.extend(_shared(primary, topic)) or shared, 180, "two workers")
        # Only one worker's partitions are written: its queue fills and it waits for
        # room while the other one, idle, keeps polling and would take its partitions.
        busy = shared[0]
        with PacedProduction(
            primary, topic, RECORDS, PARTITIONS, RATE, only=busy, forwarded_from="dr"
        ) as source:
            wait_until(lambda: min(_tails(dr, remote)[p] for p in busy) > 0, 120, "copying")
            _kill_target_for(clusters, OUTAGE_S)
        wanted = source.wanted
        for worker, log in zip(workers, logs, strict=True):
            assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
        wait_until(lambda: _tails(dr, remote) >= wanted, 300, "every record on the target")
        for worker, log in zip(workers, logs, strict=True):
            _stop(worker, log)  # nothing they still held may land after the count
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    rebalances = [
        line
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if "assignment lost" in line or "revoking" in line
    ]
    ends = end_offsets(dr, remote, PARTITIONS) or []
    assert [e for e, w in zip(ends, wanted, strict=True) if not w] == [0] * wanted.count(0)
    for partition in (p for p in range(PARTITIONS) if wanted[p]):
        copied = source_offsets_on_target(dr, remote, partition, ends[partition])
        twice = len(copied) - len(set(copied))
        missing = set(range(wanted[partition])) - set(copied)
        assert (twice, len(missing)) == (0, 0), (
            f"partition {partition}: {twice} copied twice, {len(missing)} missing; the "
            "workers' rebalances:\n" + "\n".join(rebalances)
        )
        assert copied == list(range(wanted[partition])), f"partition {partition} out of order"
