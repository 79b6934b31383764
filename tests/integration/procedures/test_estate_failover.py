"""An unplanned failover at an estate's size (issue 41): one application whose group
spans 1,000 partitions over 250 topics, checkpointed by `replicator run`, then its
primary stopped. The failover moves the group to every one of the 1,000 remote
partitions exactly (the first replica of its committed source position, computed
independently from every target partition read whole) and loses no record.

Ten of the topics are written in transactions, so target offsets are not source
offsets, and some of the group's positions sit on a commit marker.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from replicator.config import load_config
from replicator.engine.status import PartitionStatus, read_status
from replicator.offsets.checkpoints import read_checkpoints
from replicator.procedures import Failover
from replicator.statestore import StateStore
from replicator_lab import LocalStack

from helpers.estate import (
    PARTITIONS,
    RECORDS,
    TOPICS,
    TRANSACTIONAL,
    create,
    exact,
    fill,
    high_watermarks,
    replica_offsets,
)
from helpers.kafka import dropped_after
from helpers.procedures import commit_offsets, committed_offsets, runner
from helpers.replication import wait_until, write_config

pytestmark = pytest.mark.integration

log = logging.getLogger(__name__)

COPY_S = 240.0
CHECKPOINTS_S = 120.0
FAILOVER_S = 120.0


def _position(topic_index: int, partition: int) -> int:
    """The group's committed source offset: 35..39 (39 is a commit marker of the
    transactional topics: 9 records, then the marker)."""
    return 35 + (topic_index + partition) % 5


def test_unplanned_failover_of_1000_partitions_resumes_them_exactly(
    tmp_path: Path, lone_primary: LocalStack, dr: str, store: StateStore
) -> None:
    prefix = f"estfo{uuid.uuid4().hex[:6]}"
    remotes = [f"primary.{prefix}-{i:03d}" for i in range(TOPICS)]
    with dropped_after(dr, remotes):  # the lone primary goes with its module
        _resumes_exactly(tmp_path, lone_primary, dr, store, prefix)


def _resumes_exactly(
    tmp_path: Path, lone_primary: LocalStack, dr: str, store: StateStore, prefix: str
) -> None:
    primary = lone_primary.bootstrap("primary")
    topics = create(primary, prefix)
    fill(primary, topics)
    config = load_config(
        write_config(
            tmp_path, primary, dr, f"{prefix}-.*", extra=("emit.checkpoints.interval.seconds = 5",)
        )
    )
    flow = config.flow("primary->dr")
    app = f"{prefix}-app"
    store.applications.register(app, "primary")
    positions = {(t, p): _position(i, p) for i, t in enumerate(topics) for p in range(PARTITIONS)}
    commit_offsets(flow.source, app, positions)
    remotes = [f"primary.{t}" for t in topics]
    # Every record once on dr; the source's commit markers are not copied.
    wanted_ends = {(f"primary.{t}", p): RECORDS for t, p in positions}

    def copied() -> bool:
        try:
            return high_watermarks(dr, remotes) == wanted_ends
        except Exception:  # remote topics not all created yet
            return False

    def checkpointed() -> bool:
        found = read_checkpoints(flow.target, "primary.checkpoints.internal")
        return all(
            (c := found.get((app, f"primary.{t}", p))) is not None and c.upstream == offset
            for (t, p), offset in positions.items()
        )

    def reported() -> bool:
        rows = read_status(flow.target, flow.name)
        seen = {
            (row.topic, row.partition)
            for row in rows
            if isinstance(row, PartitionStatus) and row.next_offset is not None
        }
        return seen >= set(positions)

    started = time.monotonic()
    with runner([flow], store):
        wait_until(copied, COPY_S, "every record of the 1,000 partitions on dr")
        copied_s = time.monotonic() - started
        wait_until(checkpointed, CHECKPOINTS_S, "the group's checkpoint of all 1,000 partitions")
        checkpointed_s = time.monotonic() - started
        # What an unplanned failover compares the copy with: the status the worker
        # publishes of each partition (every 10 s). A worker that copied and
        # checkpointed this estate in seconds, on a machine other tests share, has not
        # always reported every partition yet; an estate's has, long before an outage.
        wait_until(reported, CHECKPOINTS_S, "the status of all 1,000 partitions")
        lone_primary.down(["primary"])

        failed_over = time.monotonic()
        report = Failover(
            config, "primary->dr", [app], store, mode="unplanned", timeout_s=FAILOVER_S
        ).run()
        failover_s = time.monotonic() - failed_over

    replicas = replica_offsets(dr, remotes)
    expected = {
        (f"primary.{t}", p): exact(replicas[f"primary.{t}", p], offset)
        for (t, p), offset in positions.items()
    }
    log.info(
        "copied after %.0f s, checkpointed after %.0f s, failover took %.1f s",
        copied_s,
        checkpointed_s,
        failover_s,
    )
    assert report.ok, report.error
    assert store.applications.get(app).active_cluster == "dr"
    assert committed_offsets("dr", dr, app) == expected
    # Target offsets are not source offsets (markers at 9, 19, 29, 39 are not copied),
    # and a position on a marker resumes at the record after it.
    assert expected[f"primary.{topics[0]}", 0] == 32  # source 35
    assert positions[topics[4], 0] == 39 and expected[f"primary.{topics[4]}", 0] == 36
    unreplicated = report.report_of("unreplicated")["partitions"]
    assert len(unreplicated) == TOPICS * PARTITIONS
    # Every record reached dr: nothing before the source end the replicator last saw is
    # missing on the plain topics. (A transactional partition ends with a commit marker,
    # which the status counts as one offset behind: the report says 1 there, a known
    # fault of the status-based count, test_failover's trailing-marker test.)
    plain = {f"primary.{t}" for t in topics[TRANSACTIONAL:]}
    assert all(p["records"] == 0 for p in unreplicated if p["remote_topic"] in plain)
