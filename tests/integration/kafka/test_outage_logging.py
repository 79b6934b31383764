"""A broker outage is told in a few lines, not thousands: one when the cluster becomes
unreachable, a reminder every 30 s, one when it is back with the outage's length;
librdkafka never writes to stderr on its own, and the reachability shows as metrics.

Unit tests drive `Reachability` with a probe and a clock of their own, and point
real clients at a closed port; the integration test kills the target broker of a
running `replicator run` (clusters of this module's own) and reads its log and
metrics.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from replicator import metrics
from replicator.kafka import clients as kafka_clients
from replicator.kafka import reachability
from replicator.kafka.clients import AdminClient, Consumer, Producer, RepeatFilter
from replicator.kafka.reachability import Clusters, Reachability
from replicator_lab import LocalStack

from helpers.kafka import create_topic, free_port_pair, own_cluster_pair, unique_topic
from helpers.replication import (
    end_offsets,
    source_offsets_on_target,
    wait_until,
    write_config,
)

_ROOT = Path(__file__).resolve().parents[3]
#: A line librdkafka writes itself, bypassing logging: `%3|1700000000.123|FAIL|...`.
RAW_LIBRDKAFKA = re.compile(r"^%\d\|", re.MULTILINE)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Probe:
    def __init__(self) -> None:
        self.answer: str | None = "Failed to get metadata: Local: Broker transport failure"
        self.calls = 0

    def __call__(self) -> str | None:
        self.calls += 1
        return self.answer


def _reachability(name: str) -> tuple[Reachability, _Probe, _Clock, list[object]]:
    probe, clock, spawned = _Probe(), _Clock(), []
    tracker = Reachability(name, "127.0.0.1:1", probe, clock=clock, spawn=spawned.append)
    return tracker, probe, clock, spawned


def _sample(name: str, cluster: str) -> float | None:
    for family in (metrics.CLUSTER_REACHABLE, metrics.CLUSTER_OUTAGES):
        for metric in family.collect():
            for sample in metric.samples:
                if sample.name == name and sample.labels.get("cluster") == cluster:
                    return sample.value
    return None


def test_an_outage_is_one_line_reminders_and_one_line_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.kafka.reachability")
    tracker, probe, clock, spawned = _reachability("unit-outage")
    assert _sample("replicator_cluster_reachable", "unit-outage") == 1

    for attempt in range(500):  # what librdkafka reports during an outage
        tracker.trouble(f"Connect to ipv4#127.0.0.1:1 failed: Connection refused #{attempt}")
    assert len(spawned) == 1, "one probe for the whole incident"
    assert tracker.state == "suspect" and not caplog.records

    assert tracker.check() is not None
    assert tracker.state == "down"
    assert _sample("replicator_cluster_reachable", "unit-outage") == 0
    assert _sample("replicator_cluster_outages_total", "unit-outage") == 1
    for _ in range(40):  # 80 s of probes every 2 s, failures reported all along
        clock.now += 2
        tracker.trouble("1/1 brokers are down")
        assert tracker.check() is not None
    probe.answer = None
    clock.now += 2
    assert tracker.check() is None

    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 + 2 + 1, lines  # down, reminders at 30 s and 60 s, back
    assert "cluster unit-outage (127.0.0.1:1) unreachable since" in lines[0]
    assert "Connection refused #0" in lines[0], "the first reason is the one given"
    assert all("still unreachable" in line for line in lines[1:3])
    assert "reachable again after an outage of 82.0 s" in lines[3]
    assert tracker.state == "up"
    assert _sample("replicator_cluster_reachable", "unit-outage") == 1
    assert _sample("replicator_cluster_outages_total", "unit-outage") == 1


def test_a_cluster_no_client_uses_any_more_is_no_longer_watched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cluster torn down with its clients (a stopped flow) must not be probed and
    reminded of for the rest of the process's life."""
    caplog.set_level(logging.INFO, logger="replicator.kafka.reachability")
    tracker, _, clock, _ = _reachability("unit-gone")
    tracker.trouble("Connect to ipv4#127.0.0.1:1 failed: Connection refused")
    assert tracker.check() is not None and tracker.state == "down"
    for _ in range(59):  # 118 s without a single client report
        clock.now += 2
        assert tracker.check() is not None
    clock.now += 2
    assert tracker.check() is None

    lines = [record.getMessage() for record in caplog.records]
    assert "no longer watching it" in lines[-1] and len(lines) == 1 + 3 + 1, lines
    assert _sample("replicator_cluster_reachable", "unit-gone") is None
    tracker.trouble("Connect to ipv4#127.0.0.1:1 failed: Connection refused")
    assert tracker.state == "suspect", "a client's next trouble starts a new incident"


def test_trouble_the_probe_does_not_confirm_is_one_line_and_no_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.kafka.reachability")
    tracker, probe, clock, spawned = _reachability("unit-blip")
    probe.answer = None  # e.g. one broker of several is down; the cluster serves
    tracker.trouble("127.0.0.1:2/2: Connect to ipv4#127.0.0.1:2 failed: Connection refused")
    assert tracker.check() is None
    assert tracker.state == "up"
    assert _sample("replicator_cluster_outages_total", "unit-blip") == 0
    assert _sample("replicator_cluster_reachable", "unit-blip") == 1
    [line] = [record.getMessage() for record in caplog.records]
    assert "cluster unit-blip (127.0.0.1:1) answers, though its clients reported 1" in line

    for _ in range(29):  # the same broker's failures keep coming: counted, not probed
        clock.now += 1
        tracker.trouble("127.0.0.1:2/2: Connect to ipv4#127.0.0.1:2 failed: Connection refused")
    assert len(spawned) == 1
    clock.now += 1
    tracker.trouble("127.0.0.1:2/2: Connect to ipv4#127.0.0.1:2 failed: Connection refused")
    assert len(spawned) == 2, "after the quiet time, reports are looked into again"
    assert tracker.check() is None
    assert "reported 30 connection failure(s)" in caplog.records[-1].getMessage()


def test_repeated_lines_pass_once_per_window_and_say_how_many_were_held_back() -> None:
    clock = _Clock()
    repeats = RepeatFilter(window_s=60, clock=clock)
    assert repeats.admit("a") == 0
    assert [repeats.admit("a") for _ in range(5)] == [None] * 5
    assert repeats.admit("b") == 0
    clock.now += 60
    assert repeats.admit("a") == 5


def test_clients_at_a_closed_port_write_nothing_raw_and_report_one_outage(
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    watches: list[object] = []  # the test probes in its own thread, not in one left behind
    monkeypatch.setattr(reachability, "CLUSTERS", Clusters(spawn=watches.append))
    port = free_port_pair()  # nothing listens there
    config = {"bootstrap.servers": f"127.0.0.1:{port}"}
    producer = Producer(config, cluster="closed")
    consumer = Consumer({**config, "group.id": "closed"})
    admin = AdminClient(config)
    producer.produce("t", b"v")

    def poll() -> bool:
        producer.poll(0.1)
        consumer.poll(0.1)
        return bool(watches)

    wait_until(poll, 30, "a client reporting the connection failure")
    tracker = reachability.CLUSTERS.of(config)
    assert tracker.state == "suspect"
    assert tracker.check() is not None, "the probe (a real metadata request) failed"
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1)
    for _ in range(20):  # more failures, served to the callbacks
        poll()
    consumer.close()
    assert producer.flush(0) == 1  # nothing was delivered, nothing pretended

    assert not RAW_LIBRDKAFKA.search(capfd.readouterr().err)
    # Trackers of clusters that earlier tests of this process tore down may still remind.
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.INFO and f"127.0.0.1:{port}" in r.getMessage()
    ]
    assert len(lines) == 1, lines
    assert f"cluster closed (127.0.0.1:{port}) unreachable since" in lines[0]
    assert "Connection refused" in lines[0] and "[thrd:" not in lines[0]
    assert len(watches) == 1 and tracker.state == "down"
    assert _sample("replicator_cluster_reachable", "closed") == 0


def test_errors_other_than_connectivity_reach_the_callers_error_cb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watches: list[object] = []
    monkeypatch.setattr(reachability, "CLUSTERS", Clusters(spawn=watches.append))
    got: list[KafkaError] = []
    config = kafka_clients.routed(
        {"bootstrap.servers": "127.0.0.1:9", "error_cb": got.append}, "routing"
    )
    on_error = config["error_cb"]
    on_error(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    on_error(KafkaError(KafkaError._FATAL, "fenced", fatal=True))
    assert [error.code() for error in got] == [KafkaError._FATAL]
    assert len(watches) == 1, "the connection error went to the cluster's reachability"


def test_every_client_the_replicator_builds_routes_its_logs() -> None:
    """No module of the replicator builds confluent-kafka's clients itself (the local
    stack's tooling aside): each takes them from replicator.kafka.clients."""
    clients = {"Consumer", "Producer", "AdminClient"}
    # The probes set their own logger: reachability's, and the access check's, which
    # needs the connection errors the routed clients hand to the reachability tracker.
    exempt = {
        Path("replicator/kafka/clients.py"),
        Path("replicator/kafka/reachability.py"),
        Path("replicator/kafka/access.py"),
        # Built once at load with no broker and its own logger, to let librdkafka check
        # the settings (and below replicator.kafka in the layers).
        Path("replicator/config/client_check.py"),
    }
    offenders = []
    for path in sorted((_ROOT / "replicator").rglob("*.py")):
        if path.relative_to(_ROOT) in exempt:
            continue
        tree = ast.parse(path.read_text())
        built = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        } & clients
        routed = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "replicator.kafka.clients"
            for alias in node.names
        }
        offenders += [f"{path.relative_to(_ROOT)}: {name}" for name in sorted(built - routed)]
    assert not offenders, offenders


# -- a real outage ---------------------------------------------------------------------

PARTITIONS = 3
RATE = 300  # records per second
OUTAGE_S = 20.0
#: The most lines `replicator run` may write about one target outage.
MAX_OUTAGE_LINES = 10


@pytest.fixture(scope="module")
def outage_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A source and a target cluster of this module's own, to kill the target's broker."""
    with own_cluster_pair(tmp_path_factory.mktemp("outage-logging")) as stack:
        yield stack


class _Writer:
    """Produces ~RATE records a second until stopped, keeping what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._stop = threading.Event()
        self.acknowledged: dict[int, list[int]] = defaultdict(list)
        self.failed: list[str] = []
        self._thread = threading.Thread(target=self._run, name="outage-writer", daemon=True)
        self._thread.start()

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(error.str())
        else:
            self.acknowledged[message.partition()].append(message.offset())

    def _run(self) -> None:
        sent = 0
        while not self._stop.wait(0.1):
            for _ in range(RATE // 10):
                self._producer.produce(
                    self._topic,
                    b"v" * 100,
                    partition=sent % PARTITIONS,
                    on_delivery=self._delivered,
                )
                sent += 1
            self._producer.poll(0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0
        assert not self.failed, self.failed[:5]


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except urllib.error.URLError:
        return ""  # not up yet


def _value(port: int, series: str) -> float | None:
    for line in _scrape(port).splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


@pytest.mark.integration
def test_a_target_outage_is_told_in_a_few_lines_and_as_metrics(
    outage_clusters: LocalStack, tmp_path: Path
) -> None:
    primary, dr = outage_clusters.bootstrap("primary"), outage_clusters.bootstrap("dr")
    topic = unique_topic("outage-log")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    port = free_port_pair()
    config = write_config(tmp_path, primary, dr, topic, extra=(f"metrics.port = {port}",))
    log = tmp_path / "replicator.log"
    reachable = f'replicator_cluster_reachable{{bootstrap="{dr}",cluster="dr"}}'
    outages = f'replicator_cluster_outages_total{{bootstrap="{dr}",cluster="dr"}}'
    with log.open("ab") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", "--config", str(config)],
            stdout=out,
            stderr=out,
            env={**os.environ, "REPLICATOR_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}"},
        )
    writer = _Writer(primary, topic)
    try:
        wait_until(lambda: all(end_offsets(dr, remote, PARTITIONS) or [0]), 90, "replicating")
        assert _value(port, reachable) == 1 and _value(port, outages) == 0

        broker = outage_clusters.brokers["dr"]
        start = log.stat().st_size
        killed = time.monotonic()
        for pid in broker.pids():
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: _value(port, reachable) == 0, OUTAGE_S, "dr reported unreachable")
        # The outage's length is the experiment itself, not a wait for a condition.
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - killed)))
        outage_clusters.up(timeout=120, keep_running=True)
        measured = time.monotonic() - killed  # the broker answers again
        wait_until(lambda: _value(port, reachable) == 1, 60, "dr reported reachable again")
        assert _value(port, outages) == 1
        assert run.poll() is None, "`replicator run` exited"
        end = log.stat().st_size

        writer.stop()
        wanted = end_offsets(primary, topic, PARTITIONS)
        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == wanted, 120, "every record")
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(90)
    text = log.read_text(errors="replace")
    assert run.returncode == 0, text[-3000:]

    with log.open("rb") as raw:
        raw.seek(start)
        during = raw.read(end - start).decode(errors="replace").splitlines()
    assert len(during) <= MAX_OUTAGE_LINES, "\n".join(during)
    back = [line for line in during if "cluster dr (" in line and "reachable again" in line]
    down = [line for line in during if "cluster dr (" in line and "unreachable since" in line]
    down = [line for line in down if line not in back]
    assert len(down) == 1 and len(back) == 1, "\n".join(during)
    length = float(re.search(r"an outage of ([\d.]+) s", back[0]).group(1))
    # From the first failed connection to the first answered probe (one every ~7 s).
    assert measured - 5 <= length <= measured + 15, f"{back[0]} (measured {measured:.1f} s)"
    assert not RAW_LIBRDKAFKA.search(text), RAW_LIBRDKAFKA.findall(text)[:5]

    for partition in range(PARTITIONS):
        copied = source_offsets_on_target(dr, remote, partition, wanted[partition])
        assert copied == list(range(wanted[partition])), f"partition {partition}"
        assert sorted(writer.acknowledged[partition]) == copied, f"partition {partition}"
