"""`replicator init`: make your own clusters and state store ready for `replicator run`
(see `replicator.init`): check every cluster and the principal's ACLs, create the
internal topics, migrate the state store, register the applications. Safe to run
again; `--dry-run` changes nothing and says what it would do. Exit 1 when a cluster
does not answer, a step fails or the principal lacks an ACL of its plan."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from replicator.config import load_config
from replicator.init import initialize
from replicator.statestore.database import STATE_URL_ENV


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init",
        help="check the clusters and ACLs, create the internal topics, migrate the state "
        "store and register the applications (safe to run again)",
    )
    init.add_argument("--config", type=Path, required=True, help="the replicator's mm2.properties")
    init.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    init.add_argument(
        "--home",
        metavar="CLUSTER",
        help="the cluster the applications run on now: flows into it start stopped and the "
        "configuration's applications are registered there (needed when it names any)",
    )
    init.add_argument(
        "--dry-run", action="store_true", help="change nothing; say what would be done"
    )
    init.add_argument("--json", action="store_true", help="print JSON for scripts")
    init.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    report = initialize(load_config(args.config), args.state_url, args.home, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        for finding in report.findings:
            print(finding.line())
        print(report.summary())
    return 0 if report.ready else 1
