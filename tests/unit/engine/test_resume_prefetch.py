"""`ResumePoints.prefetch` (replicator/engine/resume.py) over stand-ins for the
clusters' reads: the partitions whose remote partition the target does not serve yet
are not read on the source (a worker starting on 5,000 new partitions reads those
that wait every half second while the target creates them)."""

from __future__ import annotations

from typing import Any

import pytest

from replicator.engine import resume
from replicator.engine.resume import ResumePoints

from helpers.engine_fakes import flow


def test_only_the_partitions_the_target_answered_for_are_read_on_the_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[str, list[tuple[str, int]]]] = []

    def bounds(cluster: Any, partitions: list[tuple[str, int]], _admin: Any) -> dict:
        asked.append((cluster.alias, list(partitions)))
        if cluster.alias == "dr":  # the target serves primary.orders[0] alone so far
            return {key: (0, 0) for key in partitions if key == ("primary.orders", 0)}
        return {key: (0, 10) for key in partitions}

    monkeypatch.setattr(resume, "partition_bounds", bounds)
    monkeypatch.setattr(resume, "tail_replicas", lambda *_: {("primary.orders", 0): None})
    points = ResumePoints(flow())
    try:
        read = points.prefetch([("orders", 0, "primary.orders"), ("orders", 1, "primary.orders")])
    finally:
        points.close()
    assert read == {("orders", 0)}
    assert asked == [
        ("dr", [("primary.orders", 0), ("primary.orders", 1)]),
        ("primary", [("orders", 0)]),
    ]
