"""`replicator migrate`: moving flows from MirrorMaker 2 to the replicator and back.

`--from-mm2 --dry-run` prints, per flow and partition, where MM2 stopped, where
`replicator run` will start and why (the takeover itself happens when `replicator
run` first starts on the same file, which logs the same plan). `--to-mm2` hands the
flows back: it writes where the stopped replicator got to into MM2's Connect offsets
topic, in MM2's format, so MM2 started again continues there.
"""

from __future__ import annotations

import argparse

from replicator.cli.replication import add_config
from replicator.config import load_config
from replicator.engine.migration import hand_back, takeover_plan
from replicator.errors import ReplicatorError
from replicator.operations.runner import select_flows


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = commands.add_parser(
        "migrate", help="take flows over from MirrorMaker 2 (or hand them back) without a re-copy"
    )
    add_config(migrate)
    direction = migrate.add_mutually_exclusive_group(required=True)
    direction.add_argument(
        "--from-mm2",
        action="store_true",
        help="show where `replicator run` takes each partition over from MirrorMaker 2",
    )
    direction.add_argument(
        "--to-mm2",
        action="store_true",
        help="write where the (stopped) replicator got to into MirrorMaker 2's offsets topic",
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="only print the plan; change nothing"
    )
    migrate.add_argument(
        "--offsets-topic",
        help="MirrorMaker 2's Connect offsets topic on the target, if offset.storage.topic "
        "named one (default mm2-offsets.<source alias>.internal)",
    )
    migrate.set_defaults(handler=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    flows = select_flows(load_config(args.config), args.flow)
    if args.from_mm2:
        if not args.dry_run:
            raise ReplicatorError(
                "migrate --from-mm2 only shows the plan: add --dry-run; the takeover itself "
                "happens when `replicator run` first starts on this configuration (stop "
                "MirrorMaker 2 first)"
            )
        refused = 0
        for flow in flows:
            for line in takeover_plan(flow, args.offsets_topic):
                refused += line.start is None
                print(line.describe())
        if refused:
            print(f"{refused} partitions would refuse to start (see REFUSED above)")
        return 1 if refused else 0
    for flow in flows:
        result = hand_back(flow, dry_run=args.dry_run, offsets_topic=args.offsets_topic)
        for text in result.describe():
            print(("would write: " if args.dry_run else "written: ") + text)
        if not result.positions:
            print(f"{flow.name}: no partition holds replicas of ours; nothing to hand back")
    return 0
