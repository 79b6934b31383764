"""Group offsets read and written while the group coordinator loads: no crash.

Right after a broker starts (or restarts, or takes over `__consumer_offsets`
partitions), its group coordinator answers "loading" / "not coordinator".
librdkafka 2.16's admin ListConsumerGroupOffsets then takes the whole process down
(SIGSEGV in `rd_kafka_cgrp_op`, librdkafka issue #5040): measured here, a process
calling it on new groups died 1.7 s after a fresh broker answered. Checkpoints,
group-offset sync, the supervisor's checks and failover all read group offsets, so
a rolling restart of a cluster would have killed `replicator run`. GroupAdmin now
reads and writes them through a consumer of the group, whose path retries there.

The same librdkafka aborts the process when a coordinator-bound admin request
(DescribeConsumerGroups, DeleteConsumerGroups) times out before the coordinator
answers and the answer comes after (assertion `eonce->refcnt > 0`, librdkafka issue
#4605): `replicator run` died so while creating 5,000 remote partitions, its describe
of 1 s sent while the fresh target created its offsets topic. Such a timeout of 10 ms
does it on any cluster, which the second test uses: every group call of the replicator
is made with its wait shortened to 1 ms, the answers arrive after it, and the process
lives (it aborted before the calls moved to ListGroups, a consumer, and `UNEXPIRED_S`).

The calls run in a child process, so a crash is an exit code, not a lost session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator_lab import ClusterSpec, LocalStack

from helpers.kafka import free_port_pair

ROOT = Path(__file__).resolve().parents[3]

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


_LATE_ANSWERS = textwrap.dedent(
    """
    import sys, time, uuid
    from replicator.config.model import ClusterConfig
    from replicator.engine import topic_sync
    from replicator.engine.topic_sync import TopicSync
    from replicator.errors import ReplicatorError
    from replicator.init import permissions
    from replicator.offsets import groups
    from replicator.verification import access
    from helpers.replication import flow_config

    bootstrap = sys.argv[1]
    # Every wait shorter than the cluster takes to locate a coordinator for a new client.
    groups._TIMEOUT_S = access._TIMEOUT_S = permissions._GROUP_TIMEOUT_S = 0.001
    topic_sync.COORDINATORS_WAIT_S = 0.001
    settings = {"bootstrap.servers": bootstrap}
    cluster = ClusterConfig(
        "any", bootstrap, consumer=dict(settings), producer=dict(settings), admin=dict(settings)
    )
    flow = flow_config(("any", bootstrap), ("other", bootstrap), "late-.*")

    calls = (
        lambda: groups.GroupAdmin(cluster).idle([f"g-{uuid.uuid4().hex[:8]}"]),
        lambda: groups.GroupAdmin(cluster).is_idle(f"g-{uuid.uuid4().hex[:8]}"),
        lambda: groups.GroupAdmin(cluster).ask_about([f"g-{uuid.uuid4().hex[:8]}"]),
        lambda: TopicSync(flow)._coordinators_first(),
        lambda: access._group_once(cluster),
        lambda: permissions._describe_groups_once(cluster, [f"g-{uuid.uuid4().hex[:8]}"]),
    )
    failed = 0
    for call in calls:
        for _ in range(3):
            try:
                call()
            except ReplicatorError:
                failed += 1  # no answer in 1 ms: said so, and asked again by the caller
        time.sleep(1.5)  # the answers arrive after their waits ended
    print(f"alive after {3 * len(calls)} calls, {failed} without an answer in time")
    """
)


def test_answers_after_the_wait_ended_do_not_crash(primary: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LATE_ANSWERS, primary],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    assert done.returncode == 0, (
        f"exit {done.returncode} (negative: killed by that signal)\n{done.stderr[-3000:]}"
    )
    assert done.stdout.startswith("alive after 18 calls"), done.stdout
