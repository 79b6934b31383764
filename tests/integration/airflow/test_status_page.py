"""The DR status page (Airflow UI plugin) against the real clusters: a running flow's
per-partition lag and checkpoint age, an application's active cluster, a drill's
RPO/RTO with its report, the last verification with its Data Docs; only current
workers counted (and dead ones while wanted), each run's duration and downtime; an unreachable
cluster shown as unreachable within seconds; no path out of the Data Docs folder;
Airflow's plugin manager loading the page and its navigation entry.

The page module is imported only after the `airflow_home` fixture has set Airflow's
environment: it imports Airflow (through the hook), which reads its settings then.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient

from replicator.config import load_config
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.status import STATUS_TOPIC, StatusWriter, WorkerStatus
from replicator.operations import Bounds
from replicator.operations.dr_status import dr_status, flow_status
from replicator.operations.supervision import check
from replicator.procedures import live_workers
from replicator.procedures.drill import Drill
from replicator.statestore import StateStore

from helpers.kafka import create_topic, free_port_pair, unique_topic
from helpers.procedures import cluster_config, commit_offsets, runner
from helpers.replication import end_offsets, preload, wait_until, write_config

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0


@pytest.fixture
def page(airflow_home: Path) -> ModuleType:
    # Late import: Airflow reads its settings (and puts plugins/ on sys.path) at import.
    import replicator_airflow.status_page  # noqa: PLC0415

    return replicator_airflow.status_page


def _client(page: ModuleType, config: Path, state_url: str) -> TestClient:
    from replicator_airflow.hooks import ReplicatorSettings  # noqa: PLC0415 - see `page`

    return TestClient(page.create_app(lambda: ReplicatorSettings(str(config), state_url)))


def _verification_run(store: StateStore, tmp_path: Path, flow: str) -> tuple[str, Path]:
    """A finished verification run whose Data Docs site is a folder under tmp_path,
    with a file beside the results that must never be served."""
    run_id = store.runs.start("verification", flow, None, {"topics": None})
    results = tmp_path / "verification" / f"run={run_id}"
    site = results / "gx" / "uncommitted" / "data_docs" / "local_site"
    (site / "validations").mkdir(parents=True)
    (site / "index.html").write_text("<html><body>GX Data Docs index</body></html>")
    (site / "validations" / "parity.html").write_text("<html>parity suite</html>")
    (tmp_path / "verification" / "secret.txt").write_text("not for the browser")
    details = {
        "success": False,
        "suites": {"parity": {"success": True}, "lag": {"success": False}},
        "data_docs": str(site / "index.html"),
        "results": str(results),
    }
    store.runs.finish(run_id, "failed", 0, None, details)
    return run_id, site


def _cell(html: str, row: str, cls: str) -> list[str]:
    """The text of every `<td class="cls">` in table rows carrying the attribute `row`."""
    rows = re.findall(rf"<tr {row}[^>]*>(.*?)</tr>", html, flags=re.S)
    return [m for r in rows for m in re.findall(rf'<td class="{cls}">(.*?)</td>', r)]


def test_page_shows_lag_checkpoints_active_cluster_drill_and_verification(
    airflow_home: Path,
    page: ModuleType,
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
) -> None:
    topic = unique_topic("ui.orders")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=3)
    wanted = preload(primary, topic, 60, 3)
    config_path = write_config(
        tmp_path, primary, dr, topic, extra=("emit.checkpoints.interval.seconds = 1",)
    )
    config = load_config(config_path)
    flow = config.flow("primary->dr")
    group = f"ui-group-{uuid.uuid4().hex[:8]}"
    commit_offsets(cluster_config("primary", primary), group, {(topic, 0): 5, (topic, 1): 20})
    app = f"ui-app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    store.applications.switch(app, "dr")  # epoch 1, active on dr
    verification_id, _ = _verification_run(store, tmp_path, flow.name)
    client = _client(page, config_path, state_url)

    def flow_json() -> dict[str, Any]:
        response = client.get("/api/status")
        assert response.status_code == 200, response.text
        return response.json()["flows"][0]

    with runner([flow], store):
        wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow's worker running")
        wait_until(lambda: end_offsets(dr, remote, 3) == wanted, _TIMEOUT_S, "replicated")
        wait_until(
            lambda: (
                [(p["partition"], p["lag"]) for p in flow_json()["partitions"]]
                == [(0, 0), (1, 0), (2, 0)]
            ),
            _TIMEOUT_S,
            "every partition reported with lag 0 on the page",
        )
        wait_until(
            lambda: (flow_json()["checkpoint"] or {}).get("checkpoints") == 2,
            _TIMEOUT_S,
            "the group's two checkpoints on the page",
        )
        drill = Drill(config, flow.name, [group], store, timeout_s=_TIMEOUT_S).run()
        assert drill.ok, drill.error
        [stored_drill] = store.runs.recent("drill")
        drill_id = stored_drill.run_id
        # A supervisor run records its sample of the flow: the page's verdict and charts.
        supervised = check(config, store, None, Bounds())
        assert supervised.problems == [], [str(p) for p in supervised.problems]
        data = client.get("/api/status").json()
        html = client.get("/").text

    # JSON: the contract keys, then each panel.
    assert {"clusters", "flows", "applications", "verification", "history"} <= data.keys()
    assert [(c["alias"], c["reachable"]) for c in data["clusters"]] == [
        ("primary", True),
        ("dr", True),
    ]
    [flow_data] = data["flows"]
    assert (flow_data["name"], flow_data["desired_state"]) == ("primary->dr", "running")
    assert flow_data["live_workers"] >= 1 and flow_data["total_lag"] == 0
    assert not any(p["stale"] for p in flow_data["partitions"])
    checkpoint = flow_data["checkpoint"]
    assert checkpoint["topic"] == "primary.checkpoints.internal"
    assert checkpoint["groups"] == [group]
    assert 0 <= checkpoint["age_seconds"] < _TIMEOUT_S
    [application] = [a for a in data["applications"] if a["name"] == app]
    assert {k: application[k] for k in ("active_cluster", "fenced", "epoch")} == {
        "active_cluster": "dr",
        "fenced": False,
        "epoch": 1,
    }
    [drill_run] = data["history"]
    assert (drill_run["run_id"], drill_run["kind"], drill_run["outcome"]) == (
        drill_id,
        "drill",
        "succeeded",
    )
    assert drill_run["rpo_records"] == 0 and drill_run["rto_seconds"] == drill.rto_seconds
    verification = data["verification"]
    assert (verification["run_id"], verification["outcome"]) == (verification_id, "failed")
    assert verification["failed_suites"] == ["lag"]
    assert verification["data_docs_url"] == f"runs/{verification_id}/data-docs/index.html"

    # The verdict: healthy, judged with the supervisor's last run; its sample charted.
    [verdict] = data["verdicts"]
    assert (verdict["flow"], verdict["verdict"], verdict["problems"]) == (flow.name, "healthy", [])
    assert verdict["supervised_at"] is not None and verdict["notes"] == []
    assert 'data-verdict-flow="primary-&gt;dr" data-verdict="healthy"' in html
    lag_chart = re.search(r'<figure class="chart" data-chart="lag">(.*?)</figure>', html, re.S)
    assert lag_chart is not None and "1 sample)" in lag_chart.group(1)

    # HTML: the contract the browser test relies on.
    assert _cell(html, f'data-app="{app}"', "active-cluster") == ["dr"]
    assert _cell(html, 'data-flow="primary-&gt;dr"', "lag") == ["0", "0", "0"]
    assert _cell(html, f'data-run="{drill_id}"', "rpo") == ["0"]
    assert _cell(html, f'data-run="{drill_id}"', "rto") == [str(drill.rto_seconds)]
    assert f'href="runs/{drill_id}"' in html
    assert f'href="runs/{verification_id}/data-docs/index.html"' in html

    # The drill's report: its figures and the per-partition results of its check.
    report = client.get(f"/runs/{drill_id}")
    assert report.status_code == 200
    assert "non-disruptive" in report.text and "match" in report.text and topic in report.text
    assert client.get("/runs/no-such-run").status_code == 404
    # The verification's Data Docs, served through the page (links inside work too).
    docs = client.get(verification["data_docs_url"])
    assert docs.status_code == 200 and "GX Data Docs index" in docs.text
    suite = client.get(f"/runs/{verification_id}/data-docs/validations/parity.html")
    assert suite.status_code == 200 and "parity suite" in suite.text


def test_workers_are_the_current_ones_and_runs_show_duration_and_downtime(
    page: ModuleType, tmp_path: Path, primary: str, dr: str, state_url: str, store: StateStore
) -> None:
    topic = unique_topic("ui.workers")
    config_path = write_config(tmp_path, primary, dr, topic)
    flow = load_config(config_path).flow("primary->dr")
    ensure_compacted_topic(flow.target, STATUS_TOPIC, 1, "status.topic.replication.factor")
    now_ms, minute_ms = int(time.time() * 1000), 60_000

    def publish(name: str, state: str, started_min_ago: int, silent_min_ago: int) -> None:
        writer = Producer({"bootstrap.servers": dr})
        StatusWriter(writer).publish(
            WorkerStatus(
                flow.name,
                f"{topic}-{name}",
                state,
                topics=[topic],
                started_ms=now_ms - started_min_ago * minute_ms,
                updated_ms=now_ms - silent_min_ago * minute_ms,
            )
        )
        assert writer.flush(30) == 0

    def shown(desired: str) -> list[tuple[str, bool]]:
        workers = flow_status(flow, desired, target_reachable=True).workers
        return [(w.worker.removeprefix(f"{topic}-"), w.live) for w in workers]

    def workers_cell() -> str:
        html = _client(page, config_path, state_url).get("/").text
        row = re.search(r'<tr data-flow-summary="primary-&gt;dr">(.*?)</tr>', html, flags=re.S)
        assert row is not None, html
        cell = re.search(r'<td class="workers[^"]*"[^>]*>(.*?)</td>', row.group(1))
        assert cell is not None, row.group(1)
        return cell.group(1)

    # Killed with kill -9 (its record still says running), then a worker stopped with
    # its flow, then the one running now: each restart left a record behind.
    publish("killed", "running", started_min_ago=30, silent_min_ago=20)
    publish("stopped", "stopped", started_min_ago=15, silent_min_ago=10)
    publish("current", "running", started_min_ago=5, silent_min_ago=0)
    assert shown("running") == [("current", True)]
    assert workers_cell() == "1 live"
    # The current one dies and nothing replaces it: shown dead while the flow is wanted.
    publish("current", "running", started_min_ago=5, silent_min_ago=1)
    assert shown("running") == [("current", False)]
    assert workers_cell() == "0 live, 1 dead"
    store.flows.set(flow.name, "stopped")  # a failover stopped the flow
    assert shown("stopped") == []
    assert workers_cell() == "0 live"

    # Each run of the history with the procedure's duration and the applications' downtime.
    run_id = store.runs.start("failover", flow.name, "planned", {"applications": ["ui-app"]})
    details = {"duration_seconds": 12.25, "downtime_seconds": 2.5}
    store.runs.finish(run_id, "succeeded", 0, 3.75, details)
    client = _client(page, config_path, state_url)
    html = client.get("/").text
    assert _cell(html, f'data-run="{run_id}"', "duration") == ["12.25"]
    assert _cell(html, f'data-run="{run_id}"', "downtime") == ["2.5"]
    [run] = client.get("/api/status").json()["history"]
    assert (run["duration_seconds"], run["downtime_seconds"]) == (12.25, 2.5)
    report = client.get(f"/runs/{run_id}").text
    assert "<th>duration (s)</th><td>12.25</td>" in report
    assert "<th>downtime (s)</th><td>2.5</td>" in report


def test_an_unreachable_cluster_is_shown_as_unreachable_within_seconds(
    page: ModuleType, tmp_path: Path, state_url: str, store: StateStore
) -> None:
    # Nothing listens on these ports: both clusters are down.
    dead = (f"127.0.0.1:{free_port_pair()}", f"127.0.0.1:{free_port_pair()}")
    config_path = write_config(tmp_path, *dead, "orders")
    began = time.monotonic()
    status = dr_status(load_config(config_path), store, probe_timeout_s=2.0)
    assert time.monotonic() - began < 10
    assert [(c.alias, c.reachable) for c in status.clusters] == [
        ("primary", False),
        ("dr", False),
    ]
    assert all(c.error for c in status.clusters)
    [flow] = status.flows
    assert flow.error == "target cluster 'dr' is unreachable" and flow.partitions == []

    began = time.monotonic()
    html = _client(page, config_path, state_url).get("/").text
    assert time.monotonic() - began < 15
    assert html.count('class="reachable bad">unreachable: ') == 2


def test_data_docs_route_serves_only_files_of_the_runs_site(
    page: ModuleType, tmp_path: Path, state_url: str, store: StateStore
) -> None:
    config_path = write_config(tmp_path, "127.0.0.1:1", "127.0.0.1:2", "orders")
    run_id, site = _verification_run(store, tmp_path, "primary->dr")
    (site / "link.txt").symlink_to(tmp_path / "verification" / "secret.txt")
    client = _client(page, config_path, state_url)
    base = f"/runs/{run_id}/data-docs"
    assert client.get(f"{base}/index.html").status_code == 200
    for escape in (
        "..%2F..%2F..%2F..%2F..%2Fsecret.txt",
        "%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
        f"{'..%2F' * 12}etc%2Fpasswd",
        "%2Fetc%2Fpasswd",
        "link.txt",
        "validations",
    ):
        response = client.get(f"{base}/{escape}")
        assert response.status_code == 404, escape
        assert "not for the browser" not in response.text
    with pytest.raises(page.HTTPException):
        page.docs_file(store.runs.get(run_id), "../../../../../secret.txt")
    # A run without Data Docs has none to serve.
    other = store.runs.start("drill", "primary->dr", "non-disruptive", {})
    assert client.get(f"/runs/{other}/data-docs/index.html").status_code == 404


def test_airflow_loads_the_plugin_with_its_app_and_navigation_entry(airflow_home: Path) -> None:
    from airflow import plugins_manager  # noqa: PLC0415 - after `airflow_home`

    assert not {
        path: error
        for path, error in plugins_manager.get_import_errors().items()
        if "replicator_airflow" in path
    }
    [info] = [p for p in plugins_manager.get_plugin_info() if p["name"] == "replicator_dr"]
    assert [(a["url_prefix"], a["name"]) for a in info["fastapi_apps"]] == [
        ("/dr-status", "DR status")
    ]
    [view] = info["external_views"]
    assert (view["href"], view["destination"], view["name"]) == ("/dr-status/", "nav", "DR status")
    apps, _ = plugins_manager.get_fastapi_plugins()
    [mounted] = [a for a in apps if a["url_prefix"] == "/dr-status"]
    assert {route.path for route in mounted["app"].routes} >= {
        "/",
        "/api/status",
        "/runs/{run_id}",
        "/runs/{run_id}/data-docs/{path:path}",
    }
