"""The warm suites of a verification server (`warm_suites`): a run's client hands the
server its run folder and thresholds, the server runs the real suites (GX) in the
process it kept ready and answers their exit code; a request without the server's
token, or for a folder the server does not see, gets a clear error and runs nothing.
A run whose master serves no suites starts its own process."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.verification.server import TOKEN_ENV, client_token, suites_port
from replicator.verification.suites import SuitesAhead
from replicator.verification.warm_suites import (
    THRESHOLDS_FILE,
    SuitesService,
    WarmSuites,
    WarmSuitesClient,
    find_warm_suites,
    suites_for,
)

from helpers.data_docs import write_tables
from helpers.kafka import free_port_pair

TOKEN = "s3cret-token-of-the-server"
LENIENT = {"max_lag_records": 10**9, "max_lag_seconds": 10**9, "min_retention_margin_seconds": 0}


@pytest.fixture(scope="module")
def service() -> Iterator[int]:
    """A warm suites service with a token on a free port, for the module: its port."""
    port = free_port_pair()
    server = SuitesService(("127.0.0.1", port), TOKEN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def _run_folder(tmp_path: Path) -> Path:
    directory = tmp_path / "run=1"
    write_tables(directory, "orders")
    (directory / "plan.json").write_text("{}")
    return directory


def test_the_warm_suites_run_a_run_with_its_thresholds(service: int, tmp_path: Path) -> None:
    directory = _run_folder(tmp_path)
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(json.dumps(LENIENT))
    client = WarmSuitesClient("127.0.0.1", service, TOKEN, thresholds)
    summary = client.run(directory)
    assert summary["success"] is True  # the lag suite passes with these thresholds
    assert json.loads((directory / THRESHOLDS_FILE).read_text()) == LENIENT
    assert (directory / "suites.log").exists()
    assert (directory / "gx").is_dir()  # Data Docs beside the tables
    # The next run, with the package's thresholds: the lag suite fails on partition 1.
    again = WarmSuitesClient("127.0.0.1", service, TOKEN).run(directory)
    assert again["success"] is False
    assert again["suites"]["lag"]["success"] is False
    assert TOKEN not in repr(client)


def test_a_request_without_the_servers_token_runs_nothing(service: int, tmp_path: Path) -> None:
    directory = _run_folder(tmp_path)
    for token in (None, "wrong"):
        client = WarmSuitesClient("127.0.0.1", service, token)
        with pytest.raises(ReplicatorError, match="token does not match") as refused:
            client.run(directory)
        assert TOKEN not in str(refused.value)
    assert not (directory / "summary.json").exists()


def test_a_folder_the_server_does_not_see_is_named(service: int, tmp_path: Path) -> None:
    unseen = tmp_path / "run=2"  # a client's folder not shared with the server
    client = WarmSuitesClient("127.0.0.1", service, TOKEN)
    with pytest.raises(ReplicatorError, match=r"does not see .*run=2/plan.json.*same path"):
        client.run(unseen)
    with pytest.raises(ReplicatorError, match="not a verification run's folder"):
        client.run(tmp_path)


def test_a_run_finds_the_warm_suites_of_its_server_only(
    service: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    found = find_warm_suites(f"sc://127.0.0.1:{service - 1}")
    assert isinstance(found, WarmSuitesClient)
    assert found.where == f"warm, on 127.0.0.1:{service}"
    assert find_warm_suites("local[2]") is None
    free = free_port_pair()  # nothing listens on its next port
    assert find_warm_suites(f"sc://127.0.0.1:{free}") is None
    with suites_for(f"sc://127.0.0.1:{free}") as own:
        assert isinstance(own, SuitesAhead)  # no warm suites: the run's own process


def test_the_token_comes_from_the_url_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert client_token("sc://h:15002/;token=from-url") == "from-url"
    assert client_token("sc://h:15002/;user_id=a;token=t2") == "t2"
    assert client_token("sc://h:15002") == "from-env"
    monkeypatch.delenv(TOKEN_ENV)
    assert client_token("sc://h:15002") is None
    assert suites_port(15002) == 15003


def test_the_server_tops_up_its_ready_processes_once_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(WarmSuites, "QUIET_S", 0.5)
    warm = WarmSuites()
    try:
        assert warm.ready == WarmSuites.READY
        first = warm.take()
        assert warm.ready == 1
        warm.done()  # one is still ready: the next import waits for a quiet moment
        assert warm.ready == 1
        second = warm.take()  # a run right after: it finds one ready
        assert warm.ready == 0
        warm.done()  # none left: topped up at once
        assert warm.ready == WarmSuites.READY
        first.close()
        second.close()
        taken = warm.take()
        warm.done()
        time.sleep(2)  # quiet: topped up again
        assert warm.ready == WarmSuites.READY
        taken.close()
    finally:
        warm.close()
    assert warm.ready == 0
