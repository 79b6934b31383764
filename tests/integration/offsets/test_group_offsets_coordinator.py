"""Group offsets read and written while the group coordinator loads: no crash.

Right after a broker starts (or restarts, or takes over `__consumer_offsets`
partitions), its group coordinator answers "loading" / "not coordinator".
librdkafka 2.16's admin ListConsumerGroupOffsets then takes the whole process down
(SIGSEGV in `rd_kafka_cgrp_op`, librdkafka issue #5040): measured here, a process
calling it on new groups died 1.7 s after a fresh broker answered. Checkpoints,
group-offset sync, the supervisor's checks and failover all read group offsets, so
a rolling restart of a cluster would have killed `replicator run`. GroupAdmin now
reads and writes them through a consumer of the group, whose path retries there.

The calls run in a child process, so a crash is an exit code, not a lost session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator_lab import ClusterSpec, LocalStack

from helpers.kafka import free_port_pair

pytestmark = pytest.mark.integration

HAMMER_S = 10

_CALLS = textwrap.dedent(
    """
    import sys, time, uuid
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from replicator.config.model import ClusterConfig
    from replicator.offsets.groups import GroupAdmin

    bootstrap, seconds = sys.argv[1], float(sys.argv[2])
    settings = {"bootstrap.servers": bootstrap}
    cluster = ClusterConfig(
        "fresh", bootstrap, consumer=dict(settings), producer=dict(settings), admin=dict(settings)
    )
    groups = GroupAdmin(cluster)
    calls = errors = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # new groups: each finds its coordinator anew
        try:
            groups.committed(f"g-{uuid.uuid4().hex[:8]}")
        except Exception:
            errors += 1  # an error is fine while the coordinator loads; a crash is not
        calls += 1
    admin = AdminClient(settings)
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    groups.commit("billing", [TopicPartition("orders", 1, 5)])
    [committed] = groups.committed("billing", ["orders"])
    assert (committed.topic, committed.partition, committed.offset) == ("orders", 1, 5)
    print(f"calls {calls} errors {errors}")
    """
)


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[str]:
    """A one-broker cluster of this test's own, its group coordinator just started."""
    port = free_port_pair()
    stack = LocalStack([ClusterSpec("fresh", port)], data_dir=tmp_path / "fresh")
    stack.up(timeout=120)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stack.down(wipe=True)


def test_group_offsets_while_the_coordinator_loads_do_not_crash(fresh_cluster: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CALLS, fresh_cluster, str(HAMMER_S)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"exit {done.returncode} (negative: killed by that signal)\n{done.stderr[-3000:]}"
    )
    assert done.stdout.startswith("calls "), done.stdout
