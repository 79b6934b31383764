"""The demo producer and consumer follow fences and failovers without losing or
duplicating a record: real processes, both real clusters, the SQLite state store.

There is no replication here, so what the consumer had not reached on a cluster
when it was fenced stays there; the test sends it back (consumer only, after
the producer stopped) to finish each cluster from its committed offsets, which
also proves that a consumer group resumes exactly where it was fenced.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path

import pytest

from replicator.statestore import StateStore, check_ledgers, read_ledger
from replicator.statestore.ledger import LedgerEntry

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import Start, demo_apps
from helpers.replication import wait_until, write_config

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Start]:
    """Start a demo app (`producer` or `consumer`) with its log in tmp_path."""
    with demo_apps(tmp_path) as start:
        yield start


def fence(store: StateStore, app: str, clients: set[str]) -> None:
    """Fence `app` once exactly `clients` report, and wait for all of them to acknowledge."""
    wait_until(
        lambda: {c.client_id for c in store.applications.clients(app, seen_within_s=10)} == clients,
        _TIMEOUT_S,
        f"clients {sorted(clients)} reporting",
    )
    epoch = store.applications.fence(app)
    acknowledged = store.applications.wait_fenced(app, epoch, timeout_s=_TIMEOUT_S)
    assert {c.client_id for c in acknowledged} == clients


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, f"{process.args} did not stop cleanly"


def ids_on(ledger: Path, cluster: str) -> set[str]:
    return {entry.id for entry in read_ledger(ledger) if entry.cluster == cluster}


def clusters_in_order(entries: list[LedgerEntry]) -> list[str]:
    """The clusters a ledger was written on, one item per uninterrupted stretch."""
    return [cluster for cluster, _ in groupby(entry.cluster for entry in entries)]


def test_demo_apps_follow_failover_without_loss_or_duplicates(
    tmp_path: Path, primary: str, dr: str, spawn: Start, state_url: str, store: StateStore
) -> None:
    topic = unique_topic("demo.orders")  # dots in the name test the subscription regex
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=3)
    config = write_config(tmp_path, primary, dr, topic)
    app = f"orders-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    produced, consumed = tmp_path / "produced.jsonl", tmp_path / "consumed.jsonl"
    common = ["--config", str(config), "--app", app, "--topic", topic, "--state-url", state_url]
    producer = spawn(
        "producer", *common, "--ledger", str(produced), "--rate", "50", "--client-id", "producer-1"
    )
    consumer = spawn("consumer", *common, "--ledger", str(consumed), "--client-id", "consumer-1")
    both = {"producer-1", "consumer-1"}

    wait_until(lambda: len(ids_on(consumed, "primary")) >= 100, _TIMEOUT_S, "100 on primary")
    fence(store, app, both)
    on_primary = ids_on(produced, "primary")

    store.applications.switch(app, "dr")
    wait_until(lambda: len(ids_on(consumed, "dr")) >= 100, _TIMEOUT_S, "100 processed on dr")
    fence(store, app, both)
    stop(producer)
    assert ids_on(produced, "primary") == on_primary, "the producer wrote to primary when fenced"

    # The consumer alone finishes each cluster from its committed offsets.
    for cluster in ("primary", "dr"):
        store.applications.switch(app, cluster)
        wait_until(
            lambda cluster=cluster: ids_on(consumed, cluster) >= ids_on(produced, cluster),
            _TIMEOUT_S,
            f"every record acknowledged on {cluster} processed",
        )
        fence(store, app, {"consumer-1"})
    stop(consumer)
    assert store.applications.clients(app) == [], "clients that stop cleanly remove themselves"

    check = check_ledgers([produced], [consumed])
    assert check.ok, check.summary()
    assert check.produced == check.consumed >= 200
    producer_entries, consumer_entries = read_ledger(produced), read_ledger(consumed)
    assert set(producer_entries) == set(consumer_entries), "each id read where it was acked"
    assert clusters_in_order(producer_entries) == ["primary", "dr"]
    # Back on primary, then dr, only for records the consumer had not reached when fenced.
    assert clusters_in_order(consumer_entries)[:2] == ["primary", "dr"]
