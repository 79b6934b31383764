"""The full DR drill: a drill application really fails over and back, the run is
measured and stored, and a rerun with the same id changes nothing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from replicator.config import load_config
from replicator.procedures import FullDrill, live_workers
from replicator.statestore import StateStore

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import commit_offsets, committed_offsets, runner
from helpers.replication import preload, wait_until, write_config

pytestmark = pytest.mark.integration


def test_full_drill_fails_over_and_back_and_stores_its_figures(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    topic = unique_topic("drill.full")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=3)
    preload(primary, topic, 300, 3)
    reverse = ("dr->primary.enabled = true", f"dr->primary.topics = {topic}")
    config = load_config(write_config(tmp_path, primary, dr, topic, extra=reverse))
    forward = config.flow("primary->dr")
    app = f"drill-app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    positions = {(topic, 0): 50, (topic, 1): 100, (topic, 2): 0}
    commit_offsets(forward.source, app, positions)
    store.flows.set("dr->primary", "stopped")

    with runner([forward, config.flow("dr->primary")], store):
        wait_until(lambda: live_workers(forward), 90, "the forward flow running")
        report = FullDrill(config, forward.name, [app], store, timeout_s=90).run("drill-full")
        again = FullDrill(config, forward.name, [app], store, timeout_s=90).run("drill-full")

    assert report.ok, report.error
    assert [s.name for s in report.steps] == ["failover", "failback"]
    assert [s.status for s in report.steps] == ["done", "done"]
    assert report.rpo_records == 0 and report.rto_seconds is not None
    assert report.report_of("failover")["procedure_id"] == "drill-full.failover"
    [drill] = store.runs.recent("drill")
    assert (drill.mode, drill.outcome, drill.rpo_records) == ("full", "succeeded", 0)
    assert drill.rto_seconds == report.rto_seconds
    assert [r.outcome for r in store.runs.recent("failover") + store.runs.recent("failback")] == [
        "succeeded"
    ] * 2
    # Back where it started: on primary, at the same positions, the forward flow running.
    assert store.applications.get(app).active_cluster == "primary"
    now = committed_offsets("primary", primary, app)
    assert {k: v for k, v in now.items() if k[0] == topic} == positions
    assert store.flows.get("primary->dr").state == "running"
    assert store.flows.get("dr->primary").state == "stopped"
    assert [s.status for s in again.steps] == ["skipped", "skipped"]
