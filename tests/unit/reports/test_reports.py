"""Reports for auditors (issue 16 item 3), Kafka-free: runs recorded through the real
procedure machinery (`replicator.procedures.steps.Procedure`: its history run, step
records, step starts, leases, downtime) by procedures whose steps touch no cluster;
the approval recorded as the Airflow approval task records it; a verification
recorded after the run. The report names who started and who approved, each step
with start, end and outcome, RPO, RTO, procedure time and downtime, the drill's
per-partition checks and the verification that followed; it loads nothing from
anywhere; `replicator report` writes it; the DR status page serves it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from replicator.cli import main
from replicator.errors import ReplicatorError
from replicator.procedures.steps import (
    started_entry,
)
from replicator.reports import build_report, render
from replicator.statestore import NotFoundError, StateStore

from helpers.reports import FLOW, Recorded, recorded_failover

_CHECKS = [
    {
        "group": "orders",
        "shadow_group": "drill-orders",
        "topic": "orders",
        "partition": p,
        "remote_topic": "primary.orders",
        "source_offset": 100 + p,
        "target_offset": 100 + p,
        "status": "match" if p else "at_end",
        "detail": f"same record at offset {100 + p}",
    }
    for p in range(3)
]


def _verification(store: StateStore) -> str:
    run_id = store.runs.start("verification", FLOW, None, {"topics": ["orders"]})
    suites = {
        "parity": {"success": True, "rows": 3, "failed": []},
        "lag": {
            "success": False,
            "rows": 3,
            "failed": [{"expectation": "expect_column_values_to_be_between", "column": "lag_s"}],
        },
    }
    store.runs.finish(run_id, "failed", 0, None, {"success": False, "suites": suites})
    return run_id


def _cells(html: str, item: str) -> str:
    [found] = re.findall(rf'data-item="{item}"[^>]*>(.*?)</(?:td|p|code|table)>', html, re.S)
    return _text(found)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def test_failover_report_names_people_steps_figures_and_the_verification_after(
    store: StateStore,
) -> None:
    procedure_id = recorded_failover(store)
    verification = _verification(store)
    report = build_report(store, procedure_id)  # the procedure id finds its run too
    run = store.runs.get(report.run.run_id)
    html = render(report)

    assert _cells(html, "started-by") == "alice (Airflow user)"
    assert _cells(html, "approval").startswith("approved by bob,")
    assert _cells(html, "rpo") == "0 records"
    assert _cells(html, "rto") == f"{run.rto_seconds:g} s"
    assert _cells(html, "duration") == f"{run.duration_seconds:g} s"
    assert run.downtime_seconds is not None
    assert _cells(html, "downtime") == f"{run.downtime_seconds:g} s"
    # Each step in the order it ran, with its start, end and outcome, as saved.
    saved = {s.name: s for s in store.runs.steps(procedure_id)}
    steps = re.findall(r'<tr data-step="([^"]+)">(.*?)</tr>', html, re.S)
    assert [name for name, _ in steps] == ["preflight", "fence", "drain", "switch", "verify"]
    for name, row in steps:
        started = saved[started_entry(name)].first_saved_at
        ended = saved[name].updated_at
        assert started <= ended
        assert f"{started:%Y-%m-%d %H:%M:%S}" in row and f"{ended:%Y-%m-%d %H:%M:%S}" in row
        assert 'class="step-outcome ok">done<' in row
    # The downtime is the fence's start to the switch's end, as the run recorded it.
    fence_start = saved[started_entry("fence")].first_saved_at
    assert run.downtime_seconds == round(
        (saved["switch"].updated_at - fence_start).total_seconds(), 3
    )
    assert _cells(html, "verdict") == "failed"
    assert verification in html and 'data-suite="lag"' in html
    assert "expect_column_values_to_be_between on lag_s" in html
    # Self-contained: nothing to fetch, no script.
    assert not re.search(r"<(script|link|img|iframe)\b|\burl\(|https?://", html)


def test_drill_report_lists_each_partition_check_and_a_failed_step(store: StateStore) -> None:
    drill = Recorded(
        store,
        "drill",
        {
            "preflight": {"groups": ["orders"]},
            "commit_shadow": {"committed": 3},
            "check": {"partitions": _CHECKS, "counts": {"match": 2, "at_end": 1}, "failing": 0},
            "cleanup": None,  # fails
        },
    )
    drill.started_by = "carol@host (replicator CLI)"
    outcome = drill.run("drill-audit")
    assert outcome.outcome == "failed"
    html = render(build_report(store, outcome.procedure_id))

    rows = re.findall(r'<tr data-check="([^"]+)">', html)
    assert rows == ["orders/0/orders", "orders/1/orders", "orders/2/orders"]
    assert "3 positions checked record by record: 1 at_end, 2 match." in _text(html)
    assert _cells(html, "started-by") == "carol@host (replicator CLI)"
    assert _cells(html, "approval").startswith("none asked")
    [cleanup] = re.findall(r'<tr data-step="cleanup">(.*?)</tr>', html, re.S)
    assert 'class="step-outcome bad">failed<' in cleanup and "could not reach cluster dr" in cleanup
    assert re.search(r"Why it ended so</th><td[^>]*>[^<]*could not reach cluster dr", html)
    assert _cells(html, "verification").startswith("None yet")


def test_cli_writes_the_report(store: StateStore, state_url: str, tmp_path: Path) -> None:
    procedure_id = recorded_failover(store)
    run_id = store.runs.recent("failover")[0].run_id
    out = tmp_path / "reports" / "failover.html"
    assert main(["report", run_id, "--out", str(out), "--state-url", state_url]) == 0
    written = out.read_text()
    assert run_id in written and procedure_id in written
    assert _cells(written, "approval").startswith("approved by bob,")
    assert len(re.findall(r'<tr data-step="', written)) == 5
    # A verification has no report, an unknown id says where to look.
    verification = _verification(store)
    with pytest.raises(ReplicatorError, match="is a verification"):
        build_report(store, verification)
    with pytest.raises(NotFoundError, match="replicator history"):
        build_report(store, "no-such-run")
    assert main(["report", "no-such-run", "--out", str(out), "--state-url", state_url]) == 1


def test_status_page_serves_the_report(
    airflow_home: Path, store: StateStore, state_url: str, tmp_path: Path
) -> None:
    # Late imports: Airflow reads its settings (and puts plugins/ on sys.path) at import.
    from replicator_airflow.hooks import ReplicatorSettings  # noqa: PLC0415
    from replicator_airflow.status_page import create_app  # noqa: PLC0415

    recorded_failover(store)
    run_id = store.runs.recent("failover")[0].run_id
    client = TestClient(create_app(lambda: ReplicatorSettings(str(tmp_path / "none"), state_url)))
    served = client.get(f"/runs/{run_id}/report.html")
    assert served.status_code == 200, served.text
    assert f'filename="failover-{run_id}.html"' in served.headers["content-disposition"]
    assert "approved by bob" in _text(served.text)
    assert client.get(f"/runs/{_verification(store)}/report.html").status_code == 404
    assert client.get("/runs/no-such-run/report.html").status_code == 404


def test_drill_report_names_the_groups_found_and_orders_its_checks(store: StateStore) -> None:
    # As dr_drill records a drill started with no group named (seen on `make run`): the
    # preflight finds the flow's groups, the checks arrive in the order they finished,
    # and translate/check report every position as a list of records.
    unordered = [_CHECKS[2], _CHECKS[0], _CHECKS[1]]
    drill = Recorded(
        store,
        "drill",
        {
            "preflight": {"groups": ["orders"], "workers": ["vm-1"]},
            "translate": {"rpo_records": 0, "partitions": unordered},
            "check": {"partitions": unordered, "counts": {"match": 2, "at_end": 1}},
        },
    )
    drill.applications = []
    html = render(build_report(store, drill.run("drill-found").procedure_id))

    assert re.search(r"<th>Consumer groups</th>\s*<td[^>]*>orders<", html)
    rows = re.findall(r'<tr data-check="([^"]+)">', html)
    assert rows == ["orders/0/orders", "orders/1/orders", "orders/2/orders"]
    # The step column counts the positions (the checks table lists them), not a dump.
    [translate] = re.findall(r'<tr data-step="translate">(.*?)</tr>', html, re.S)
    assert "rpo_records: 0; partitions: 3 entries" in _text(translate)
    [preflight] = re.findall(r'<tr data-step="preflight">(.*?)</tr>', html, re.S)
    assert "groups: [orders]; workers: [vm-1]" in _text(preflight)
