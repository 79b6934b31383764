"""An operator pauses a flow while its source is being written, and resumes it
(issue 30): through the state store, so the worker, the status, the verdict and the
supervisor agree; a procedure's stop and start in between leave it paused; a
procedure holding the flow and a stopped flow are refused, naming why; after the
resume every record arrives once.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from replicator.cli import main
from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.operations.health import Bounds
from replicator.operations.supervision import check
from replicator.operations.verdicts import overview
from replicator.procedures.flows import start_flow, stop_flow
from replicator.procedures.pause import pause_flow, resume_flow
from replicator.statestore import StateStore
from replicator.statestore.errors import LeaseHeld

from helpers.kafka import create_topic, unique_topic
from helpers.replication import (
    PacedProduction,
    end_offsets,
    source_offsets_on_target,
    start_replicator,
    wait_until,
    write_config,
)

_RECORDS, _RATE = 3_000, 100  # about 30 s of writing


def test_a_paused_flow_stops_copying_shows_paused_raises_no_alarm_and_resumes_exactly(
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("pause")
    create_topic(primary, topic, partitions=1)
    path = write_config(tmp_path, primary, dr, topic)
    config = load_config(path)
    flow = config.flow("primary->dr")
    remote = f"primary.{topic}"
    where = ["--config", str(path), "--state-url", state_url]
    worker = start_replicator(path, tmp_path / "worker.log", "--state-url", state_url)
    try:
        with PacedProduction(primary, topic, _RECORDS, partitions=1, rate=_RATE) as production:
            wait_until(lambda: (end_offsets(dr, remote, 1) or [0])[0] > 200, 60, "copying")

            capsys.readouterr()
            paused = main(
                [
                    "flows",
                    "pause",
                    flow.name,
                    *where,
                    "--reason",
                    "target maintenance",
                    "-o",
                    "json",
                ]
            )

            assert paused == 0
            assert json.loads(capsys.readouterr().out)["state"] == "paused"
            state = store.flows.get(flow.name)
            assert state is not None and state.state == "paused"
            operator = state.detail["by"]
            assert "(replicator CLI)" in operator
            assert state.detail["reason"] == "target maintenance"
            # The source is still written; nothing more reaches the target.
            held = end_offsets(dr, remote, 1)
            time.sleep(5)
            assert production.running, "the source should still be written while paused"
            assert end_offsets(dr, remote, 1) == held
            assert worker.poll() is None, "pausing stops the flow's tasks, not the worker"
            # Shown as paused, not as an alarm: no problem though its lag grows.
            [verdict] = overview(config, store, timedelta(hours=1)).verdicts
            assert verdict.verdict == "healthy", verdict.as_dict()
            assert any("paused by an operator" in note for note in verdict.notes), verdict.notes
            [flow_status] = overview(config, store, timedelta(hours=1)).status.flows
            assert flow_status.desired_state == "paused"
            supervised = check(config, store, None, Bounds(max_lag_records=10))
            assert supervised.problems == [], [str(p) for p in supervised.problems]
            # Pausing again says who paused it, and changes nothing.
            again = pause_flow(store, flow, "bob", "me too", timeout_s=60)
            assert again["already"] and again["by"] == operator
            # A procedure that stops and starts the flow (an offset reset) leaves it paused.
            stop_flow(store.flows, flow, "offset-reset-1", timeout_s=60)
            assert start_flow(store.flows, flow.name, "offset-reset-1")["state"] == "paused"
            assert store.flows.get(flow.name).detail["by"] == operator
            # An operator and a procedure never interleave: its lease is named.
            store.leases.acquire([f"flow {flow.name}"], "failover-7", ttl_s=60)
            with pytest.raises(LeaseHeld, match="leased to failover-7"):
                resume_flow(store, flow, "bob")
            store.leases.release("failover-7")

            capsys.readouterr()
            assert main(["flows", "resume", flow.name, *where]) == 0
            assert f"flow {flow.name} resumed (paused by {operator}" in capsys.readouterr().out
            assert main(["flows", "resume", flow.name, *where]) == 1
            assert "is not paused: it runs" in capsys.readouterr().err

        # Everything written, paused or not, arrives once and in order.
        wait_until(
            lambda: end_offsets(dr, remote, 1) == [_RECORDS], 120, f"{_RECORDS} records copied"
        )
        assert source_offsets_on_target(dr, remote, 0) == list(range(_RECORDS))
        # A flow a procedure stopped is the procedure's to start: neither verb applies.
        stop_flow(store.flows, flow, "failover-8", timeout_s=60)
        with pytest.raises(ReplicatorError, match="stopped by failover-8, not paused"):
            resume_flow(store, flow, "alice")
        with pytest.raises(ReplicatorError, match="nothing to pause"):
            pause_flow(store, flow, "alice", "again", timeout_s=60)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
