"""Workers of one flow share its partitions through the consumer group; a worker
killed with -9 loses nothing: its partitions move and resume at the target tail.
Both group protocols: the classic one (the default) and KIP-848's."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from helpers.kafka import create_topic, unique_topic
from helpers.replication import (
    PacedProduction,
    end_offsets,
    preloaded_flow,
    source_offsets_on_target,
    start_replicator,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

GROUP = "replicator-primary-dr"
PARTITIONS = 12
RECORDS = 600_000
#: Records per second written while two workers share the flow: about 10 s of
#: traffic, so the kill lands mid-stream however fast the engine copies.
RATE = 60_000


def _assignments(primary: str, topic: str) -> list[int]:
    """Partitions of `topic` owned by each member of the flow's group."""
    admin = AdminClient({"bootstrap.servers": primary})
    try:
        group = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)
    except KafkaException:
        return []  # the group coordinator is still loading or moving
    except TimeoutError:
        # The broker did not answer within 10 s: on this 2-core machine, with both
        # workers copying at full speed (the compiled data path), it happened in 2 of
        # 4 runs. Asked again, as when the coordinator moves.
        return []
    return sorted(
        sum(1 for tp in member.assignment.topic_partitions if tp.topic == topic)
        for member in group.members
    )


def _both_own_some(primary: str, topic: str) -> bool:
    owned = [count for count in _assignments(primary, topic) if count]
    return len(owned) == 2 and sum(owned) == PARTITIONS


def _exactly_once(dr: str, remote: str, wanted: list[int]) -> None:
    for partition in range(PARTITIONS):
        copied = source_offsets_on_target(dr, remote, partition, wanted[partition])
        assert copied == list(range(wanted[partition])), f"partition {partition}"


def _stop(process: subprocess.Popen[bytes], log: Path) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()[-3000:]


def _kill_one_of_two_workers(
    tmp_path: Path,
    primary: str,
    dr: str,
    config: Path,
    topic: str,
    sharing: Callable[[], bool],
    sharing_means: str,
) -> None:
    """Start two workers on `config`, wait until they share the flow (`sharing`,
    which means `sharing_means`), then write `RECORDS` to `topic` at a pace and kill
    one worker with -9 mid-stream: the survivor takes every partition of `topic` and
    copies each record exactly once."""
    remote = f"primary.{topic}"
    logs = [tmp_path / "worker-a.log", tmp_path / "worker-b.log"]
    workers = [start_replicator(config, log) for log in logs]
    try:
        wait_until(sharing, 90, sharing_means)
        with PacedProduction(primary, topic, RECORDS, PARTITIONS, RATE) as source:
            wait_until(
                lambda: sum(end_offsets(dr, remote, PARTITIONS) or [0]) > 50_000, 60, "progress"
            )
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(10)
            assert source.running, "killed mid-stream: the source is still being written"
        wanted = source.wanted
        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == wanted, 120, "all records")
        wait_until(
            lambda: [a for a in _assignments(primary, topic) if a] == [PARTITIONS],
            30,
            "the survivor owning every partition",
        )
        _stop(workers[1], logs[1])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    _exactly_once(dr, remote, wanted)


def test_two_workers_share_a_flow_and_survive_kill_9(tmp_path: Path, primary: str, dr: str) -> None:
    topic = unique_topic("shared")
    create_topic(primary, topic, partitions=PARTITIONS)
    config = write_config(tmp_path, primary, dr, topic)
    _kill_one_of_two_workers(
        tmp_path, primary, dr, config, topic,
        lambda: _both_own_some(primary, topic), "both workers owning partitions",
    )  # fmt: skip


def test_consumer_group_protocol_spreads_every_topic_and_survives_kill_9(
    tmp_path: Path, primary: str, dr: str
) -> None:
    """With `group.protocol=consumer` the broker's range assignor gives each worker
    half of every topic: the busy topic is shared even though an idle topic has as
    many partitions (cooperative-sticky may give one worker each topic whole)."""
    busy, idle = unique_topic("kip848-busy"), unique_topic("kip848-idle")
    for topic in (busy, idle):
        create_topic(primary, topic, partitions=PARTITIONS)
    extra = ("primary.consumer.group.protocol = consumer",)
    config = write_config(tmp_path, primary, dr, f"{busy}, {idle}", extra=extra)
    half = [PARTITIONS // 2] * 2
    _kill_one_of_two_workers(
        tmp_path, primary, dr, config, busy,
        lambda: _assignments(primary, busy) == half and _assignments(primary, idle) == half,
        "each worker owning half of each topic",
    )  # fmt: skip


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(line) for line in found.stdout.split()]


def test_tasks_max_runs_worker_processes_and_restarts_a_killed_one(
    tmp_path: Path, primary: str, dr: str
) -> None:
    flow = preloaded_flow(
        tmp_path, primary, dr, "tasks", RECORDS, PARTITIONS, extra=("tasks.max = 2",)
    )
    topic, remote, wanted, config = flow.topic, flow.remote, flow.wanted, flow.config
    log = tmp_path / "replicator.log"
    parent = start_replicator(config, log)
    try:
        wait_until(lambda: _both_own_some(primary, topic), 90, "two workers owning partitions")
        workers = _children(parent.pid)
        assert len(workers) >= 2, f"expected two worker processes, found {workers}"
        subprocess.run(["kill", "-9", str(workers[-1])], check=True)

        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == wanted, 120, "all records")
        wait_until(lambda: "starting it again" in log.read_text(), 30, "the worker restarted")
        _stop(parent, log)
        assert not _children(parent.pid)
    finally:
        if parent.poll() is None:
            parent.kill()
    _exactly_once(dr, remote, wanted)
