"""The state store's schema under Alembic, on SQLite and on a real PostgreSQL server:
a new store gets exactly the schema the code declares, a store made before migrations
(commit 41d8c6e and older) is upgraded in place with its DR history kept, stores
opened at once migrate once, and a store a newer replicator upgraded is refused
with a clear message."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    func,
    insert,
    select,
    text,
)

from replicator.statestore import StateStore, StateStoreError, schema
from replicator.statestore.migrate import VERSION_TABLE, head_revision

_NAME = 255
#: When the legacy store's rows were written (naive UTC, as the store writes them).
_THEN = datetime(2026, 11, 1, 12, 0, 0)


def _legacy_metadata(with_leases: bool) -> MetaData:
    """The tables as replicator/statestore/store.py declared them at commit 41d8c6e, the
    last release without migrations, which made them with `create_all` on every start;
    frozen here. Without `dr_leases`: a store last opened by a release before leases."""
    metadata = MetaData()
    Table(
        "dr_applications",
        metadata,
        Column("name", String(_NAME), primary_key=True),
        Column("active_cluster", String(_NAME), nullable=False),
        Column("fenced", Boolean, nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("updated_at", DateTime, nullable=False),
    )
    Table(
        "dr_clients",
        metadata,
        Column("application", String(_NAME), primary_key=True),
        Column("client_id", String(_NAME), primary_key=True),
        Column("role", String(64), nullable=False),
        Column("cluster", String(_NAME), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("state", String(16), nullable=False),
        Column("last_seen", DateTime, nullable=False),
    )
    Table(
        "dr_flows",
        metadata,
        Column("flow", String(_NAME), primary_key=True),
        Column("state", String(64), nullable=False),
        Column("detail", JSON, nullable=False),
        Column("updated_at", DateTime, nullable=False),
    )
    Table(
        "dr_runs",
        metadata,
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("run_id", String(_NAME), nullable=False, unique=True),
        Column("kind", String(64), nullable=False, index=True),
        Column("flow", String(_NAME)),
        Column("mode", String(64)),
        Column("params", JSON, nullable=False),
        Column("started_at", DateTime, nullable=False),
        Column("finished_at", DateTime),
        Column("outcome", String(64)),
        Column("rpo_records", BigInteger),
        Column("rto_seconds", Float),
        Column("details", JSON, nullable=False),
    )
    Table(
        "dr_steps",
        metadata,
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("procedure_id", String(_NAME), nullable=False),
        Column("name", String(_NAME), nullable=False),
        Column("state", String(16), nullable=False),
        Column("result", JSON, nullable=False),
        Column("first_saved_at", DateTime, nullable=False),
        Column("updated_at", DateTime, nullable=False),
        UniqueConstraint("procedure_id", "name"),
    )
    if with_leases:
        Table(
            "dr_leases",
            metadata,
            Column("resource", String(_NAME), primary_key=True),
            Column("owner", String(_NAME), nullable=False),
            Column("acquired_at", DateTime, nullable=False),
            Column("expires_at", DateTime, nullable=False),
        )
    return metadata


def _schema_differences(url: str) -> list[object]:
    """What Alembic's autogenerate finds between the database and the code's tables."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
            )
            return compare_metadata(context, schema.metadata)
    finally:
        engine.dispose()


def _revisions(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    finally:
        engine.dispose()


def test_a_new_store_gets_the_schema_the_code_declares(backend_state_url: str) -> None:
    """The migrations and the code's tables agree: a change to one without the other
    (a column added without a revision) fails here."""
    store = StateStore(backend_state_url)
    try:
        assert store.applications.all() == []
    finally:
        store.close()
    assert _schema_differences(backend_state_url) == []
    assert _revisions(backend_state_url) == [head_revision()]


@pytest.mark.parametrize("with_leases", [True, False], ids=["41d8c6e", "before-leases"])
def test_a_store_made_before_migrations_is_upgraded_in_place_keeping_its_history(
    backend_state_url: str, with_leases: bool
) -> None:
    legacy = _legacy_metadata(with_leases)
    tables = legacy.tables
    engine = create_engine(backend_state_url)
    with engine.begin() as conn:
        legacy.create_all(conn)  # what the old code did on every start
        conn.execute(
            insert(tables["dr_applications"]).values(
                name="orders", active_cluster="dr", fenced=False, epoch=2, updated_at=_THEN
            )
        )
        conn.execute(
            insert(tables["dr_clients"]).values(
                application="orders",
                client_id="c1",
                role="consumer",
                cluster="dr",
                epoch=2,
                state="running",
                last_seen=_THEN,
            )
        )
        conn.execute(
            insert(tables["dr_flows"]).values(
                flow="primary->dr", state="stopped", detail={"by": "fo-1"}, updated_at=_THEN
            )
        )
        conn.execute(
            insert(tables["dr_runs"]).values(
                run_id="failover-1",
                kind="failover",
                flow="primary->dr",
                mode="planned",
                params={"groups": ["orders"]},
                started_at=_THEN,
                finished_at=_THEN + timedelta(seconds=42),
                outcome="succeeded",
                rpo_records=0,
                rto_seconds=12.5,
                details={"downtime_seconds": 3.5},
            )
        )
        conn.execute(
            insert(tables["dr_steps"]).values(
                procedure_id="failover-1",
                name="fence",
                state="done",
                result={"epoch": 1},
                first_saved_at=_THEN,
                updated_at=_THEN,
            )
        )
        if with_leases:
            conn.execute(
                insert(tables["dr_leases"]).values(
                    resource="flow primary->dr",
                    owner="failover-1",
                    acquired_at=_THEN,
                    expires_at=_THEN + timedelta(hours=1),
                )
            )
    engine.dispose()

    store = StateStore(backend_state_url)  # the new code: upgrades on first use
    try:
        [app] = store.applications.all()
        assert (app.name, app.active_cluster, app.fenced, app.epoch) == ("orders", "dr", False, 2)
        assert app.updated_at == _THEN.replace(tzinfo=UTC)
        assert [(c.client_id, c.state) for c in store.applications.clients("orders")] == [
            ("c1", "running")
        ]
        flow = store.flows.get("primary->dr")
        assert flow is not None
        assert (flow.state, flow.detail) == ("stopped", {"by": "fo-1"})
        [run] = store.runs.recent()
        assert (run.run_id, run.outcome, run.rpo_records, run.rto_seconds) == (
            "failover-1",
            "succeeded",
            0,
            12.5,
        )
        assert (run.params, run.downtime_seconds) == ({"groups": ["orders"]}, 3.5)
        assert [(s.name, s.result) for s in store.runs.steps("failover-1")] == [
            ("fence", {"epoch": 1})
        ]
        expected_leases = [("flow primary->dr", "failover-1")] if with_leases else []
        assert [(lease.resource, lease.owner) for lease in store.leases.all()] == expected_leases

        # The upgraded store goes on: new history lands after the old.
        newer = store.runs.start("drill", "primary->dr", "full", {})
        assert [r.run_id for r in store.runs.recent()] == [newer, "failover-1"]
        store.leases.acquire(["application orders"], "drill-2")
    finally:
        store.close()
    assert _schema_differences(backend_state_url) == []
    assert _revisions(backend_state_url) == [head_revision()]


def test_stores_opened_at_once_migrate_once(backend_state_url: str) -> None:
    """Separate engines (as separate processes would be) open a new store at once:
    one creates the schema, the others wait for its lock and find it current."""
    _register_at_once([backend_state_url] * 6)
    store = StateStore(backend_state_url)
    try:
        assert [a.name for a in store.applications.all()] == ["orders"]
    finally:
        store.close()
    assert _revisions(backend_state_url) == [head_revision()]


def _register_at_once(urls: list[str]) -> None:
    """A store per URL (a separate engine, as a separate process would have), each
    opened by its first write at the same moment, in threads behind a barrier."""
    stores = [StateStore(url) for url in urls]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def open_store(state: StateStore) -> None:
        barrier.wait()
        try:
            state.applications.register("orders", "primary")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store, args=(s,)) for s in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
    finally:
        for state in stores:
            state.close()


def test_a_store_upgraded_by_a_newer_replicator_is_refused_clearly(
    backend_state_url: str,
) -> None:
    first = StateStore(backend_state_url)
    first.applications.all()
    first.close()
    engine = create_engine(backend_state_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
        assert conn.execute(select(func.count()).select_from(text(VERSION_TABLE))).scalar() == 1
    engine.dispose()

    store = StateStore(backend_state_url)
    try:
        with pytest.raises(StateStoreError, match="has schema revision '9999', which this") as err:
            store.applications.all()
        assert f"its newest is {head_revision()!r}): a newer replicator upgraded it" in str(
            err.value
        )
    finally:
        store.close()


def test_stores_of_different_databases_migrate_at_once_in_one_process(tmp_path: Path) -> None:
    """Alembic's migration context is one per process: stores of different databases
    (no database lock in common) upgrading at once in threads must each get theirs."""
    urls = [f"sqlite:///{tmp_path / f'state-{i}.db'}" for i in range(6)]
    _register_at_once(urls)
    assert all(_revisions(url) == [head_revision()] for url in urls)
