"""Broker faults mid-stream, in both delivery modes: while a producer writes, the
target broker is killed with -9 and restarted, then the source broker; during the
target's outage the flow's consumer group rebalances too. `replicator run` rides it
all out on its own: every acknowledged record reaches the target exactly once
(read_committed), the process never exits and no partition stops.

A flow's failure stays that flow's: one whose target is away at start does not stop
another flow of the same `run`.

The clusters are this module's own (killing the session's would harm other tests).
Both modes run at once, as two flows of their own on the same clusters (the source
cluster goes by another alias in each mode's configuration, so each flow has its own
consumer group and topics), through the same two outages: one module fixture
(`fault_runs`), so further checks of a mode's run (e.g. what the replicator logged during
an outage: `Outage.lines()`) are one more test function, not one more run.
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
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
RATE = 1_500  # records per second per mode, round-robin over the partitions
#: How long each broker stays dead. The default mode's run sets the target producer's
#: delivery timeout well below it, so records time out in the producer during the
#: outage (a target outage longer than the producer's message timeout).
OUTAGE_S = 15.0
#: Per mode: the source cluster's alias in its configuration (its flow's name, consumer
#: group and remote topics follow it), and its settings.
MODES = {
    "default": ("primary", ("dr.producer.delivery.timeout.ms = 6000",)),
    "exactly_once": ("east", ("exactly.once = true",)),
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
    """One broker's outage, and where it sits in one mode's captured log."""

    cluster: str  # its alias in that mode's configuration
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


def _committed_tails(dr: str, remote: str, source: str) -> list[int]:
    """Per partition, the source offset after the last committed copy on the target
    (0 while it has none or cannot be read); `source`: the source cluster's alias."""
    reader = TailReader({"bootstrap.servers": dr}, source)
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


def _rebalance(primary: str, source: str, topic: str, log: Path, start: int) -> None:
    """A second member joins the flow's consumer group (`source`->dr's) and leaves
    again: the replicator gives partitions up and is assigned them back."""
    intruder = Consumer(
        {
            "bootstrap.servers": primary,
            "group.id": f"replicator-{source}-dr",
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
    stack: LocalStack,
    cluster: str,
    runs: list[_Replication],
    meanwhile: Callable[[_Replication, int], None] | None = None,
) -> None:
    """kill -9 the cluster's broker, keep it dead for OUTAGE_S (doing `meanwhile` for
    each run at once, given where its log stood at the kill), start it again; each run
    keeps the outage as its log saw it."""
    broker = stack.brokers[cluster]
    pids = broker.pids()
    assert pids, f"{cluster} is not running"
    starts = [run.log.stat().st_size for run in runs]
    began = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not broker.pids(), 30, f"{cluster}'s broker gone")
    if meanwhile is not None:
        with ThreadPoolExecutor(len(runs)) as pool:
            for done in [pool.submit(meanwhile, r, at) for r, at in zip(runs, starts, strict=True)]:
                done.result()
    # The outage's length is the experiment itself, not a wait for a condition.
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - began)))
    stack.up(timeout=120, keep_running=True)
    seconds = time.monotonic() - began
    for run, start in zip(runs, starts, strict=True):
        alias = run.source if cluster == "primary" else cluster
        run.outages.append(Outage(alias, run.log, start, run.log.stat().st_size, seconds))


def _stop(process: subprocess.Popen[bytes]) -> int | None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            return None
    return process.returncode


@dataclass
class _Replication:
    """One mode's flow while the brokers fail: its `replicator run`, its producer and
    how far its copy got."""

    mode: str
    source: str  # the source cluster's alias in its configuration
    topic: str
    config: Path
    log: Path
    process: subprocess.Popen[bytes]
    producer: SteadyProducer
    outages: list[Outage] = field(default_factory=list)
    tails: list[int] = field(default_factory=list)

    @property
    def remote(self) -> str:
        return f"{self.source}.{self.topic}"

    def replicated(self, dr: str, wanted: list[int] | None) -> bool:
        """The target holds source offsets up to `wanted` (each partition's end), or
        at least one record per partition; fails at once if the replicator exited."""
        if self.process.poll() is not None:
            raise AssertionError(f"{self.mode}: `replicator run` exited:\n{_log_tail(self.log)}")
        self.tails[:] = _committed_tails(dr, self.remote, self.source)
        return all(t >= w for t, w in zip(self.tails, wanted or [1] * PARTITIONS, strict=True))


def _caught_up(
    runs: list[_Replication], dr: str, wanted: list[list[int]] | None, what: str,
    timeout: float = _CATCH_UP_S,
) -> None:  # fmt: skip
    """Wait for every run's `replicated` (`wanted`: per run); on timeout say how far
    each partition got and what the replicator logged last (a stall seen once in CI
    had neither)."""
    for at, run in enumerate(runs):
        want = wanted[at] if wanted is not None else None
        try:
            wait_until(partial(run.replicated, dr, want), timeout, what)
        except AssertionError as late:
            raise AssertionError(
                f"{run.mode}: {late}\ncopied up to {run.tails}, wanted {want}\n{_log_tail(run.log)}"
            ) from None


@pytest.fixture(scope="module")
def fault_runs(
    fault_clusters: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, FaultRun]:
    """Replicate in both modes at once while first the target, then the source broker
    is killed and restarted."""
    primary, dr = fault_clusters.bootstrap("primary"), fault_clusters.bootstrap("dr")
    runs: list[_Replication] = []
    with ExitStack() as stack:
        for mode, (source, extra) in MODES.items():
            folder = tmp_path_factory.mktemp(f"faults-{mode}")
            topic = unique_topic(f"faults-{mode}")
            create_topic(primary, topic, partitions=PARTITIONS)
            config = write_config(folder, primary, dr, topic, extra=extra, source=source)
            log = folder / "replicator.log"
            process = start_replicator(
                config, log, "--state-url", f"sqlite:///{folder / 'state.db'}"
            )
            stack.callback(_stop, process)
            producer = stack.enter_context(SteadyProducer(primary, topic))
            runs.append(_Replication(mode, source, topic, config, log, process, producer))
        _caught_up(runs, dr, None, "replication began", 90)

        def rebalance(run: _Replication, start: int) -> None:
            # The target's outage spans a rebalance (partitions assigned while it is away).
            _rebalance(primary, run.source, run.topic, run.log, start)

        for cluster, meanwhile in (("dr", rebalance), ("primary", None)):
            _kill_and_restart(fault_clusters, cluster, runs, meanwhile)
            backlogs = [
                settled_end_offsets(primary, run.topic, PARTITIONS, _ANSWER_S) for run in runs
            ]
            _caught_up(runs, dr, backlogs, f"the target caught up after the {cluster} outage")
        for run in runs:
            run.producer.stop()
            assert not run.producer.failed, (run.mode, run.producer.failed[:5])
        source_ends = [
            settled_end_offsets(primary, run.topic, PARTITIONS, _ANSWER_S) for run in runs
        ]
        _caught_up(runs, dr, source_ends, "every record")
        alive = [run.process.poll() is None for run in runs]
        statuses = []
        for run in runs:
            flow = load_config(run.config).flow(f"{run.source}->dr")
            statuses.append(read_status(flow.target, flow.name))
        exit_codes = [_stop(run.process) for run in runs]
    return {
        run.mode: FaultRun(
            mode=run.mode,
            log=run.log,
            config=run.config,
            remote=run.remote,
            source_ends=source_ends[at],
            acknowledged=dict(run.producer.acknowledged),
            outages=run.outages,
            alive_after=alive[at],
            statuses=statuses[at],
            exit_code=exit_codes[at],
        )
        for at, run in enumerate(runs)
    }


@pytest.fixture(params=list(MODES))
def fault_run(request: pytest.FixtureRequest, fault_runs: dict[str, FaultRun]) -> FaultRun:
    return fault_runs[request.param]


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
