"""The DR state store, client discovery, its HTTP API, its CLI and the ledger check:
unit tests (no Kafka), each test of the store once on a SQLite file under tmp_path
and once on a database of a real PostgreSQL server (`backend_state_url`)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import literal

from replicator.cli import main
from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.statestore import (
    ROUTE_LEASE_S,
    FenceNotAcknowledged,
    LeaseHeld,
    LedgerEntry,
    NotFoundError,
    StateStore,
    StateStoreError,
    UnknownClusterError,
    check_ledgers,
    clock,
    database,
    read_ledger,
    where,
)
from replicator.statestore.http import create_app
from replicator.statestore.ledger import LedgerError, LedgerWriter
from replicator.statestore.records import VerifiedRange
from replicator.statestore.schema import UTCDateTime

PRIMARY = "127.0.0.1:19092"
DR = "127.0.0.1:29092"


@pytest.fixture
def url(backend_state_url: str) -> str:
    return backend_state_url


@pytest.fixture
def store(url: str):
    state = StateStore(url)
    yield state
    state.close()


@pytest.fixture
def config() -> ReplicatorConfig:
    return load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": PRIMARY,
            "dr.bootstrap.servers": DR,
            "dr.sasl.password": "hunter2",
            "primary->dr.enabled": "true",
        }
    )


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = primary, dr\nprimary.bootstrap.servers = {PRIMARY}\n"
        f"dr.bootstrap.servers = {DR}\nprimary->dr.enabled = true\n"
    )
    return path


class Clock:
    """Replaces the store's clocks (the process's, and the server's that stamps the
    clients' reports), so "seen within" windows need no sleeping."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)
        monkeypatch.setattr(database, "now", lambda: self.now)
        monkeypatch.setattr(clock, "server_now", lambda: literal(self.now, UTCDateTime()))

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# --- applications ---------------------------------------------------------------------


def test_register_is_idempotent_and_keeps_the_active_cluster(store: StateStore) -> None:
    first = store.applications.register("orders", "primary")
    assert (first.active_cluster, first.fenced, first.epoch) == ("primary", False, 0)
    assert first.updated_at.tzinfo == UTC
    store.applications.switch("orders", "dr")
    again = store.applications.register("orders", "primary")
    assert (again.active_cluster, again.epoch) == ("dr", 1)
    assert [a.name for a in store.applications.all()] == ["orders"]


def test_fence_switch_unfence_move_the_epoch_only_on_change(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    assert store.applications.fence("orders") == 1
    assert store.applications.fence("orders") == 1  # a retried fence waits for the same epoch
    assert store.applications.get("orders").fenced

    switched = store.applications.switch("orders", "dr")
    assert (switched.active_cluster, switched.fenced, switched.epoch) == ("dr", False, 2)
    assert store.applications.switch("orders", "dr").epoch == 2

    assert store.applications.fence("orders") == 3
    unfenced = store.applications.unfence("orders")
    assert (unfenced.active_cluster, unfenced.fenced, unfenced.epoch) == ("dr", False, 4)
    assert store.applications.unfence("orders").epoch == 4

    store.applications.fence("orders")
    assert store.applications.switch("orders", "dr").epoch == 6  # lifting the fence is a change


def test_unknown_application_names_the_registered_ones(store: StateStore) -> None:
    with pytest.raises(NotFoundError, match="'orders' is not registered") as error:
        store.applications.fence("orders")
    assert "registered: none" in str(error.value)
    store.applications.register("payments", "primary")
    store.applications.register("audit", "dr")
    with pytest.raises(NotFoundError, match=r"registered: audit, payments\)"):
        store.applications.get("orders")
    with pytest.raises(NotFoundError, match="replicator clients register orders --cluster"):
        store.applications.report_client("orders", "c1", "producer", "primary", 0, "running")


# --- clients and fence acknowledgement ------------------------------------------------


def test_clients_report_upsert_and_seen_within(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "p1", "producer", "primary", 0, "running")
    clock.advance(30)
    store.applications.report_client("orders", "c1", "consumer", "primary", 0, "running")
    store.applications.report_client("orders", "c1", "consumer", "primary", 1, "fenced")

    everyone = store.applications.clients("orders")
    assert [(c.client_id, c.role, c.epoch, c.state) for c in everyone] == [
        ("c1", "consumer", 1, "fenced"),
        ("p1", "producer", 0, "running"),
    ]
    assert everyone[0].last_seen == clock.now
    assert [c.client_id for c in store.applications.clients("orders", seen_within_s=10)] == ["c1"]

    store.applications.remove_client("orders", "c1")
    store.applications.remove_client("orders", "c1")  # idempotent
    assert [c.client_id for c in store.applications.clients("orders")] == ["p1"]

    with pytest.raises(StateStoreError, match="one of running, fenced"):
        store.applications.report_client("orders", "c1", "consumer", "primary", 1, "stopped")  # type: ignore[arg-type]


def test_wait_fenced_returns_the_acknowledging_clients(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "gone", "producer", "primary", 0, "running")
    clock.advance(60)  # a client that stopped reporting long ago is not waited for
    epoch = store.applications.fence("orders")
    store.applications.report_client("orders", "p1", "producer", "primary", epoch, "fenced")
    store.applications.report_client("orders", "c1", "consumer", "primary", epoch, "fenced")

    acknowledged = store.applications.wait_fenced("orders", epoch, timeout_s=5)
    assert sorted(c.client_id for c in acknowledged) == ["c1", "p1"]


def test_wait_fenced_times_out_naming_the_clients(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "p1", "producer", "primary", 0, "running")
    epoch = store.applications.fence("orders")
    store.applications.report_client("orders", "c1", "consumer", "primary", epoch, "fenced")
    store.applications.report_client("orders", "c2", "consumer", "primary", epoch - 1, "fenced")

    with pytest.raises(FenceNotAcknowledged) as error:
        store.applications.wait_fenced("orders", epoch, timeout_s=0.3)
    message = str(error.value)
    assert f"2 client(s) of 'orders' did not acknowledge the fence at epoch {epoch}" in message
    assert "p1 (producer on primary: running at epoch 0" in message
    assert "c2 (consumer on primary: fenced at epoch 0" in message
    assert "c1" not in message
    assert sorted(c.client_id for c in error.value.pending) == ["c2", "p1"]


def test_wait_fenced_waits_out_a_silent_client_for_its_route_lease(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client cut off from the store stops within its route lease; until that has
    passed since it was last seen, its silence is no acknowledgement."""
    clock = Clock(monkeypatch)
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "cut-off", "producer", "primary", 0, "running")
    clock.advance(ROUTE_LEASE_S - 1)  # silent for less than its lease (the old rule: 10 s)
    epoch = store.applications.fence("orders")
    with pytest.raises(FenceNotAcknowledged, match=r"cut-off .*seen 4\.0s ago"):
        store.applications.wait_fenced("orders", epoch, timeout_s=0.3)


def test_wait_fenced_returns_once_the_lease_of_a_silent_client_passed(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "cut-off", "producer", "primary", 0, "running")
    epoch = store.applications.fence("orders")
    store.applications.report_client("orders", "c1", "consumer", "primary", epoch, "fenced")
    started = time.monotonic()
    returned = store.applications.wait_fenced("orders", epoch, timeout_s=30, lease_s=0.5)
    waited = time.monotonic() - started
    # lease 0.5 s + ROUTE_LEASE_GRACE_S 1 s from its last report, just before the fence
    assert 1.2 < waited < 10
    assert [(c.client_id, c.state) for c in returned] == [
        ("c1", "fenced"),
        ("cut-off", "running"),
    ]


def test_wait_fenced_refuses_a_fence_that_was_lifted(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    epoch = store.applications.fence("orders")
    store.applications.switch("orders", "dr")
    with pytest.raises(StateStoreError, match="no longer fenced at epoch 1 \\(now epoch 2"):
        store.applications.wait_fenced("orders", epoch, timeout_s=1)


# --- leases ---------------------------------------------------------------------------


def test_lease_is_taken_renewed_refused_and_released(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    [lease] = store.leases.acquire(["flow a->b"], "failover-1", ttl_s=60)
    assert (lease.owner, lease.acquired_at, lease.expires_at) == (
        "failover-1",
        clock.now,
        clock.now + timedelta(seconds=60),
    )
    clock.advance(30)
    [renewed] = store.leases.acquire(["flow a->b"], "failover-1", ttl_s=60)
    assert renewed.acquired_at == lease.acquired_at
    assert renewed.expires_at == clock.now + timedelta(seconds=60)

    with pytest.raises(LeaseHeld) as refused:
        store.leases.acquire(["flow a->b"], "failback-2")
    assert str(refused.value).startswith(
        "flow a->b is leased to failover-1 until 2030-01-01 00:01:30 UTC (60s from now), "
        "so failback-2 may not change it"
    )
    assert refused.value.holder == renewed

    assert store.leases.release("failback-2") == 0
    assert store.leases.release("failover-1") == 1
    assert store.leases.all() == []
    [taken] = store.leases.acquire(["flow a->b"], "failback-2")
    assert taken.owner == "failback-2"


def test_leases_are_all_or_none(store: StateStore) -> None:
    store.leases.acquire(["application b"], "failover-1")
    with pytest.raises(LeaseHeld, match="application b is leased to failover-1"):
        store.leases.acquire(["flow x", "application a", "application b"], "drill-2")
    assert [(lease.resource, lease.owner) for lease in store.leases.all()] == [
        ("application b", "failover-1")
    ]


def test_an_expired_lease_is_taken_over(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    store.leases.acquire(["flow a->b", "application orders"], "crashed", ttl_s=60)
    clock.advance(61)
    taken = store.leases.acquire(["flow a->b", "application orders"], "failover-2", ttl_s=60)
    assert {(lease.owner, lease.acquired_at) for lease in taken} == {("failover-2", clock.now)}
    with pytest.raises(LeaseHeld, match=r"leased to failover-2 .* so crashed may not"):
        store.leases.acquire(["flow a->b"], "crashed")  # its renewal comes too late


def test_one_of_many_concurrent_acquirers_gets_the_lease(url: str) -> None:
    """Separate engines on one file (as separate processes would be) race for the
    same resources: exactly one wins both, the others are refused."""
    stores = [StateStore(url) for _ in range(6)]
    stores[0].leases.all()  # the schema exists before the race
    barrier = threading.Barrier(len(stores))
    won: list[str] = []
    refused: list[str] = []
    errors: list[BaseException] = []

    def acquire(index: int) -> None:
        barrier.wait()
        try:
            stores[index].leases.acquire(["flow a->b", "application orders"], f"proc-{index}")
            won.append(f"proc-{index}")
        except LeaseHeld:
            refused.append(f"proc-{index}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=acquire, args=(i,)) for i in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        assert len(won) == 1 and len(refused) == len(stores) - 1
        assert {lease.owner for lease in stores[0].leases.all()} == set(won)
    finally:
        for state in stores:
            state.close()


# --- flows, runs, steps ---------------------------------------------------------------


def test_flow_states(store: StateStore) -> None:
    assert store.flows.get("primary->dr") is None
    store.flows.set("primary->dr", "running", {"lag": 3})
    store.flows.set("dr->primary", "stopped")
    updated = store.flows.set("primary->dr", "failed-over", {"at": "2030-01-01"})
    assert (updated.state, updated.detail) == ("failed-over", {"at": "2030-01-01"})
    assert [(f.flow, f.state, f.detail) for f in store.flows.all()] == [
        ("dr->primary", "stopped", {}),
        ("primary->dr", "failed-over", {"at": "2030-01-01"}),
    ]


def test_runs_newest_first_with_json_round_trip(store: StateStore) -> None:
    params = {"groups": ["g1", "g2"], "dry_run": False, "nested": {"n": 1.5, "none": None}}
    failover = store.runs.start("failover", "primary->dr", "planned", params)
    drill = store.runs.start("drill", "primary->dr", "non-disruptive", {})
    failback = store.runs.start("failback", None, None, {})
    assert failover.startswith("failover-")
    assert len({failover, drill, failback}) == 3

    running = store.runs.get(failover)
    assert (running.outcome, running.finished_at, running.details) == (None, None, {})
    details = {"steps": [{"name": "fence", "ok": True}], "lost": 0}
    finished = store.runs.finish(failover, "succeeded", 0, 12.5, details)
    assert (finished.outcome, finished.rpo_records, finished.rto_seconds) == ("succeeded", 0, 12.5)
    assert finished.params == params
    assert finished.details == details
    assert finished.finished_at is not None
    assert finished.finished_at >= finished.started_at

    assert [r.run_id for r in store.runs.recent()] == [failback, drill, failover]
    assert [r.run_id for r in store.runs.recent(limit=2)] == [failback, drill]
    assert [r.run_id for r in store.runs.recent(kind="failover")] == [failover]
    assert store.runs.recent(kind="verification") == []


def test_verified_ranges_are_replaced_per_partition(store: StateStore) -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)

    def verified(topic: str, partition: int, first: int, end: int) -> VerifiedRange:
        return VerifiedRange(
            "a->b", topic, partition, first, end, f"a.{topic}", "id", first, end,
            end - first, "00000000000000ff", at, at, "run-1",
        )  # fmt: skip

    assert store.verified.ranges("a->b") == []
    store.verified.replace(
        "a->b",
        {
            ("orders", 0): [verified("orders", 0, 0, 100), verified("orders", 0, 100, 150)],
            ("orders", 1): [verified("orders", 1, 0, 10)],
        },
    )
    # Partition 0 verified whole again: its ranges replaced; partition 1 untouched.
    store.verified.replace("a->b", {("orders", 0): [verified("orders", 0, 0, 200)]})
    ranges = store.verified.ranges("a->b")
    spans = [(r.partition, r.source_first, r.source_end) for r in ranges]
    assert spans == [(0, 0, 200), (1, 0, 10)]
    assert ranges[0].verified_at == at and ranges[0].digest == "00000000000000ff"
    assert store.verified.ranges("b->a") == []
    with pytest.raises(ValueError, match=r"orders\[1\] given for a->b orders\[0\]"):
        store.verified.replace("a->b", {("orders", 0): [verified("orders", 1, 0, 5)]})


def test_runs_never_store_secrets_or_non_json(store: StateStore) -> None:
    run_id = store.runs.start("drill", "primary->dr", "full", {"dr.sasl.password": "hunter2"})
    store.runs.finish(run_id, "failed", None, None, {"client": {"sasl.jaas.config": "x"}})
    stored = store.runs.get(run_id)
    assert stored.params == {"dr.sasl.password": "******"}
    assert stored.details == {"client": {"sasl.jaas.config": "******"}}
    with pytest.raises(StateStoreError, match=f"details of run {run_id} cannot be stored as JSON"):
        store.runs.finish(run_id, "failed", None, None, {"when": datetime.now(UTC)})


def test_unknown_run_says_where_to_look(store: StateStore) -> None:
    with pytest.raises(NotFoundError, match=r"run 'nope' is not in the state store .*history"):
        store.runs.get("nope")
    with pytest.raises(NotFoundError, match="run 'nope'"):
        store.runs.finish("nope", "failed", None, None, {})


def test_steps_upsert_in_order_of_first_save(store: StateStore) -> None:
    assert store.runs.step("proc-1", "fence") is None
    store.runs.save_step("proc-1", "fence", "failed", {"error": "timeout"})
    store.runs.save_step("proc-1", "drain", "done", {"lag": 0})
    retried = store.runs.save_step("proc-1", "fence", "done", {"epoch": 3})
    assert (retried.state, retried.result) == ("done", {"epoch": 3})
    assert retried.updated_at >= retried.first_saved_at
    store.runs.save_step("proc-2", "fence", "done", {})

    assert [(s.name, s.state) for s in store.runs.steps("proc-1")] == [
        ("fence", "done"),
        ("drain", "done"),
    ]
    step = store.runs.step("proc-1", "drain")
    assert step is not None
    assert step.result == {"lag": 0}
    with pytest.raises(StateStoreError, match="one of done, failed"):
        store.runs.save_step("proc-1", "drain", "skipped", {})  # type: ignore[arg-type]


# --- several processes, URLs ----------------------------------------------------------


def test_two_stores_on_one_database_see_each_others_writes(url: str) -> None:
    first, second = StateStore(url), StateStore(url)
    try:
        first.applications.register("orders", "primary")
        assert second.applications.fence("orders") == 1
        assert first.applications.get("orders").fenced

        errors: list[BaseException] = []

        def report(state: StateStore, prefix: str) -> None:
            try:
                for i in range(40):
                    state.applications.report_client(
                        "orders", f"{prefix}{i % 4}", "consumer", "dr", i, "running"
                    )
                    state.runs.save_step("proc", f"{prefix}{i}", "done", {"i": i})
            except BaseException as exc:
                errors.append(exc)

        writers = [
            threading.Thread(target=report, args=(s, p)) for s, p in ((first, "a"), (second, "b"))
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(timeout=120)
        assert not errors, errors
        assert len(first.runs.steps("proc")) == len(second.runs.steps("proc")) == 80
        assert {c.epoch for c in second.applications.clients("orders")} == {36, 37, 38, 39}
    finally:
        first.close()
        second.close()


def test_state_url_from_environment_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(database.STATE_URL_ENV, raising=False)
    default = StateStore()
    default.applications.register("orders", "primary")
    default.close()
    assert (tmp_path / ".data" / "state" / "replicator.db").is_file()

    elsewhere = tmp_path / "elsewhere" / "state.db"
    monkeypatch.setenv(database.STATE_URL_ENV, f"sqlite:///{elsewhere}")
    from_env = StateStore()
    assert from_env.applications.all() == []
    from_env.close()
    assert elsewhere.is_file()


def test_bad_urls_are_named_without_their_password() -> None:
    with pytest.raises(StateStoreError, match="is not a SQLAlchemy URL"):
        StateStore("not a url")
    with pytest.raises(StateStoreError, match="no database driver") as error:
        StateStore("nosuchdb://user:s3cret@host/db")
    assert "s3cret" not in str(error.value)


# --- discovery ------------------------------------------------------------------------


def test_where_gives_bootstrap_servers_and_no_secrets(
    store: StateStore, config: ReplicatorConfig
) -> None:
    store.applications.register("orders", "primary")
    route = where("orders", config, store.applications)
    assert (route.cluster, route.bootstrap_servers, route.fenced, route.epoch) == (
        "primary",
        PRIMARY,
        False,
        0,
    )
    store.applications.fence("orders")
    store.applications.switch("orders", "dr")
    route = where("orders", config, store.applications)
    assert (route.cluster, route.bootstrap_servers, route.epoch) == ("dr", DR, 2)
    assert "hunter2" not in repr(route)


def test_where_explains_a_cluster_missing_from_the_config(
    store: StateStore, config: ReplicatorConfig
) -> None:
    store.applications.register("orders", "west")
    with pytest.raises(UnknownClusterError, match="active on cluster 'west'") as error:
        where("orders", config, store.applications)
    assert "clusters: primary, dr" in str(error.value)
    assert "add west.bootstrap.servers" in str(error.value)
    with pytest.raises(NotFoundError, match="'payments' is not registered"):
        where("payments", config, store.applications)


# --- HTTP API -------------------------------------------------------------------------


def test_api_routes(store: StateStore, config: ReplicatorConfig) -> None:
    store.applications.register("orders", "primary")
    store.applications.register("lost", "west")
    store.applications.fence("orders")
    run_id = store.runs.start("failover", "primary->dr", "planned", {"dry_run": True})
    store.runs.finish(run_id, "succeeded", 0, 3.5, {"epoch": 1})
    store.flows.set("primary->dr", "running", {"lag": 0})

    plain = TestClient(create_app(store))
    apps = plain.get("/applications").json()
    assert [(a["name"], a["active_cluster"]) for a in apps] == [
        ("lost", "west"),
        ("orders", "primary"),
    ]
    orders = plain.get("/applications/orders").json()
    assert (orders["fenced"], orders["epoch"]) == (True, 1)
    assert datetime.fromisoformat(orders["updated_at"]).tzinfo is not None

    routed = TestClient(create_app(store, config))
    assert routed.get("/applications/orders").json() == {
        "application": "orders",
        "cluster": "primary",
        "bootstrap_servers": PRIMARY,
        "fenced": True,
        "epoch": 1,
    }
    conflict = routed.get("/applications/lost")
    assert conflict.status_code == 409
    assert "active on cluster 'west'" in conflict.json()["detail"]

    runs = plain.get("/runs", params={"kind": "failover", "limit": 5}).json()
    assert [(r["run_id"], r["rto_seconds"], r["params"]) for r in runs] == [
        (run_id, 3.5, {"dry_run": True})
    ]
    assert plain.get("/runs", params={"kind": "drill"}).json() == []
    assert plain.get("/runs", params={"limit": 0}).status_code == 422
    assert plain.get(f"/runs/{run_id}").json()["details"] == {"epoch": 1}
    assert plain.get("/flows").json()[0]["detail"] == {"lag": 0}

    for path, name in (("/applications/nope", "application 'nope'"), ("/runs/nope", "run 'nope'")):
        missing = plain.get(path)
        assert missing.status_code == 404
        assert name in missing.json()["detail"]


def test_api_changes_nothing(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    client = TestClient(create_app(store))
    for method in ("post", "put", "patch", "delete"):
        assert getattr(client, method)("/applications/orders").status_code == 405
    assert store.applications.get("orders").epoch == 0


# --- CLI ------------------------------------------------------------------------------


def test_cli_register_where_list(
    url: str, config_file: Path, store: StateStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["clients", "register", "orders", "--cluster", "primary", "--state-url", url]) == 0
    assert "orders is registered, active on primary (epoch 0)" in capsys.readouterr().out
    assert main(["clients", "register", "orders", "--cluster", "dr", "--state-url", url]) == 0
    assert "stays active on primary" in capsys.readouterr().out

    where_args = ["clients", "where", "orders", "--config", str(config_file), "--state-url", url]
    assert main(where_args) == 0
    assert f"orders: cluster primary ({PRIMARY}), epoch 0, not fenced" in capsys.readouterr().out
    store.applications.fence("orders")
    assert main([*where_args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "application": "orders",
        "cluster": "primary",
        "bootstrap_servers": PRIMARY,
        "fenced": True,
        "epoch": 1,
    }

    store.applications.report_client("orders", "p1", "producer", "primary", 1, "fenced")
    assert main(["clients", "list", "--state-url", url]) == 0
    out = capsys.readouterr().out
    assert "orders" in out
    assert "FENCED" in out
    assert "p1" in out
    assert "fenced at epoch 1" in out
    assert main(["clients", "list", "--state-url", url, "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["name"], listed["epoch"], listed["clients"][0]["client_id"]) == (
        "orders",
        1,
        "p1",
    )


def test_cli_history(
    url: str, store: StateStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one run a line, no cell wrapped
    assert main(["history", "--state-url", url]) == 0
    assert "no runs recorded" in capsys.readouterr().out
    drill = store.runs.start("drill", "primary->dr", "full", {})
    store.runs.finish(drill, "succeeded", 0, 41.0, {})
    failover = store.runs.start("failover", "primary->dr", "unplanned", {})

    assert main(["history", "--state-url", url]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["STARTED", "RUN", "FLOW", "MODE", "OUTCOME", "RPO", "RTO"]
    assert [line.split()[2] for line in lines] == [failover, drill]
    assert "succeeded" in lines[1]
    assert lines[1].split()[-1] == "41.0s"  # RTO
    assert "running" in lines[0]

    assert main(["history", "--state-url", url, "--kind", "drill", "--limit", "1", "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)
    assert (run["run_id"], run["rto_seconds"]) == (drill, 41.0)
    assert datetime.fromisoformat(run["started_at"]).tzinfo is not None


def test_cli_errors_are_one_line(
    url: str, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["clients", "where", "nope", "--config", str(config_file), "--state-url", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("replicator: error: application 'nope' is not registered")
    assert err.count("\n") == 1


# --- ledgers --------------------------------------------------------------------------


def _entry(record_id: str, offset: int) -> LedgerEntry:
    return LedgerEntry(record_id, "primary", "demo.orders", 0, offset)


def test_ledger_check_finds_missing_and_duplicates(tmp_path: Path) -> None:
    produced, consumed_a, consumed_b = (tmp_path / n for n in ("p.jsonl", "a.jsonl", "b.jsonl"))
    with LedgerWriter(produced) as ledger:
        for i in range(5):
            ledger.write(_entry(f"id-{i}", i))
    with LedgerWriter(consumed_a) as ledger:
        for i in (0, 1, 2):
            ledger.write(_entry(f"id-{i}", i))
    with LedgerWriter(consumed_b) as ledger:
        ledger.write(_entry("id-2", 2))

    check = check_ledgers([produced], [consumed_a, consumed_b])
    assert (check.produced, check.consumed) == (5, 4)
    assert check.missing == ("id-3", "id-4")
    assert check.duplicates == ("id-2",)
    assert not check.ok
    assert "missing 2" in check.summary()
    assert check_ledgers([produced], [produced]).ok
    assert check_ledgers([], [tmp_path / "absent.jsonl"]).ok


def test_ledger_rollback_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as ledger:
        ledger.write(_entry("kept", 0))
        mark = ledger.mark()
        ledger.write(_entry("rolled-back", 1))
        ledger.rollback(mark)
        ledger.write(_entry("after", 2))
    assert [e.id for e in read_ledger(path)] == ["kept", "after"]

    with path.open("a") as file:
        file.write('{"id": "cut-off-by-kill -9"')  # a writer killed mid-line
    assert [e.id for e in read_ledger(path)] == ["kept", "after"]
    with LedgerWriter(path) as ledger:  # a restarted writer drops the partial line
        ledger.write(_entry("restarted", 3))
    assert [e.id for e in read_ledger(path)] == ["kept", "after", "restarted"]

    path.write_text("not json\n")
    with pytest.raises(LedgerError, match=r"ledger.jsonl:1 is not a ledger entry"):
        read_ledger(path)
