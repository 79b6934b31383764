"""Replication lag in the tools operators already run: the engine commits its source
positions under its consumer group, and the Kafka jars' own `kafka-consumer-groups`
(ConsumerGroupCommand, what `kafka-consumer-groups.sh --describe` runs) shows the lag,
going to 0 once replicated; in the default mode (C span path and Python loop) and in
exactly-once mode. `replicator.commit.source.offsets = false` commits nothing."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    TopicPartition,
)

from replicator.config.model import FlowConfig
from replicator.engine import source_commits
from replicator.engine.source_commits import COMMIT_EVERY_S
from replicator_lab.mirrormaker import java_command

from helpers.kafka import create_topic, unique_topic
from helpers.replication import (
    end_offsets,
    flow_config,
    preload,
    running,
    source_offsets_on_target,
    wait_until,
)

pytestmark = pytest.mark.integration

#: Kafka 4.x's kafka-consumer-groups.sh main class (kafka.admin.ConsumerGroupCommand
#: before 3.7).
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GROUP = "replicator-primary-dr"  # the engine's group of the flow primary->dr
PARTITIONS = 2


def describe(bootstrap: str, topic: str, workdir: Path) -> dict[int, tuple[int, int, int]]:
    """`kafka-consumer-groups --describe --group GROUP`: partition -> (CURRENT-OFFSET,
    LOG-END-OFFSET, LAG) of `topic` (no row: nothing committed for it)."""
    command = java_command(CONSUMER_GROUPS, heap="128m", log_file=workdir / "consumer-groups.log")
    result = subprocess.run(
        [*command, "--bootstrap-server", bootstrap, "--describe", "--group", GROUP],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0] == GROUP and fields[1] == topic:
            current, end, lag = (int(x) if x != "-" else -1 for x in fields[3:6])
            rows[int(fields[2])] = (current, end, lag)
    return rows


def committed(bootstrap: str, topic: str) -> list[int] | None:
    """The group's committed offsets of `topic`'s partitions (OFFSET_INVALID: none),
    read quickly; None while the group coordinator does not answer (it may be loading).

    Read with a consumer of the group that never joins it (`committed` only fetches),
    not AdminClient.list_consumer_group_offsets: librdkafka 2.16.1's admin client
    crashed the test process (SIGSEGV in rd_kafka_cgrp_op from
    rd_kafka_handle_OffsetFetch) right after the clusters started."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return [tp.offset for tp in consumer.committed(partitions, timeout=10)]
    except KafkaException:
        return None
    finally:
        consumer.close()


def _flow(primary: str, dr: str, topic: str, **properties: str) -> FlowConfig:
    return flow_config(("primary", primary), ("dr", dr), topic, properties)


def _topic(primary: str, prefix: str, records: int) -> tuple[str, list[int]]:
    topic = unique_topic(prefix)
    create_topic(primary, topic, partitions=PARTITIONS)
    return topic, preload(primary, topic, records, PARTITIONS)


def _replicated(primary: str, dr: str, topic: str, wanted: list[int]) -> None:
    """Wait until the group's commits reached `wanted` (a commit round every 5 s), then
    check the target holds every record once (read_committed: in exactly-once mode
    transaction markers take offsets too, so the end offsets say nothing)."""
    wait_until(lambda: committed(primary, topic) == wanted, 60, f"commits reach {wanted}")
    for partition in range(PARTITIONS):
        copied = source_offsets_on_target(dr, f"primary.{topic}", partition)
        assert copied == list(range(wanted[partition])), partition


def test_lag_shows_in_kafka_consumer_groups_and_goes_to_zero(
    primary: str, dr: str, tmp_path: Path
) -> None:
    topic, wanted = _topic(primary, "lag-tool", 300)
    flow = _flow(primary, dr, topic)
    with running(flow):
        _replicated(primary, dr, topic, wanted)
    # Written while nothing replicates: the tool shows the lag...
    more = preload(primary, topic, 100, PARTITIONS)
    ends = [a + b for a, b in zip(wanted, more, strict=True)]
    rows = describe(primary, topic, tmp_path)
    assert rows == {p: (wanted[p], ends[p], more[p]) for p in range(PARTITIONS)}
    # ... and 0 once replicated.
    with running(flow):
        _replicated(primary, dr, topic, ends)
        rows = describe(primary, topic, tmp_path)
    assert rows == {p: (ends[p], ends[p], 0) for p in range(PARTITIONS)}


@pytest.mark.parametrize(
    ("mode", "properties"),
    [
        ("python loop", {"replicator.data.path": "python"}),
        ("exactly-once", {"exactly.once": "true"}),
    ],
)
def test_commits_in_every_mode(
    primary: str,
    dr: str,
    mode: str,
    properties: dict[str, str],
) -> None:
    """The committed positions reach the end of what was copied (read directly: the
    tool's rendering of them is the first test's)."""
    topic, wanted = _topic(primary, "lag-mode", 200)
    with running(_flow(primary, dr, topic, **properties)):
        _replicated(primary, dr, topic, wanted)


def test_nothing_committed_when_turned_off(primary: str, dr: str, tmp_path: Path) -> None:
    topic, wanted = _topic(primary, "lag-off", 100)
    flow = _flow(primary, dr, topic, **{"replicator.commit.source.offsets": "false"})
    assert not flow.commit_source_offsets
    with running(flow):
        wait_until(lambda: end_offsets(dr, f"primary.{topic}", PARTITIONS) == wanted, 60, "copy")
        time.sleep(2 * COMMIT_EVERY_S + 1)  # two commit rounds: still nothing committed
        assert committed(primary, topic) == [OFFSET_INVALID] * PARTITIONS
        # The tool lists the worker's partitions (it is a member) with no offset.
        rows = describe(primary, topic, tmp_path)
    assert rows == {p: (-1, wanted[p], -1) for p in range(PARTITIONS)}


def test_positions_are_committed_when_partitions_are_given_up(
    primary: str, dr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no periodic round due, stopping the worker (its partitions revoked) still
    commits where it got to."""
    monkeypatch.setattr(source_commits, "COMMIT_EVERY_S", 3600.0)
    topic, wanted = _topic(primary, "lag-revoke", 200)
    with running(_flow(primary, dr, topic)):
        wait_until(lambda: end_offsets(dr, f"primary.{topic}", PARTITIONS) == wanted, 60, "copy")
    assert committed(primary, topic) == wanted
