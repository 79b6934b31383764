"""End to end, as an operator sees it: what `make run` starts (`EmbeddedSystem`: the
replicator as a launched worker, the DR-aware demo application, Airflow standalone with
our DAGs and plugin in its own process, home and port) over the real test clusters;
headless Chromium signs in to the Airflow UI and reads the DR status page while the
`failover` and `failback` DAGs, triggered through the REST API, move the application to
`dr` and back. The ledgers then prove that no record was lost and none was processed
twice. The `replicator_supervisor` DAG runs on its schedule all along, as on `make run`:
no DAG run may fail, neither at start-up (a task started before the API server listened
failed its run) nor during and after the failover and failback (the reverse flow was
paged for checkpoints it had had no time to write). Screenshots of every stage go to
`.data/test-artifacts/browser/`.

Offline (issue 16): a verification run of the flow (the suites and Data Docs of
`replicator verify`, over tables shaped like the Spark job's; see
`helpers.data_docs`) runs while the failback does; its Data Docs, opened from the
page's link, render their validation results tables (filled by bootstrap-table,
served by the plugin), and the failover's report for auditors shows its figures
and the verification that followed; none of these pages made a request outside
the Airflow host."""

from __future__ import annotations

import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pytest

from replicator.config import load_config
from replicator.procedures import live_workers
from replicator.statestore import StateStore, read_ledger
from replicator_lab import LocalStack
from replicator_lab.airflow import AirflowStandalone
from replicator_lab.airflow_client import FINISHED, AirflowClient
from replicator_lab.system import APPROVAL_ENV, DEMO_APP_TOPIC, EmbeddedSystem, SystemOptions

from helpers.browser import (
    Screenshots,
    chromium,
    expect_active_cluster,
    history_figures,
    log_in,
    offline_pages,
    outside,
    show,
)
from helpers.data_docs import verification_with_data_docs
from helpers.kafka import free_port_pair
from helpers.procedures import wait_processed
from helpers.replication import wait_until, write_config

pytestmark = pytest.mark.integration

_TIMEOUT_S = 120.0
SUPERVISOR = "replicator_supervisor"


def _wait_first_records(system: EmbeddedSystem, consumed: Path) -> None:
    """The demo application's first records on the primary; when they do not come, the
    failure says what the system's parts said (a CI run once timed out here with
    nothing else to go on)."""
    try:
        wait_processed(consumed, "primary", 50, _TIMEOUT_S)
    except AssertionError as timeout:
        app = system.app
        logs = sorted(app.app.data_dir.glob("*.log")) if app is not None else []
        tails = "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs)
        raise AssertionError(f"{timeout}\nproblems: {system.problems()}\n{tails}") from None


def _run_dag(
    airflow: AirflowClient, dag_id: str, conf: dict[str, object], approve: bool = False
) -> str:
    """Trigger `dag_id` and wait for its run; fail with the failed tasks' logs.
    `approve`: the run asks (its `approval` task) and `admin` answers Approve through
    the REST API, as on the Required Actions page."""
    run_id = airflow.trigger(dag_id, conf)
    if approve:
        answer = airflow.answer(dag_id, run_id, "approval", "Approve", timeout=4 * _TIMEOUT_S)
        assert answer["responded_by"]["name"] == "admin", answer
    state = airflow.wait_for_run(dag_id, run_id, timeout=4 * _TIMEOUT_S)
    if state != "success":
        pytest.fail(airflow.failure_report(dag_id, run_id), pytrace=False)
    return run_id


def _wall_s(airflow: AirflowClient, dag_id: str, run_id: str) -> float:
    """A finished run's wall time, from its start to its end."""
    run = airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
    start, end = (datetime.fromisoformat(run[k]) for k in ("start_date", "end_date"))
    return (end - start).total_seconds()


def _no_run_failed(airflow: AirflowStandalone, api: AirflowClient) -> None:
    """No DAG run failed, and none was queued before every Airflow component was
    healthy (a task started earlier cannot reach the API server)."""
    failed = api.dag_runs(state="failed")
    if failed:
        reports = [api.failure_report(r["dag_id"], r["dag_run_id"]) for r in failed]
        pytest.fail("\n\n".join(reports), pytrace=False)
    assert airflow.healthy_at is not None
    early = [
        f"{r['dag_id']}/{r['dag_run_id']} queued at {r['queued_at']}"
        for r in api.dag_runs()
        if r["queued_at"] and datetime.fromisoformat(r["queued_at"]) < airflow.healthy_at
    ]
    assert not early, f"runs queued before Airflow was healthy at {airflow.healthy_at}: {early}"


@pytest.mark.timeout(1200)  # Airflow's start and two procedures of about a minute each
def test_failover_and_failback_dags_seen_on_the_dr_status_page(
    tmp_path: Path,
    kafka_stack: LocalStack,
    state_url: str,
    store: StateStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `make run`'s own approval policy (LOCAL_APPROVAL_POLICY, not one from the caller's
    # environment): the admin approves the failover, as from the UI's form; the failback
    # goes without asking, as a script's run with skip_approval may.
    monkeypatch.delenv(APPROVAL_ENV, raising=False)
    primary, dr = kafka_stack.bootstrap("primary"), kafka_stack.bootstrap("dr")
    # What `make run` starts, on the test clusters: the replicator as a launched worker,
    # the demo application on demo.orders, Airflow standalone with our DAGs and plugin.
    reverse = ("dr->primary.enabled = true", f"dr->primary.topics = {DEMO_APP_TOPIC}")
    config_path = write_config(tmp_path, primary, dr, DEMO_APP_TOPIC, extra=reverse)
    config = load_config(config_path)
    app = f"orders-{uuid.uuid4().hex[:8]}"
    options = SystemOptions(
        state_url=state_url,
        work_dir=tmp_path,
        replicate=config_path,
        demo_rate=None,  # the demo application's own traffic is enough
        demo_app=app,
        airflow_port=free_port_pair(),
        # Airflow's four processes start next to another test's work: on two busy
        # cores its API server has taken over 300 s.
        airflow_timeout_s=600,
        # The supervisor every minute, as on `make run`; the rest only when triggered
        # (no hourly Spark verification).
        airflow_scheduled=frozenset({"replicator_supervisor"}),
    )
    system = EmbeddedSystem(kafka_stack, options)
    shots = Screenshots()
    consumed = tmp_path / "demo" / f"{app}.consumed.jsonl"

    try:
        started = time.monotonic()
        system.start()
        with capsys.disabled():
            sys.stdout.write(f"\nthe system is up in {time.monotonic() - started:.0f}s\n")
        assert store.flows.get("dr->primary").state == "stopped"  # the failover starts it
        airflow = system.airflow
        assert airflow is not None
        _wait_first_records(system, consumed)
        wait_until(
            lambda: len(store.applications.clients(app, seen_within_s=5)) == 2,
            _TIMEOUT_S,
            "clients",
        )
        wait_until(lambda: live_workers(config.flow("primary->dr")), _TIMEOUT_S, "replicating")
        page = f"{airflow.url}/dr-status/"

        with chromium(tmp_path) as browser, airflow.client() as api:
            assert api.import_errors() == []
            # Start-up: the first scheduled supervisor run succeeds.
            wait_until(
                lambda: any(r["state"] in FINISHED for r in api.dag_runs(SUPERVISOR)),
                _TIMEOUT_S,
                "the first scheduled supervisor run",
            )
            _no_run_failed(airflow, api)
            log_in(browser, airflow.url, airflow.username, airflow.password)
            shots.take(browser, "airflow-home")
            expect_active_cluster(browser, page, app, "primary")
            shots.take(browser, "dr-status-primary")

            suites = ThreadPoolExecutor(max_workers=1)
            procedure_runs: dict[str, str] = {}
            for dag_id, params, now_active in (
                ("failover", {"mode": "planned", "reverse": True}, "dr"),
                ("failback", {"mode": "replicate", "skip_approval": True}, "primary"),
            ):
                conf = {"flow": "primary->dr", "applications": [app], "timeout_s": _TIMEOUT_S}
                asks = "skip_approval" not in params
                run_id = _run_dag(api, dag_id, {**conf, **params}, approve=asks)
                if dag_id == "failover":  # a verification of the flow runs during the failback
                    verifying = suites.submit(
                        verification_with_data_docs, store, tmp_path, "primary->dr", DEMO_APP_TOPIC
                    )
                # Right after the procedure, while the flow it started may have written
                # no checkpoint yet: the supervisor finds nothing wrong.
                _run_dag(api, SUPERVISOR, {})
                run_page = f"{airflow.url}/dags/{dag_id}/runs/{quote(run_id, safe='')}"
                show(browser, run_page, "report")
                shots.take(browser, f"{dag_id}-run")
                assert "RPO 0 records" in api.task_log(dag_id, run_id, "report", 1)
                expect_active_cluster(browser, page, app, now_active)
                [history] = [
                    r for r in store.runs.recent(dag_id) if app in r.params["applications"]
                ]
                procedure_runs[dag_id] = history.run_id
                duration = history.details["duration_seconds"]
                downtime = history.details["downtime_seconds"]
                assert duration is not None and downtime is not None, history.details
                assert history_figures(browser, history.run_id) == (
                    "0",
                    f"{history.rto_seconds}",
                    f"{duration}",
                    f"{downtime}",
                )
                shots.take(browser, f"dr-status-{now_active}-after-{dag_id}")
                with capsys.disabled():
                    sys.stdout.write(
                        f"{dag_id}: DAG run {_wall_s(api, dag_id, run_id):.1f}s, procedure "
                        f"{duration}s, downtime {downtime}s, RTO {history.rto_seconds}s\n"
                    )
                wait_processed(consumed, now_active, 50, _TIMEOUT_S)
            verification_id = verifying.result(timeout=4 * _TIMEOUT_S)
            suites.shutdown()
            offline = offline_pages(
                browser, page, verification_id, procedure_runs["failover"], shots
            )
            assert outside(offline.requests, airflow.url) == [], offline.requests
            assert any("/data-docs-assets/" in url for url in offline.requests), offline.requests
            assert offline.started_by == f"{airflow.username} (Airflow user)"
            _no_run_failed(airflow, api)
    finally:
        report = system.stop()  # the demo apps first drain, then stop and check their ledgers
        with capsys.disabled():
            shots.report()

    assert report.ledgers is not None
    assert report.ledgers.ok, report.ledgers.summary()
    assert report.ledgers.produced >= 150
    assert {e.cluster for e in read_ledger(consumed)} == {"primary", "dr"}
