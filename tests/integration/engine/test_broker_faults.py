"""Broker faults mid-stream, in both delivery modes: while a producer writes, the
target broker is killed with -9 and restarted, then the source broker; during the
target's outage the flow's consumer group rebalances too. `replicator run` rides it
all out on its own: every acknowledged record reaches the target exactly once
(read_committed), the process never exits and no partition stops.

A flow's failure stays that flow's: one whose target is away at start does not stop
another flow of the same `run`.

The clusters are this module's own (killing the session's would harm other tests).
Each mode's run is a module fixture (`fault_run`), so further checks of the same run
(e.g. what the replicator logged during an outage: `Outage.lines()`) are one more
test function, not one more run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer

from replicator.config import load_config
from replicator.engine.status import PartitionStatus, StatusRecord, WorkerStatus, read_status
from replicator.engine.tail import TailReader
from replicator.errors import ReplicatorError
from replicator_lab import LocalStack

from helpers.kafka import create_topic, free_port_pair, own_cluster_pair, unique_topic
from helpers.replication import (
    end_offsets,
    preload,
    settled_end_offsets,
    source_offsets_on_target,
    start_replicator,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
GROUP = "replicator-primary-dr"  # the flow's consumer group on the source
RATE = 1_500  # records per second, round-robin over the partitions
#: How long each broker stays dead. The default mode's run sets the target producer's
#: delivery timeout well below it, so records time out in the producer during the
#: outage (a target outage longer than the producer's message timeout).
OUTAGE_S = 15.0
MODES = {
    "default": ("dr.producer.delivery.timeout.ms = 6000",),
    "exactly_once": ("exactly.once = true",),
}
_CATCH_UP_S = 150.0
#: A restarted broker recovers its logs (unclean shutdown) before it answers for them.
_ANSWER_S = 60.0


@pytest.fixture(scope="module")
def fault_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A source (`primary`) and a target (`dr`) cluster of this module's own."""
    with own_cluster_pair(tmp_path_factory.mktemp("broker-faults")) as stack:
        yield stack


@dataclass(frozen=True)
class Outage:
    """One broker's outage, and where it sits in the replicator's captured log."""

    cluster: str
    log: Path
    start: int  # byte offset of the log when the broker was killed
    end: int  # byte offset of the log when it answered again
    seconds: float

    def lines(self) -> list[str]:
        """What `replicator run` logged (stdout and stderr) while the broker was away."""
        with self.log.open("rb") as text:
            text.seek(self.start)
            return text.read(self.end - self.start).decode(errors="replace").splitlines()


@dataclass
class FaultRun:
    """One mode's run through both outages, for the checks below."""

    mode: str
    log: Path
    config: Path
    remote: str
    source_ends: list[int]
    acknowledged: dict[int, list[int]]
    outages: list[Outage]
    alive_after: bool
    statuses: list[StatusRecord] = field(default_factory=list)
    exit_code: int | None = None


class SteadyProducer:
    """Writes ~RATE records a second round-robin over the partitions until stopped,
    keeping the offsets the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self._topic = topic
        self._stop = threading.Event()
        self.acknowledged: dict[int, list[int]] = defaultdict(list)
        self.failed: list[str] = []
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            # The source broker may have come back only just now.
            assert self._producer.flush(120) == 0, "records still unacknowledged after 120 s"

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acknowledged[message.partition()].append(message.offset())
        else:
            self.failed.append(error.str())

    def _run(self) -> None:
        per_tick, tick, sent = RATE // 100, 0.01, 0
        next_tick = time.monotonic()
        while not self._stop.is_set():
            for _ in range(per_tick):
                try:
                    self._producer.produce(
                        self._topic,
                        value=b"v" * 100,
                        key=b"%d" % sent,
                        partition=sent % PARTITIONS,
                        on_delivery=self._delivered,
                    )
                    sent += 1
                except BufferError:
                    break  # the source is away and the queue is full: wait for room
            self._producer.poll(0)
            next_tick += tick
            self._stop.wait(max(0.0, next_tick - time.monotonic()))


def _committed_tails(dr: str, remote: str) -> list[int]:
    """Per partition, the source offset after the last committed copy on the target
    (0 while it has none or cannot be read)."""
    reader = TailReader({"bootstrap.servers": dr}, "primary")
    try:
        return [reader.position(remote, p).next_source_offset or 0 for p in range(PARTITIONS)]
    except ReplicatorError:  # the remote topic may not exist yet, or leadership settles
        return [0] * PARTITIONS
    finally:
        reader.close()


def _log_tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-60:])


def _logged_since(log: Path, start: int) -> str:
    with log.open("rb") as text:
        text.seek(start)
        return text.read().decode(errors="replace")


def _rebalance(primary: str, topic: str, log: Path, start: int) -> None:
    """A second member joins the flow's consumer group and leaves again: the
    replicator gives partitions up and is assigned them back."""
    intruder = Consumer(
        {
            "bootstrap.servers": primary,
            "group.id": GROUP,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
        }
    )
    intruder.subscribe([topic])

    def owns_some() -> bool:
        intruder.poll(0.5)  # joins and serves the rebalance; what it fetches is ignored
        return bool(intruder.assignment())

    try:
        wait_until(owns_some, 90, "a second member owning partitions")
    finally:
        intruder.close()
    back = re.compile(rf"assigned .*{re.escape(topic)}.* waiting for the target\)")
    wait_until(
        lambda: back.search(_logged_since(log, start)),
        90,
        "the partitions assigned back to the replicator while the target is away",
    )


def _kill_and_restart(
    stack: LocalStack, cluster: str, log: Path, meanwhile: Callable[[int], None] | None = None
) -> Outage:
    """kill -9 the cluster's broker, keep it dead for OUTAGE_S (doing `meanwhile`,
    given where the log stood at the kill), start it again."""
    broker = stack.brokers[cluster]
    pids = broker.pids()
    assert pids, f"{cluster} is not running"
    start = log.stat().st_size
    began = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not broker.pids(), 30, f"{cluster}'s broker gone")
    if meanwhile is not None:
        meanwhile(start)
    # The outage's length is the experiment itself, not a wait for a condition.
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - began)))
    stack.up(timeout=120, keep_running=True)
    return Outage(cluster, log, start, log.stat().st_size, time.monotonic() - began)


def _stop(process: subprocess.Popen[bytes]) -> int | None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            return None
    return process.returncode


@pytest.fixture(scope="module", params=list(MODES))
def fault_run(
    request: pytest.FixtureRequest,
    fault_clusters: LocalStack,
    tmp_path_factory: pytest.TempPathFactory,
) -> FaultRun:
    """Replicate while first the target, then the source broker is killed and restarted."""
    mode = request.param
    primary, dr = fault_clusters.bootstrap("primary"), fault_clusters.bootstrap("dr")
    folder = tmp_path_factory.mktemp(f"faults-{mode}")
    topic = unique_topic(f"faults-{mode}")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    config = write_config(folder, primary, dr, topic, extra=MODES[mode])
    log = folder / "replicator.log"
    process = start_replicator(config, log, "--state-url", f"sqlite:///{folder / 'state.db'}")
    outages: list[Outage] = []
    tails: list[int] = []

    def replicated(wanted: list[int] | None) -> bool:
        """The target holds source offsets up to `wanted` (each partition's end), or
        at least one record per partition; fails at once if the replicator exited."""
        if process.poll() is not None:
            raise AssertionError(f"`replicator run` exited:\n{_log_tail(log)}")
        tails[:] = _committed_tails(dr, remote)
        return all(t >= w for t, w in zip(tails, wanted or [1] * PARTITIONS, strict=True))

    def caught_up(wanted: list[int] | None, what: str, timeout: float = _CATCH_UP_S) -> None:
        """Wait for `replicated(wanted)`; on timeout say how far each partition got and
        what the replicator logged last (a stall seen once in CI had neither)."""
        try:
            wait_until(lambda: replicated(wanted), timeout, what)
        except AssertionError as late:
            raise AssertionError(
                f"{late}\ncopied up to {tails}, wanted {wanted}\n{_log_tail(log)}"
            ) from None

    try:
        with SteadyProducer(primary, topic) as producer:
            caught_up(None, "replication began", 90)
            # The target's outage spans a rebalance (partitions assigned while it is away).
            rebalance = partial(_rebalance, primary, topic, log)
            for cluster, meanwhile in (("dr", rebalance), ("primary", None)):
                outages.append(_kill_and_restart(fault_clusters, cluster, log, meanwhile))
                backlog = settled_end_offsets(primary, topic, PARTITIONS, _ANSWER_S)
                caught_up(backlog, f"the target caught up after the {cluster} outage")
        assert not producer.failed, producer.failed[:5]
        source_ends = settled_end_offsets(primary, topic, PARTITIONS, _ANSWER_S)
        caught_up(source_ends, "every record")
        alive = process.poll() is None
        flow = load_config(config).flow("primary->dr")
        statuses = read_status(flow.target, flow.name)
    finally:
        exit_code = _stop(process)
    return FaultRun(
        mode=mode,
        log=log,
        config=config,
        remote=remote,
        source_ends=source_ends,
        acknowledged=dict(producer.acknowledged),
        outages=outages,
        alive_after=alive,
        statuses=statuses,
        exit_code=exit_code,
    )


def test_the_run_rides_out_both_outages(fault_run: FaultRun) -> None:
    assert fault_run.alive_after, f"`replicator run` exited:\n{_log_tail(fault_run.log)}"
    stopped = [
        f"{s.where}: {s.error}"
        for s in fault_run.statuses
        if isinstance(s, PartitionStatus) and s.state == "stopped"
    ]
    assert not stopped, stopped
    failed = [s for s in fault_run.statuses if isinstance(s, WorkerStatus) and s.state == "failed"]
    assert not failed, failed
    assert fault_run.exit_code == 0, _log_tail(fault_run.log)


def test_every_acknowledged_record_arrives_exactly_once(
    fault_run: FaultRun, fault_clusters: LocalStack
) -> None:
    dr = fault_clusters.bootstrap("dr")
    for partition in range(PARTITIONS):
        end = fault_run.source_ends[partition]
        copied = source_offsets_on_target(dr, fault_run.remote, partition)
        doubled = [offset for offset, count in Counter(copied).items() if count > 1]
        assert not doubled, f"partition {partition}: copied twice: {doubled[:10]}"
        missing = set(fault_run.acknowledged.get(partition, [])) - set(copied)
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records missing"
        assert copied == list(range(end)), f"partition {partition}: not the source log in order"


#: Words of the lines about a cluster being away (librdkafka's and the replicator's).
_OUTAGE_WORDS = (
    "unreachable",
    "reachable again",
    "Connect to",
    "Connection refused",
    "Disconnected",
    "brokers are down",
    "transport failure",
)


def test_each_outage_is_told_in_a_few_lines(fault_run: FaultRun) -> None:
    """An outage is one line when the cluster becomes unreachable, a reminder every
    30 s and one line when it is back (replicator.kafka.reachability), not a line per failed
    connection; librdkafka writes nothing to stderr on its own (`%3|...|FAIL|...`)."""
    raw = [
        line
        for line in fault_run.log.read_text(errors="replace").splitlines()
        if line[:1] == "%" and line[1:2].isdigit() and line[2:3] == "|"
    ]
    assert not raw, raw[:5]
    for outage in fault_run.outages:
        lines = outage.lines()
        about = [line for line in lines if any(word in line for word in _OUTAGE_WORDS)]
        down = [
            line
            for line in about
            if f"cluster {outage.cluster} (" in line
            and "unreachable since" in line
            and "reachable again" not in line
        ]
        assert len(down) == 1, "\n".join(lines)
        assert len(about) <= 10, "\n".join(about)


def test_a_failing_flow_leaves_the_other_flows_running(
    fault_clusters: LocalStack, tmp_path: Path
) -> None:
    """Two flows in one `run`: one whose target cluster is away fails (and is tried
    again with backoff); the other replicates on, and the process stays up."""
    primary, dr = fault_clusters.bootstrap("primary"), fault_clusters.bootstrap("dr")
    topic = unique_topic("isolated")
    create_topic(primary, topic, partitions=2)
    records = preload(primary, topic, 2_000, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = primary, dr, gone",
                f"primary.bootstrap.servers = {primary}",
                f"dr.bootstrap.servers = {dr}",
                # Nothing listens there: the flow to it fails at start, again and again.
                f"gone.bootstrap.servers = 127.0.0.1:{free_port_pair()}",
                "primary->dr.enabled = true",
                "primary->gone.enabled = true",
                f"topics = {topic}",
                "replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "status.topic.replication.factor = 1",
            ]
        )
    )
    log = tmp_path / "replicator.log"
    process = start_replicator(config, log, "--state-url", f"sqlite:///{tmp_path / 'state.db'}")
    try:
        wait_until(
            lambda: (
                "primary->gone#0 stopped on the error above" in log.read_text()
                or process.poll() is not None
            ),
            120,
            "the flow to the missing cluster failed",
        )
        assert process.poll() is None, f"`replicator run` exited:\n{_log_tail(log)}"
        wait_until(
            lambda: end_offsets(dr, f"primary.{topic}", 2) == records,
            120,
            "primary->dr replicated everything",
        )
        assert process.poll() is None, f"`replicator run` exited:\n{_log_tail(log)}"
    finally:
        _stop(process)
