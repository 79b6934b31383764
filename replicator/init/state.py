"""Step 4 of `replicator init`: the state store's schema, the flows' first states and
the configured applications."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url

from replicator.config.model import ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.init.report import InitReport
from replicator.statestore import StateStore
from replicator.statestore.database import Database, default_state_url
from replicator.statestore.migrate import head_revision

STEP = "state"


def prepare_state(
    config: ReplicatorConfig,
    state_url: str | None,
    home: str | None,
    report: InitReport,
    *,
    dry_run: bool,
) -> None:
    """Migrate the store at `state_url` to this code's schema; then, given `home` (the
    cluster the applications run on now), stop the flows into it that have no state
    yet and register the configured applications there (leaving registered ones and
    flows with a state as they are)."""
    if home is not None and home not in config.clusters:
        raise ReplicatorError(
            f"--home {home!r} is none of the configuration's clusters "
            f"({', '.join(sorted(config.clusters))})"
        )
    if config.applications and home is None:
        raise ReplicatorError(
            f"the configuration names applications ({', '.join(sorted(config.applications))}): "
            "say which cluster they run on now with --home CLUSTER"
        )
    url = make_url(state_url or default_state_url())
    if dry_run and _new_sqlite_file(url):  # opening it would create it
        shown, current, head = url.render_as_string(), None, head_revision()
    else:
        database = Database(state_url)
        shown = str(database)  # the URL without its password
        try:
            current, head = database.schema_revision()
        finally:
            database.close()
    if current == head:
        report.add(STEP, None, "ok", f"state store {shown} is at schema revision {head}")
    elif dry_run:
        report.add(
            STEP, None, "would",
            f"migrate state store {shown} from revision {current or 'none'} to {head}",
        )  # fmt: skip
    if dry_run and current != head:
        _dry_run_state(config, home, report)
        return
    store = StateStore(state_url)
    try:
        if current != head:
            store.migrate()
            report.add(
                STEP, None, "done",
                f"migrated state store {shown} from revision {current or 'none'} to {head}",
            )  # fmt: skip
        record_first_states(config, store, home, report, dry_run=dry_run)
    finally:
        store.close()


def _new_sqlite_file(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and not Path(url.database or ":memory:").exists()


def _dry_run_state(config: ReplicatorConfig, home: str | None, report: InitReport) -> None:
    """What a new store would be given (nothing to read in it yet)."""
    if home is None:
        return
    for flow in config.flows:
        if flow.target.alias == home:
            report.add(
                STEP, None, "would", f"record flow {flow.name} as stopped ({home} is active)"
            )
    for name in sorted(config.applications):
        report.add(STEP, None, "would", f"register application {name} as active on {home}")


def record_first_states(
    config: ReplicatorConfig,
    store: StateStore,
    home: str | None,
    report: InitReport,
    *,
    dry_run: bool,
) -> None:
    """Flows into `home` with no state yet recorded as stopped, the configuration's
    applications not registered yet registered as active on `home`; the rest left
    as it is (a failover since may have moved them)."""
    if home is None:
        return
    verb = "would" if dry_run else "done"
    for flow in config.flows:
        state = store.flows.get(flow.name)
        if state is not None:
            report.add(STEP, None, "ok", f"flow {flow.name} is {state.state}; left as it is")
        elif flow.target.alias == home:
            if not dry_run:
                store.flows.set(flow.name, "stopped")
            report.add(STEP, None, verb, f"flow {flow.name} recorded as stopped ({home} is active)")
    registered = {app.name: app for app in store.applications.all()}
    for name in sorted(config.applications):
        if name in registered:
            active = registered[name].active_cluster
            report.add(STEP, None, "ok", f"application {name} is active on {active}; left as it is")
            continue
        if not dry_run:
            store.applications.register(name, home)
        report.add(STEP, None, verb, f"application {name} registered as active on {home}")
