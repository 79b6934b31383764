"""Procedure leases on real clusters and a real state store, each test on SQLite and
on PostgreSQL: two procedures on the same application never interleave (the second
is refused, naming the holder; two failovers started at once: one runs, the other
is refused), a failback with no failover before it fences nothing, and the lease of
a dead orchestrator lapses so another procedure can take over."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import pytest

from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.procedures import (
    Failback,
    Failover,
    FullDrill,
    ProcedureReport,
    StepFailed,
    live_workers,
)
from replicator.statestore import StateStore

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import runner
from helpers.replication import preload, wait_until

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0
_PARTITIONS = 2


@pytest.fixture
def state_url(backend_state_url: str) -> str:
    """The state store of each test: a SQLite file, then a PostgreSQL database."""
    return backend_state_url


def _setup(primary: str, dr: str, store: StateStore) -> tuple[ReplicatorConfig, str, str]:
    """A topic on both clusters, flows both ways, an application on primary."""
    topic = unique_topic("leases")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, topic, partitions=_PARTITIONS)
    config = load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": primary,
            "dr.bootstrap.servers": dr,
            "primary->dr.enabled": "true",
            "primary->dr.topics": topic,
            "dr->primary.enabled": "true",
            "dr->primary.topics": topic,
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "status.topic.replication.factor": "1",
        }
    )
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    return config, topic, app


def _held(store: StateStore) -> dict[str, str]:
    return {lease.resource: lease.owner for lease in store.leases.all()}


def test_a_second_procedure_on_the_same_application_is_refused_naming_the_holder(
    primary: str, dr: str, store: StateStore
) -> None:
    config, topic, app = _setup(primary, dr, store)
    preload(primary, topic, 20, _PARTITIONS)
    forward = config.flow("primary->dr")
    store.flows.set("dr->primary", "stopped")
    with runner([forward], store):
        wait_until(lambda: live_workers(forward), _TIMEOUT_S, "the flow's worker running")
        failover = Failover(config, forward.name, [app], store, timeout_s=_TIMEOUT_S)
        assert failover.run_step("fo-first", "preflight").status == "done"
        assert _held(store) == {f"application {app}": "fo-first", "flow primary->dr": "fo-first"}

        # A full drill triggered meanwhile (another DAG, or the CLI) on the same application.
        drill = FullDrill(config, forward.name, [app], store, timeout_s=_TIMEOUT_S).run("drill-2")
        assert drill.outcome == "failed"
        assert drill.error is not None
        assert f"application {app} is leased to fo-first until " in drill.error
        assert "so drill-2 may not change it" in drill.error
        assert store.applications.get(app).epoch == 0, "the refused drill changed the application"
        assert store.runs.steps("drill-2.failover") == [], "the drill's failover started"
        [refused] = store.runs.recent("drill")
        assert refused.outcome == "failed"
        assert _held(store) == {f"application {app}": "fo-first", "flow primary->dr": "fo-first"}

        done = failover.run("fo-first")
        assert done.ok, done.error
    assert store.applications.get(app).active_cluster == "dr"
    assert store.leases.all() == [], "a finished procedure keeps no lease"

    failback = Failback(config, forward.name, [app], store, timeout_s=_TIMEOUT_S)
    assert failback.run_step("fb-3", "preflight").status == "done"
    assert _held(store) == {
        f"application {app}": "fb-3",
        "flow primary->dr": "fb-3",
        "flow dr->primary": "fb-3",  # the failback stops the reverse flow
    }


def test_two_failovers_started_at_once_one_runs_the_other_is_refused(
    primary: str, dr: str, store: StateStore, state_url: str
) -> None:
    """Two orchestrators (two DAG runs, or the CLI beside a DAG), each with a store of
    its own, start a failover of the same application at the same moment."""
    config, topic, app = _setup(primary, dr, store)
    preload(primary, topic, 20, _PARTITIONS)
    forward = config.flow("primary->dr")
    store.flows.set("dr->primary", "stopped")
    ids = ("fo-left", "fo-right")
    barrier = threading.Barrier(len(ids))
    reports: dict[str, ProcedureReport] = {}
    errors: list[BaseException] = []

    def failover(procedure_id: str) -> None:
        own = StateStore(state_url)
        try:
            procedure = Failover(config, forward.name, [app], own, timeout_s=_TIMEOUT_S)
            barrier.wait()
            reports[procedure_id] = procedure.run(procedure_id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    with runner([forward], store):
        wait_until(lambda: live_workers(forward), _TIMEOUT_S, "the flow's worker running")
        threads = [threading.Thread(target=failover, args=(i,)) for i in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=3 * _TIMEOUT_S)
    assert not errors, errors
    [winner] = [i for i in ids if reports[i].ok]
    [loser] = [i for i in ids if i != winner]
    refused = reports[loser]
    assert [(s.name, s.status) for s in refused.steps] == [("preflight", "failed")]
    assert refused.error is not None
    assert f"application {app} is leased to {winner} until " in refused.error
    assert f"so {loser} may not change it" in refused.error
    application = store.applications.get(app)
    assert (application.active_cluster, application.fenced, application.epoch) == ("dr", False, 2)
    outcomes = {run.params["procedure_id"]: run.outcome for run in store.runs.recent("failover")}
    assert outcomes == {winner: "succeeded", loser: "failed"}
    assert store.leases.all() == [], "a finished procedure keeps no lease"


def test_a_failback_with_no_failover_before_it_fences_nothing(
    primary: str, dr: str, store: StateStore
) -> None:
    config, _, app = _setup(primary, dr, store)
    # The production clients of the application run on primary.
    store.applications.report_client(app, "producer-1", "producer", "primary", 0, "running")

    report = Failback(config, "primary->dr", [app], store, timeout_s=5).run("fb-none")

    assert report.outcome == "failed"
    assert [(s.name, s.status) for s in report.steps] == [("preflight", "failed")]
    assert report.error is not None
    assert f"not active on 'dr', the DR side of flow primary->dr: {{'{app}': 'primary'}}" in (
        report.error
    )
    application = store.applications.get(app)
    assert (application.active_cluster, application.fenced, application.epoch) == (
        "primary",
        False,
        0,
    )
    assert store.flows.get("primary->dr") is None, "the refused failback changed the flow"
    assert store.leases.all() == []
    [run] = store.runs.recent("failback")
    assert run.outcome == "failed"


def test_the_lease_of_a_dead_orchestrator_lapses(primary: str, dr: str, store: StateStore) -> None:
    config, _, app = _setup(primary, dr, store)

    def failover(ttl_s: float | None = None) -> Failover:
        # A step's timeout is below its lease (a longer one is refused).
        timeout_s = _TIMEOUT_S if ttl_s is None else ttl_s / 2
        procedure = Failover(config, "primary->dr", [app], store, timeout_s=timeout_s)
        if ttl_s is not None:
            procedure.lease_ttl_s = ttl_s
        return procedure

    # An orchestrator runs the preflight with a short lease, then dies.
    assert failover(ttl_s=2).run_step("fo-dead", "preflight").status == "done"
    with pytest.raises(StepFailed, match=rf"application {app} is leased to fo-dead until"):
        failover().run_step("fo-new", "preflight")

    wait_until(
        lambda: all(lease.expires_at <= datetime.now(UTC) for lease in store.leases.all()),
        _TIMEOUT_S,
        "the lease of fo-dead to expire",
    )
    new = failover()
    assert new.run_step("fo-new", "preflight").status == "done"  # retried: takes over
    assert _held(store) == {f"application {app}": "fo-new", "flow primary->dr": "fo-new"}
    taken = {lease.resource: lease.expires_at for lease in store.leases.all()}

    # The dead orchestrator comes back: its next step is refused, it fences nothing.
    with pytest.raises(StepFailed, match=r"is leased to fo-new until .* so fo-dead may not"):
        failover().run_step("fo-dead", "fence")
    assert not store.applications.get(app).fenced

    # Each step of the holder renews its lease.
    assert new.run_step("fo-new", "fence").status == "done"
    renewed = {lease.resource: lease.expires_at for lease in store.leases.all()}
    assert all(renewed[resource] > taken[resource] for resource in taken)
    assert store.applications.get(app).fenced
