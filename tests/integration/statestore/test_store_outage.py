"""The DR state store on PostgreSQL goes away for 60 s under a running flow (issue 26,
point 7): replication goes on, checkpoints go on and are emitted after it, no
background thread is lost, the outage is said in exactly one warning and its end in
one line, and `replicator status`'s source (the thread status published on the
target) shows the flow-states thread failing meanwhile and well again after.

Real brokers, a real PostgreSQL server of this test's own (stopping the session's
would break the other tests), `run_flows` as `replicator run` runs it."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from replicator.offsets.checkpoints import read_checkpoints
from replicator.operations.thread_status import read_thread_status
from replicator.statestore import StateStore
from replicator_lab.postgres import LocalPostgres

from helpers.kafka import create_topic, free_port_pair, unique_topic
from helpers.procedures import commit_offsets, runner
from helpers.replication import end_offsets, flow_config, preload, wait_until
from helpers.session import TEST_DATA_DIR

pytestmark = pytest.mark.integration

OUTAGE_S = 60.0
THREADS = ("flow-states", "checkpoints", "thread-status")


@pytest.fixture
def own_postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server for this test alone: it is stopped and started again."""
    server = LocalPostgres(
        TEST_DATA_DIR.resolve() / f"postgres-outage-{uuid.uuid4().hex[:6]}",
        free_port_pair(),
        password="outage-pw-8d1f",
        durable=False,
    )
    try:
        server.up(timeout=120)
    except Exception as exc:
        tail = server.log_tail()
        server.down(wipe=True)
        pytest.fail(f"this test's PostgreSQL server did not start: {exc}\n{tail}")
    yield server
    server.down(wipe=True)


def _failed_reads() -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "replicator_background_errors"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["thread"] == "flow-states"
    )


def _alive_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.is_alive()}


def test_a_store_outage_of_60_s_stops_nothing_and_is_said_once(
    primary: str, dr: str, own_postgres: LocalPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    store = StateStore(own_postgres.create_database("state"))
    store.flows.set("primary->dr", "running")
    topic = unique_topic("store-outage")
    create_topic(primary, topic, partitions=1)
    preload(primary, topic, 200, 1)
    flow = flow_config(
        ("primary", primary), ("dr", dr), topic, {"emit.checkpoints.interval.seconds": "2"}
    )
    remote = f"primary.{topic}"
    group = f"app-{uuid.uuid4().hex[:8]}"

    def checkpoint() -> int | None:
        found = read_checkpoints(flow.target, "primary.checkpoints.internal")
        return next((c.downstream for (g, _t, _p), c in found.items() if g == group), None)

    def status() -> dict[str, str]:
        runners = read_thread_status(flow)
        return {t.thread: t.state for r in runners for t in r.threads} if runners else {}

    failed_before = _failed_reads()
    with caplog.at_level(logging.INFO), runner([flow], store):
        wait_until(lambda: end_offsets(dr, remote, 1) == [200], 60, "the first records copied")
        commit_offsets(flow.source, group, {(topic, 0): 150})
        wait_until(lambda: checkpoint() == 150, 60, "the first checkpoint")
        wait_until(lambda: status().get("flow-states") == "ok", 30, "the thread status")
        threads = _alive_threads()
        assert set(THREADS) <= threads, threads

        own_postgres.down()
        down_at = time.monotonic()
        preload(primary, topic, 200, 1)  # replication goes on without the store
        wait_until(lambda: end_offsets(dr, remote, 1) == [400], 30, "records copied meanwhile")
        commit_offsets(flow.source, group, {(topic, 0): 300})
        wait_until(lambda: checkpoint() == 300, 30, "a checkpoint meanwhile")
        wait_until(lambda: status().get("flow-states") == "failing", 30, "the outage shown")
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        assert set(THREADS) <= _alive_threads(), "a background thread was lost"
        assert _failed_reads() >= failed_before + 3, "failed reads are not counted"
        own_postgres.up(timeout=120)

        wait_until(lambda: "works again" in caplog.text, 30, "the store's return said")
        preload(primary, topic, 100, 1)
        wait_until(lambda: end_offsets(dr, remote, 1) == [500], 30, "records copied after")
        commit_offsets(flow.source, group, {(topic, 0): 450})
        wait_until(lambda: checkpoint() == 450, 30, "a checkpoint after")
        wait_until(lambda: status().get("flow-states") == "ok", 30, "the store shown back")
        assert set(THREADS) <= _alive_threads(), "a background thread was lost"
        assert all(state == "ok" for state in status().values()), status()

    said = [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and "state store" in r.getMessage()
    ]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert (
        said[0]
        .getMessage()
        .startswith("flow-states: reading the flows' desired states failed: state store ")
    )
    back = [r.getMessage() for r in caplog.records if "works again" in r.getMessage()]
    assert len(back) == 1 and back[0].startswith("flow-states: "), back
    assert "outage-pw-8d1f" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
    ]
