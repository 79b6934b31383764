"""A procedure's step timeout must be below its lease (no Kafka; a real SQLite store):
a step waits up to its timeout between two looks at its lease, so a longer one is
refused with a clear message before anything runs or is recorded, whether a DAG
task runs a step, plans the run, or the CLI runs it all."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.procedures import ProcedureRequest, plan, run_steps
from replicator.statestore import DEFAULT_LEASE_TTL_S, StateStore


def _request(tmp_path: Path, state_url: str, timeout_s: float) -> ProcedureRequest:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary, dr\nprimary.bootstrap.servers = 127.0.0.1:1\n"
        "dr.bootstrap.servers = 127.0.0.1:2\nprimary->dr.enabled = true\n"
    )
    return ProcedureRequest(
        kind="failover",
        config=str(config),
        flow="primary->dr",
        applications=["orders"],
        state_url=state_url,
        timeout_s=timeout_s,
    )


@pytest.mark.parametrize("timeout_s", [DEFAULT_LEASE_TTL_S, 2 * DEFAULT_LEASE_TTL_S])
def test_a_step_timeout_at_or_above_the_lease_is_refused_before_anything_runs(
    tmp_path: Path, state_url: str, store: StateStore, timeout_s: float
) -> None:
    store.applications.register("orders", "primary")
    request = _request(tmp_path, state_url, timeout_s)
    wanted = (
        rf"failover: the steps' timeout \({timeout_s:g}s, timeout_s\) must be below the "
        rf"procedure's lease \({DEFAULT_LEASE_TTL_S:g}s, lease_ttl_s\)"
    )
    with pytest.raises(ReplicatorError, match=wanted):
        run_steps(request, "fo-1", ["preflight"])
    with pytest.raises(ReplicatorError, match=wanted):
        plan(request)
    assert store.runs.recent() == [], "a refused procedure recorded a run"
    assert store.runs.steps("fo-1") == []
    assert store.leases.all() == []
