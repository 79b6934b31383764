"""The failover's `grant_write` step and the failback's `revoke_write`, as resumable steps.

`grant_write` (opt-in per failover run) creates on the flow's target the WRITE
its applications' producers need there (`replicator.acls.grants`), just before
the `switch` lets them run on it; `revoke_write` (in the failback, after its
`switch` moved them back) deletes exactly what that failover created, nothing that
was there before it: an ACL an administrator granted is not ours to take away.

What "exactly" is survives retries: before creating anything, `grant_write`
saves the bindings missing at that moment in a bookkeeping entry of its run
(`_grant_write_plan`); a retry after a failure midway takes that list, not a new
look at the cluster (which would see its own first attempt's ACLs as present),
so it creates nothing twice and its report still names all it granted. The
failback finds the report through the history: the last succeeded failover of
the flow that moved the application.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from replicator.acls import bindings
from replicator.acls.bindings import Binding
from replicator.acls.grants import write_bindings
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.statestore.runs import RunStore

GRANT_STEP, REVOKE_STEP = "grant_write", "revoke_write"
_PLAN_ENTRY = f"_{GRANT_STEP}_plan"
#: How many recent failovers the failback looks through for the one that moved an app.
_HISTORY = 200


def _as_dicts(found: list[Binding]) -> list[dict[str, str]]:
    return [asdict(b) for b in found]


def _missing(flow: FlowConfig, wanted: dict[str, list[Binding]]) -> dict[str, list[Binding]]:
    present = set(bindings.topic_acls(flow.target, "ALTER"))
    return {app: [b for b in acls if b not in present] for app, acls in wanted.items()}


def preview_grant(
    config: ReplicatorConfig, flow: FlowConfig, applications: list[str]
) -> dict[str, Any]:
    """What `grant` would create now (and what is there already), creating nothing."""
    wanted = write_bindings(config, flow, applications)
    missing = _missing(flow, wanted)
    return {
        "cluster": flow.target.alias,
        "would_grant": {app: [b.describe() for b in acls] for app, acls in missing.items()},
        "present": {
            app: [b.describe() for b in acls if b not in missing[app]]
            for app, acls in wanted.items()
        },
    }


def grant(
    store: RunStore,
    procedure_id: str,
    config: ReplicatorConfig,
    flow: FlowConfig,
    applications: list[str],
) -> dict[str, Any]:
    """Create the producers' WRITE on `flow`'s target; the report's `granted` lists,
    per application, the bindings this run created (for the failback to remove)."""
    saved = store.step(procedure_id, _PLAN_ENTRY)
    if saved is None:
        missing = _missing(flow, write_bindings(config, flow, applications))
        plan = {app: _as_dicts(acls) for app, acls in missing.items()}
        store.save_step(procedure_id, _PLAN_ENTRY, "done", {"granted": plan})
    else:
        plan = saved.result["granted"]
    granted = {app: [Binding.from_dict(b) for b in acls] for app, acls in plan.items()}
    bindings.create(flow.target, [b for acls in granted.values() for b in acls])
    return {
        "cluster": flow.target.alias,
        "granted": plan,
        "described": {app: [b.describe() for b in acls] for app, acls in granted.items()},
    }


def failover_grants(
    store: RunStore, flow: FlowConfig, applications: list[str]
) -> dict[str, tuple[str, list[Binding]]]:
    """Per application, the last succeeded failover over `flow` that moved it, and
    the bindings its `grant_write` created ([] without the step)."""
    found: dict[str, tuple[str, list[Binding]]] = {}
    for run in store.recent("failover", limit=_HISTORY):
        moved = [a for a in run.params.get("applications", []) if a in applications]
        if run.flow != flow.name or run.outcome != "succeeded" or not moved:
            continue
        procedure_id = str(run.params["procedure_id"])
        step = store.step(procedure_id, GRANT_STEP)
        granted = step.result.get("granted", {}) if step and step.state == "done" else {}
        for app in moved:
            acls = [Binding.from_dict(b) for b in granted.get(app, [])]
            found.setdefault(app, (procedure_id, acls))
    return found


def revoke(runs: RunStore, flow: FlowConfig, applications: list[str]) -> dict[str, Any]:
    """Delete, on `flow`'s target, what the failover that moved `applications` granted;
    the report names that failover and what was deleted (a retry finds them gone)."""
    grants = failover_grants(runs, flow, applications)
    wanted = sorted({b for _, acls in grants.values() for b in acls})
    deleted = bindings.delete(flow.target, wanted)
    return {
        "cluster": flow.target.alias,
        "failovers": {app: procedure_id for app, (procedure_id, _) in grants.items()},
        "revoked": [b.describe() for b in wanted],
        "deleted_now": len(deleted),
    }


def preview_revoke(runs: RunStore, flow: FlowConfig, applications: list[str]) -> dict[str, Any]:
    grants = failover_grants(runs, flow, applications)
    return {
        "cluster": flow.target.alias,
        "failovers": {app: procedure_id for app, (procedure_id, _) in grants.items()},
        "would_revoke": sorted({b.describe() for _, acls in grants.values() for b in acls}),
    }
