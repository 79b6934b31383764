"""`replicator init`: make a configuration's clusters and state store ready for a
first `replicator run`, on the user's own clusters, and say what it found.

One pass, in order, each part in its own module:

1. `clusters`: every cluster answers, with the configuration's own clients. One that
   does not answer at all (an outage) is `unreachable`: the steps below skip it and do
   the rest, and the report is partial (`replicator init` exits 3, or 0 with
   `--allow-unreachable`); one that refuses the client (authentication, TLS) failed.
2. `topics`: the replicator's internal topics exist (created if missing).
3. `permissions`: the least-privilege ACL plan (`replicator acls plan`) checked
   against what each cluster's authorizer says the principal may do: reported rule by
   rule (granted, missing, or not checkable yet and why), never assumed.
4. `state`: the state store's schema is current (migrated if not); flows into the
   cluster the applications run on start stopped; the configured applications are
   registered there.

Safe to run again: what exists is left as it is (an application keeps its active
cluster, a flow its state). With `dry_run`, nothing is created, migrated or
registered: the report says what would be.
"""

from __future__ import annotations

from replicator.config.model import ReplicatorConfig
from replicator.init.clusters import check_clusters
from replicator.init.permissions import check_permissions
from replicator.init.report import Finding, InitReport
from replicator.init.state import prepare_state
from replicator.init.topics import ensure_internal_topics

__all__ = ["Finding", "InitReport", "initialize"]


def initialize(
    config: ReplicatorConfig, state_url: str | None, home: str | None, *, dry_run: bool
) -> InitReport:
    """Run every step on `config` (see the module doc) and return what each found.
    Unreachable clusters are reported and skipped by the later cluster steps."""
    report = InitReport(dry_run)
    reachable = check_clusters(config, report)
    ensure_internal_topics(config, reachable, report, dry_run=dry_run)
    check_permissions(config, reachable, report)
    prepare_state(config, state_url, home, report, dry_run=dry_run)
    return report
