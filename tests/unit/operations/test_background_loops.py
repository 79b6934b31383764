"""A state store that fails in a way other than "unreachable" (a damaged SQLite file,
a refused user) is the store's error, and never ends a background thread of
`replicator run`: the failure is logged once, counted, retried with backoff, and its
end logged once (issue 26, point 7). Real SQLite stores, real threads; no Kafka."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from replicator import flow_timer
from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.flow_timer import FlowTimer
from replicator.operations import runner
from replicator.operations.runner import DesiredStates
from replicator.operations.sync_round import sync_round
from replicator.statestore import StateStore, StateStoreError, StoreUnavailable
from replicator.statestore.flow_states import STOPPED

from helpers.replication import wait_until

FLOW = "primary->dr"


def _damaged_store(tmp_path: Path) -> tuple[StateStore, Path, bytes]:
    """A store whose file was written, then damaged (its header overwritten), with
    the good bytes to repair it."""
    path = tmp_path / "state.db"
    store = StateStore(f"sqlite:///{path}")
    store.flows.set(FLOW, "running")
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    good = path.read_bytes()
    path.write_bytes(b"this is no SQLite file at all " * 4 + good[120:])
    return store, path, good


def _restore(path: Path, good: bytes) -> None:
    """Put the good file back as an operator restores a backup: whole, in one rename. A
    write in place races the loop's next round, which may open the half-written file
    and switch it to WAL, damaging it again (seen on a loaded machine)."""
    restored = path.with_suffix(".restored")
    restored.write_bytes(good)
    restored.replace(path)


def _errors(thread: str) -> float:
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "replicator_background_errors":
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels["thread"] == thread:
                    total += sample.value
    return total


def test_a_damaged_sqlite_file_is_a_store_error_naming_the_store(tmp_path: Path) -> None:
    store, path, _ = _damaged_store(tmp_path)
    with pytest.raises(StateStoreError) as raised:
        store.flows.get(FLOW)
    message = str(raised.value)
    assert str(path) in message and "DatabaseError" in message
    assert "file is not a database" in message and "backup" in message


def test_the_password_never_appears_in_a_store_error() -> None:
    store = StateStore("postgresql+psycopg://replicator:s3cr3t-pw@127.0.0.1:1/state")
    with pytest.raises(StoreUnavailable) as raised:
        store.flows.get(FLOW)
    assert "s3cr3t-pw" not in str(raised.value)
    assert "replicator:***@127.0.0.1:1/state" in str(raised.value)


class _StoreReader(FlowTimer[SimpleNamespace]):
    """A timer loop whose round reads the store, as the loops of `replicator run` do."""

    thread_name = "store-reader"

    def __init__(self, store: StateStore, stop: threading.Event) -> None:
        super().__init__([SimpleNamespace(name=FLOW)], stop, lambda: {FLOW: True})
        self.store = store
        self.rounds = 0

    def enabled(self, flow: SimpleNamespace) -> bool:
        return True

    def interval(self, flow: SimpleNamespace) -> float:
        return 0.0

    def round(self, flow: SimpleNamespace) -> None:
        self.store.flows.get(flow.name)
        self.rounds += 1


def test_a_database_error_does_not_end_a_timer_loop_and_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(flow_timer, "_TICK_S", 0.05)
    monkeypatch.setattr(flow_timer, "FIRST_ROUND_S", 0.0)
    monkeypatch.setattr(flow_timer, "RETRY_FIRST_S", 0.05, raising=False)
    monkeypatch.setattr(flow_timer, "RETRY_MAX_S", 0.2, raising=False)
    monkeypatch.setattr(_StoreReader, "tick_s", 0.05, raising=False)
    store, path, good = _damaged_store(tmp_path)
    stop = threading.Event()
    loop = _StoreReader(store, stop)
    errors_before = _errors("store-reader")
    with caplog.at_level(logging.INFO, logger=flow_timer.__name__):
        loop.start()
        wait_until(lambda: _errors("store-reader") >= errors_before + 5, 20, "5 failed rounds")
        assert loop.alive(), "the DatabaseError ended the thread"
        health = loop.health()
        assert health.state == "failing" and "file is not a database" in (health.error or "")
        store.close()
        _restore(path, good)
        wait_until(lambda: loop.rounds >= 3, 20, "rounds after the repair")
        stop.set()
        loop.join(5)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    recoveries = [r for r in caplog.records if "works again" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "file is not a database" in warnings[0].getMessage()
    assert str(path) in warnings[0].getMessage()
    assert len(recoveries) == 1
    assert loop.health().state == "stopped" and loop.health().error is None


def test_flow_states_stay_as_they_were_while_the_store_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The supervising loop and the timers read the last desired states; a store that
    fails in between changes nothing, and a stop written once it is back is followed."""
    monkeypatch.setattr(flow_timer, "RETRY_FIRST_S", 0.05, raising=False)
    monkeypatch.setattr(flow_timer, "RETRY_MAX_S", 0.2, raising=False)
    monkeypatch.setattr(runner, "_DESIRED_EVERY_S", 0.05)
    store, path, good = _damaged_store(tmp_path)
    stop = threading.Event()
    desired = DesiredStates(store, [FLOW], stop)
    with caplog.at_level(logging.INFO):
        desired.start()
        time.sleep(1.0)
        assert desired.alive() and desired.running() == {FLOW: True}
        assert desired.health().state == "failing"
        store.close()
        _restore(path, good)
        StateStore(f"sqlite:///{path}").flows.set(FLOW, STOPPED)
        wait_until(lambda: desired.running() == {FLOW: False}, 20, "the stop read")
        stop.set()
        desired.join(5)
    lines = [r.getMessage() for r in caplog.records if r.name == flow_timer.__name__]
    assert (
        len(
            [
                line
                for line in lines
                if "flow-states: reading the flows' desired states failed" in line
            ]
        )
        == 1
    )
    assert len([line for line in lines if "works again" in line]) == 1


def test_a_sync_round_on_a_failing_store_says_so_and_runs_nothing(tmp_path: Path) -> None:
    store, path, _ = _damaged_store(tmp_path)
    config = load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": "127.0.0.1:1",
            "dr.bootstrap.servers": "127.0.0.1:2",
            "primary->dr.enabled": "true",
        }
    )
    with pytest.raises(ReplicatorError) as raised:
        sync_round(config, store.flows)
    message = str(raised.value)
    assert message.startswith("sync round not run: the DR state store cannot say whether flow")
    assert str(path) in message and "file is not a database" in message


class _Fatal(BaseException):
    """Not an Exception: nothing in a loop catches it, so its thread ends."""


class _Dying(flow_timer.BackgroundLoop):
    thread_name = "dying"
    tick_s = 0.01

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(stop)
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks == 1:
            raise _Fatal("gone")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_died_anyway_is_shown_dead_then_started_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = threading.Event()
    loop = _Dying(stop)
    with caplog.at_level(logging.INFO, logger=flow_timer.__name__):
        loop.start()
        wait_until(lambda: not loop.alive(), 5, "the thread's end")
        assert loop.health().state == "dead"
        errors = _errors("dying")
        assert loop.revive() and loop.alive()
        wait_until(lambda: loop.ticks >= 3, 5, "ticks after the restart")
        assert loop.health().state == "ok" and loop.health().restarts == 1
        assert _errors("dying") == errors + 1
        assert not loop.revive(), "a live thread is not started again"
        stop.set()
        loop.join(5)
    assert "background thread dying ended (see the error above); starting it again" in caplog.text
    assert not loop.revive(), "a thread stopped with the run is not started again"


def test_a_flow_stopped_or_started_in_the_store_wakes_the_supervising_loop(
    tmp_path: Path,
) -> None:
    """A cutover waits for its flow to stop (its `flow_stopped` phase): the read that
    sees the stop says so (`changed`), so the supervising loop acts at once; a read
    that changes nothing does not."""
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    desired = DesiredStates(store, [FLOW])
    desired.tick()
    assert not desired.changed.is_set()
    store.flows.set(FLOW, STOPPED)
    desired.tick()
    assert desired.changed.is_set() and desired.running() == {FLOW: False}
    desired.changed.clear()
    desired.tick()
    assert not desired.changed.is_set()
    store.flows.set(FLOW, "running")
    desired.tick()
    assert desired.changed.is_set() and desired.running() == {FLOW: True}
    store.close()
