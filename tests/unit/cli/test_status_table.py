"""`replicator status` and `flows describe` on a flow of thousands of partitions (issue
41): the table lists those that need a look and the furthest behind, then one row for the
rest; `--all` and `-o json` hold every partition."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from replicator.cli.flows import _print_describe
from replicator.cli.status_table import FURTHEST_BEHIND, LISTED_PARTITIONS, status_table
from replicator.config import load_config
from replicator.engine.status import PartitionStatus, WorkerStatus
from replicator.operations.dr_status import FlowStatus, PartitionLag

FLOW = "primary->dr"


def _estate(count: int) -> list[PartitionStatus | WorkerStatus]:
    rows: list[PartitionStatus | WorkerStatus] = [
        PartitionStatus(FLOW, f"orders-{i // 4:04d}", i % 4, "replicating", 100, 0, 100)
        for i in range(count)
    ]
    rows.append(WorkerStatus(FLOW, "w-1", "running", partitions=count))
    return rows


def _key(row: PartitionStatus | WorkerStatus) -> tuple[str, int] | None:
    return (row.topic, row.partition) if isinstance(row, PartitionStatus) else None


def test_a_small_flow_lists_every_partition() -> None:
    table = status_table(_estate(LISTED_PARTITIONS))
    assert len(table) == 1 + LISTED_PARTITIONS
    assert table[0][1] == "worker w-1"


def test_an_estate_lists_what_needs_a_look_and_sums_up_the_rest() -> None:
    rows = _estate(5_000)
    stopped = PartitionStatus(FLOW, "orders-0100", 2, "stopped", 50, 50, 50, error="too large")
    skipped = PartitionStatus(FLOW, "orders-0200", 1, "replicating", 100, 0, 90)
    skipped.skipped_by = {"loop": [10, 5]}
    behind = [
        PartitionStatus(FLOW, f"orders-{i:04d}", 3, "replicating", 100 - i, i, 100 - i)
        for i in range(300, 300 + FURTHEST_BEHIND + 5)
    ]
    replaced = {(r.topic, r.partition) for r in [stopped, skipped, *behind]}
    rows = [r for r in rows if _key(r) not in replaced]
    rows += [stopped, skipped, *behind]
    table = status_table(rows)
    whats = [what for _, what, _, _ in table]
    assert whats[0] == "worker w-1"
    assert "partition orders-0100[2]" in whats and "partition orders-0200[1]" in whats
    # The furthest behind, and not the others behind them.
    furthest = {f"partition orders-{i:04d}[3]" for i in range(305, 315)}
    assert furthest <= set(whats)
    assert "partition orders-0300[3]" not in whats
    others = 5_000 - 2 - FURTHEST_BEHIND
    flow, what, state, details = table[-1]
    assert (flow, what, state) == (FLOW, f"{others} more partitions", "replicating")
    assert details.startswith(f"lag={sum(range(300, 305))} (at most 304) ")
    assert "`--all` lists each" in details
    assert len(table) == 1 + 2 + FURTHEST_BEHIND + 1
    stopped_row = next(row for row in table if row[1] == "partition orders-0100[2]")
    assert stopped_row[2] == "stopped" and "ERROR: too large" in stopped_row[3]


def test_an_estate_with_nothing_to_look_at_is_one_row() -> None:
    worker, partitions = status_table(_estate(5_000))
    assert worker[1] == "worker w-1"
    assert partitions[1:3] == ("5000 partitions", "replicating")
    assert partitions[3].startswith("lag=0 replicated=500000 lost=0;")


def test_all_lists_every_partition_of_an_estate() -> None:
    assert len(status_table(_estate(5_000), every_partition=True)) == 5_001


def test_flows_describe_lists_an_estates_partitions_the_same_way(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # no cell folds
    flow = load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": "127.0.0.1:1",
            "dr.bootstrap.servers": "127.0.0.1:2",
            "primary->dr.enabled": "true",
        }
    ).flows[0]
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    partitions = [
        PartitionLag(f"orders-{i // 4:04d}", i % 4, "replicating", 0, 100, 100, 0, None, now, False)
        for i in range(5_000)
    ]
    partitions[7] = replace(partitions[7], lag=40)
    partitions[9] = replace(partitions[9], stale=True)
    status = FlowStatus(FLOW, "primary", "dr", "running", partitions=partitions)
    _print_describe(flow, status, [])
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("orders-")]
    assert listed == ["orders-0001[3]", "orders-0002[1]"]
    [others] = [line.split() for line in out.splitlines() if line.startswith("4998 more")]
    assert others[2:7] == ["partitions", "replicating", "0", "499800", "0"]
    _print_describe(flow, status, [], every_partition=True)
    assert capsys.readouterr().out.count("orders-") == 5_000
