"""The fence fails closed: demo clients cut off from the state store but not from
Kafka stop within their route lease, and the failover's fence step waits that
lease out for them instead of taking their silence for obedience. Real demo
processes, real clusters, the SQLite state store; the clients' store calls fail
while a file exists (tests/helpers/store_cut_client.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from replicator.procedures import applications
from replicator.statestore import ROUTE_LEASE_S, StateStore

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.procedures import committed_offsets, ids_on
from helpers.replication import wait_until, write_config

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0
_PARTITIONS = 3
_CUT_CLIENT = Path(__file__).resolve().parents[2] / "helpers" / "store_cut_client.py"


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts; any still running at the end is killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def test_clients_cut_off_from_the_store_stop_within_their_lease_and_the_fence_waits(
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    topic = unique_topic("fence.lease")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=_PARTITIONS)
    config = write_config(tmp_path, primary, dr, topic)
    app = f"orders-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    cut = tmp_path / "store-cut-off"
    produced, consumed = tmp_path / "produced.jsonl", tmp_path / "consumed.jsonl"
    common = ["--config", str(config), "--app", app, "--topic", topic, "--state-url", state_url]
    for role, ledger, extra in (
        ("producer", produced, ["--rate", "50"]),
        ("consumer", consumed, []),
    ):
        command = [sys.executable, str(_CUT_CLIENT), str(cut), role, *common]
        command += ["--ledger", str(ledger), "--client-id", f"{role}-1", *extra]
        with (tmp_path / f"{role}.log").open("ab") as log:
            processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
    producer, _ = processes
    wait_until(lambda: len(ids_on(consumed, "primary")) >= 50, _TIMEOUT_S, "50 processed")

    # Both clients lose the state store; Kafka stays reachable. A failover fences them.
    cut.touch()
    report = applications.fence(store.applications, [app], timeout_s=_TIMEOUT_S)
    fenced_at = datetime.now(UTC)
    offsets_at_fence = committed_offsets("primary", primary, app)
    last_seen = max(client.last_seen for client in store.applications.clients(app))

    # The store comes back: the clients see the fence and acknowledge it.
    cut.unlink()
    epoch = report["fenced"][app]["epoch"]
    wait_until(
        lambda: (
            {(c.state, c.epoch) for c in store.applications.clients(app)} == {("fenced", epoch)}
        ),
        _TIMEOUT_S,
        "both clients acknowledging the fence once the store answers",
    )

    records = [
        record for p in range(_PARTITIONS) for _, record in read_partition(primary, topic, p)
    ]
    last_written = datetime.fromtimestamp(max(r.timestamp for r in records) / 1000, UTC)
    assert last_written < fenced_at, "a client cut off from the store wrote past the fence"
    assert last_written <= last_seen + timedelta(seconds=ROUTE_LEASE_S), (
        "the producer wrote longer than its route lease after it last confirmed its route"
    )
    assert committed_offsets("primary", primary, app) == offsets_at_fence, (
        "the consumer committed on primary after the fence"
    )
    assert sorted(report["fenced"][app]["silent"]) == ["consumer-1", "producer-1"]
    assert fenced_at >= last_seen + timedelta(seconds=ROUTE_LEASE_S), (
        "the fence did not wait out the route lease of the silent clients"
    )
    # Every record on primary was acknowledged, and so is in the producer's ledger.
    assert len(records) == len(ids_on(produced, "primary"))
    assert "not confirmed for" in (tmp_path / "producer.log").read_text()

    # The failover moves the application; the clients follow once the fence is lifted.
    store.applications.switch(app, "dr")
    wait_until(lambda: len(ids_on(consumed, "dr")) >= 20, _TIMEOUT_S, "20 processed on dr")
    for process in processes:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, f"{process.args} did not stop cleanly"
    assert producer.returncode == 0
