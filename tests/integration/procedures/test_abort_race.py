"""An abort never races a running step, and a step keeps its leases while it runs.
Real clusters and real state stores, each test on SQLite and on PostgreSQL; the
orchestrator that runs the steps, the operator who aborts and the applications'
clients each use a store of their own, as separate processes would.

- A failover's fence waits on a client that does not acknowledge; an abort arriving
  meanwhile is refused, naming the step, and undoes nothing; once the fence has
  failed the abort goes through, its record is kept (the step's end, a second
  abort, a late `finish_run` never overwrite it) and the ended run never fences
  again.
- A step that runs longer than its lease keeps it (renewed while it runs): another
  operator's procedure is refused meanwhile.
- A step whose lease is taken from it stops waiting at once, and is not done.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.procedures import Failover, StepFailed
from replicator.procedures.abort import abort
from replicator.procedures.steps import ProcedureEnded, StepOutcome
from replicator.statestore import StateStore
from replicator.statestore.runs import RunEnded

from helpers.kafka import create_topic, unique_topic
from helpers.replication import wait_until

pytestmark = pytest.mark.integration

_FLOW = "primary->dr"


@pytest.fixture
def state_url(backend_state_url: str) -> str:
    """The state store of each test: a SQLite file, then a PostgreSQL database."""
    return backend_state_url


def _config(primary: str, dr: str) -> ReplicatorConfig:
    topic = unique_topic("abort.race")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=1)
    return load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": primary,
            "dr.bootstrap.servers": dr,
            "primary->dr.enabled": "true",
            "primary->dr.topics": topic,
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "status.topic.replication.factor": "1",
        }
    )


def _application(store: StateStore) -> str:
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    return app


@contextmanager
def _client(
    store: StateStore, state_url: str, app: str, ack_after_s: float | None
) -> Iterator[None]:
    """A client process of `app`: reports "running" every 0.3 s; once the application
    is fenced it acknowledges `ack_after_s` later (None: never, it ignores fences)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        own = StateStore(state_url)
        acknowledge_at: float | None = None
        try:
            while not stop.wait(0.3):
                state = own.applications.get(app)
                if state.fenced and ack_after_s is not None and acknowledge_at is None:
                    acknowledge_at = time.monotonic() + ack_after_s
                acknowledged = acknowledge_at is not None and time.monotonic() >= acknowledge_at
                if acknowledged:
                    own.applications.report_client(
                        app, "client-1", "producer", "primary", state.epoch, "fenced"
                    )
                else:
                    own.applications.report_client(
                        app, "client-1", "producer", "primary", 0, "running"
                    )
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    thread = threading.Thread(target=run, name=f"client of {app}", daemon=True)
    thread.start()
    wait_until(lambda: errors or store.applications.clients(app), 60, "the client reporting")
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
        assert not errors, errors


class _Orchestrator:
    """Runs one step of a procedure in a thread (a DAG task in its own process)."""

    def __init__(self, step: Callable[[], StepOutcome]) -> None:
        self.outcome: StepOutcome | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(step,), daemon=True)
        self._thread.start()

    def _run(self, step: Callable[[], StepOutcome]) -> None:
        started = time.monotonic()
        try:
            self.outcome = step()
        except BaseException as exc:
            self.error = exc
        self.seconds = time.monotonic() - started

    def join(self) -> None:
        self._thread.join(timeout=180)
        assert not self._thread.is_alive(), "the step did not end within 180 s"


def test_abort_while_the_fence_waits_on_a_client_is_refused_and_the_ended_run_stays_ended(
    primary: str, dr: str, store: StateStore, state_url: str
) -> None:
    config = _config(primary, dr)
    app = _application(store)
    orchestrator_store = StateStore(state_url)
    failover = Failover(config, _FLOW, [app], orchestrator_store, timeout_s=6)
    try:
        assert failover.run_step("fo-race", "preflight").status == "done"
        with _client(store, state_url, app, ack_after_s=None):
            fence = _Orchestrator(lambda: failover.run_step("fo-race", "fence"))
            wait_until(lambda: store.applications.get(app).fenced, 60, "the fence to start")
            time.sleep(1.5)  # the fence waits on the client; an operator gives up

            with pytest.raises(ReplicatorError) as refused:
                abort(store, "fo-race", reason="gave up")
            message = str(refused.value)
            assert message.startswith("cannot abort fo-race now: fo-race step fence (")
            assert "is running (it holds 'run fo-race' until" in message
            assert "Wait for the step to end" in message
            application = store.applications.get(app)
            assert (application.fenced, application.epoch) == (True, 1), "the abort undid"
            [run] = store.runs.recent("failover")
            assert run.outcome is None, "the refused abort ended the run"

            fence.join()
        assert isinstance(fence.error, StepFailed), fence.error
        assert "did not acknowledge the fence at epoch 1 within 6s" in str(fence.error)
        [run] = store.runs.recent("failover")
        assert (run.outcome, run.details["failed_step"]) == ("failed", "fence")

        # Now no step runs: the abort undoes the fence and records it.
        report = abort(store, "fo-race", reason="gave up")
        assert (report.outcome, report.unfenced) == ("aborted", {app: 2})
        [aborted] = store.runs.recent("failover")
        assert (aborted.outcome, aborted.details["undone"]["unfenced"]) == ("aborted", {app: 2})

        # The ended run's fence never runs again, and its record is never overwritten.
        with pytest.raises(ProcedureEnded, match="fo-race was aborted, so its step 'fence'"):
            failover.run_step("fo-race", "fence")
        with pytest.raises(RunEnded, match=r"ended aborted at .* not overwritten with 'failed'"):
            store.runs.finish(aborted.run_id, "failed", None, None, {"error": "late"})
        again = abort(store, "fo-race", reason="again")
        assert (again.outcome, again.unfenced) == ("aborted", {})
        assert store.runs.recent("failover") == [aborted], "the history of the aborted run changed"
        application = store.applications.get(app)
        assert (application.fenced, application.epoch) == (False, 2), "fenced again"
        assert store.leases.all() == [], "the aborted run, or its abort, keeps a lease"
    finally:
        orchestrator_store.close()


def test_a_step_that_runs_longer_than_its_lease_keeps_it(
    primary: str, dr: str, store: StateStore, state_url: str
) -> None:
    """The fence of two applications waits 5 s for the first one's client and 4.5 s
    more for the second's, each within the 7.5 s timeout: 9.5 s, longer than the 8 s
    lease. Another operator's failover of the first application, 8.5 s into it, is
    refused. Each wait ends 2.5 s or more before its timeout (with 1 s, a loaded
    machine's state store once failed the fence on the second client)."""
    config = _config(primary, dr)
    first, second = _application(store), _application(store)
    orchestrator_store, operator_store = StateStore(state_url), StateStore(state_url)
    failover = Failover(config, _FLOW, [first, second], orchestrator_store, timeout_s=7.5)
    failover.lease_ttl_s = 8
    try:
        assert failover.run_step("fo-long", "preflight").status == "done"
        with _client(store, state_url, first, 5), _client(store, state_url, second, 9.5):
            fence = _Orchestrator(lambda: failover.run_step("fo-long", "fence"))
            wait_until(lambda: store.applications.get(first).fenced, 60, "the fence to start")
            started = time.monotonic()
            time.sleep(8.5)  # the lease taken before the fence started would have lapsed

            other = Failover(config, _FLOW, [first], operator_store, timeout_s=5)
            with pytest.raises(StepFailed, match=r"application \S+ is leased to fo-long until"):
                other.run_step("fo-other", "preflight")
            assert fence.outcome is None and fence.error is None, "the fence ended early"
            fence.join()
        assert fence.error is None, fence.error
        assert fence.outcome is not None and fence.outcome.status == "done"
        assert time.monotonic() - started > failover.lease_ttl_s
        held = store.leases.all()
        assert {lease.owner for lease in held} == {"fo-long"}
        assert all(lease.expires_at > datetime.now(UTC) for lease in held)
        assert store.applications.get(first).fenced and store.applications.get(second).fenced
    finally:
        orchestrator_store.close()
        operator_store.close()


def test_a_step_whose_lease_is_taken_stops_waiting_and_is_not_done(
    primary: str, dr: str, store: StateStore, state_url: str
) -> None:
    config = _config(primary, dr)
    app = _application(store)
    orchestrator_store = StateStore(state_url)
    failover = Failover(config, _FLOW, [app], orchestrator_store, timeout_s=10)
    failover.lease_ttl_s = 12  # renewed every 4 s
    try:
        assert failover.run_step("fo-lost", "preflight").status == "done"
        with _client(store, state_url, app, ack_after_s=None):
            fence = _Orchestrator(lambda: failover.run_step("fo-lost", "fence"))
            wait_until(lambda: store.applications.get(app).fenced, 60, "the fence to start")
            # Someone frees the run's leases by hand, and another procedure takes one.
            assert store.leases.release("fo-lost") == 2
            store.leases.acquire([f"application {app}"], "fo-other", 60)
            fence.join()
        assert isinstance(fence.error, StepFailed), fence.error
        error = str(fence.error)
        assert (
            "step 'fence', lost its lease: renewing the leases refused, nothing was written: "
            f"the lease on 'application {app}' that fo-lost (fencing token 1) took is now held "
            "by fo-other (fencing token 2)"
        ) in error
        assert fence.seconds < 8, "the fence waited on after it lost its lease"
        saved = store.runs.step("fo-lost", "fence")
        assert saved is not None and saved.state == "failed"
    finally:
        orchestrator_store.close()
