"""One `replicator run` with both flows of an active-active pair and two workers each
(`tasks.max = 2`: four worker processes), one `metrics.port`: one scrape serves every
flow's checkpoint, lag and worker families, and no worker restarts (issue 42).

Before, each worker process served on `metrics.port + index`, so the second flow's
workers found the first's ports taken ("Address already in use", restarts), and the
checkpoint families, counted in the runner process, were served by nobody."""

from __future__ import annotations

import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers.kafka import create_topic, free_port_pair, unique_topic
from helpers.replication import end_offsets, preload, start_replicator, wait_until, write_config

pytestmark = pytest.mark.integration


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError):
        return ""  # not up yet


def _series(text: str, family: str) -> dict[str, float]:
    """Every sample of `family` in the exposition: labels -> value."""
    found = re.findall(rf"^{family}(\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
    return {labels: float(value) for labels, value in found}


def test_two_flows_two_workers_each_one_scrape(tmp_path: Path, primary: str, dr: str) -> None:
    ours, theirs = unique_topic("tree-a"), unique_topic("tree-b")
    create_topic(primary, ours, partitions=4)
    create_topic(dr, theirs, partitions=4)
    wanted_ours = preload(primary, ours, 400, 4)
    wanted_theirs = preload(dr, theirs, 400, 4)
    port = free_port_pair()
    config = write_config(
        tmp_path, primary, dr, ours,
        extra=(
            "dr->primary.enabled = true",
            f"dr->primary.topics = {theirs}",
            "tasks.max = 2",
            f"metrics.port = {port}",
            "emit.checkpoints.interval.seconds = 2",
        ),
    )  # fmt: skip
    log = tmp_path / "run.log"
    process = start_replicator(config, log)
    flows = ("primary->dr", "dr->primary")
    try:
        wait_until(lambda: end_offsets(dr, f"primary.{ours}", 4) == wanted_ours, 120, "a->b")
        wait_until(lambda: end_offsets(primary, f"dr.{theirs}", 4) == wanted_theirs, 120, "b->a")

        last: list[str] = [""]

        def complete() -> bool:
            text = last[0] = _scrape(port)
            running = _series(text, "replicator_worker_running")
            checkpoints = _series(text, "replicator_checkpoint_success_timestamp_seconds")
            records = _series(text, "replicator_replicated_records_total")
            return (
                len(running) == 4
                and all(value == 1.0 for value in running.values())
                and all(any(f'flow="{f}"' in s for s in checkpoints) for f in flows)
                and sum(v for s, v in records.items() if ours in s) == sum(wanted_ours)
                and sum(v for s, v in records.items() if theirs in s) == sum(wanted_theirs)
            )

        try:
            wait_until(complete, 120, "every flow's and worker's families in one scrape")
        except AssertionError:
            families = ("worker_running", "checkpoint_success", "replicated_records_total")
            seen = [line for line in last[0].splitlines() if any(f in line for f in families)]
            log_tail = log.read_text(encoding="utf-8")[-4000:]
            raise AssertionError("\n".join([*seen, "-- log:", log_tail])) from None
        scraped = _scrape(port)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)

    # Each flow's lag, per worker (the alerts and the dashboard sum by flow and topic).
    lag = _series(scraped, "replicator_lag_records")
    for flow, topic in (("primary->dr", ours), ("dr->primary", theirs)):
        mine = {s: v for s, v in lag.items() if f'flow="{flow}"' in s and topic in s}
        assert mine, f"no lag series of {flow} in:\n{scraped}"
        assert sum(mine.values()) == 0, mine
    workers = {re.search(r'worker="([^"]+)"', s).group(1) for s in lag}  # type: ignore[union-attr]
    assert len(workers) >= 2, workers  # the workers' partitions, each with its own label
    # One family each, however many processes count it (a duplicate TYPE line is invalid).
    types = re.findall(r"^# TYPE (\S+) ", scraped, re.MULTILINE)
    assert len(types) == len(set(types)), sorted(t for t in types if types.count(t) > 1)

    text = log.read_text(encoding="utf-8")
    assert "Address already in use" not in text, text[-3000:]
    assert "starting it again" not in text, text[-3000:]
    assert process.returncode in (0, -signal.SIGTERM), process.returncode
