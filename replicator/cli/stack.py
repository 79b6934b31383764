"""`replicator stack up|down|status|run`: the local Kafka clusters."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from replicator.localstack import DEFAULT_CLUSTERS, ClusterSpec, LocalStack
from replicator.localstack.demo import DemoTraffic
from replicator.localstack.stack import DEFAULT_DATA_DIR, DEFAULT_HEAP

_REPORT_EVERY_S = 30.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stack = commands.add_parser("stack", help="local Kafka clusters (KRaft, loopback)")
    actions = stack.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start the clusters and wait until each answers")
    _add_definition_options(up)
    up.add_argument("--timeout", type=float, default=90.0, help="start-up timeout, seconds")
    up.set_defaults(handler=_up)

    down = actions.add_parser("down", help="stop the clusters; no JVM is left behind")
    _add_data_dir(down)
    down.add_argument("--wipe", action="store_true", help="also delete their data and logs")
    down.set_defaults(handler=_down)

    status = actions.add_parser("status", help="state, address and topics of each cluster")
    _add_data_dir(status)
    status.add_argument("--json", action="store_true", help="print JSON for scripts")
    status.set_defaults(handler=_status)

    run = actions.add_parser(
        "run", help="bring the clusters up with demo traffic; Ctrl-C stops what it started"
    )
    _add_definition_options(run)
    run.add_argument("--timeout", type=float, default=90.0, help="start-up timeout, seconds")
    run.add_argument("--rate", type=int, default=50, help="demo records per second")
    run.add_argument("--no-demo", action="store_true", help="start the clusters only")
    run.add_argument(
        "--replicate",
        type=Path,
        metavar="CONFIG",
        help="also run `replicator run --config CONFIG` (log in the data dir)",
    )
    run.set_defaults(handler=_run)


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"storage and logs of every cluster (default {DEFAULT_DATA_DIR})",
    )


def _add_definition_options(parser: argparse.ArgumentParser) -> None:
    _add_data_dir(parser)
    defaults = " ".join(f"{c.name}={c.port}" for c in DEFAULT_CLUSTERS)
    parser.add_argument(
        "--cluster",
        dest="clusters",
        action="append",
        type=ClusterSpec.parse,
        metavar="NAME=PORT",
        help=f"a cluster and its broker port (controller: PORT+1); repeat; default {defaults}",
    )
    parser.add_argument("--heap", default=DEFAULT_HEAP, help="JVM heap of each broker")


def _stack_from(args: argparse.Namespace) -> LocalStack:
    return LocalStack(args.clusters or DEFAULT_CLUSTERS, data_dir=args.data_dir, heap=args.heap)


def _print_table(stack: LocalStack) -> None:
    for status in stack.status():
        topics = ", ".join(status.topics) if status.topics else "-"
        print(f"{status.name:<10} {status.bootstrap:<18} {status.state:<12} topics: {topics}")


def _up(args: argparse.Namespace) -> int:
    stack = _stack_from(args)
    stack.up(timeout=args.timeout)
    _print_table(stack)
    return 0


def _down(args: argparse.Namespace) -> int:
    stack = LocalStack.load(args.data_dir)
    stopped = stack.down(wipe=args.wipe)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


def _status(args: argparse.Namespace) -> int:
    stack = LocalStack.load(args.data_dir)
    if args.json:
        json.dump([s.to_dict() for s in stack.status()], sys.stdout, indent=2)
        print()
    else:
        _print_table(stack)
    return 0


def _start_replicator(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """The replicator as its own process, as in production, logging to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run(args: argparse.Namespace) -> int:
    """Foreground supervisor of the embedded default; stops only what it started."""
    # SIGINT too: a shell starting us in the background would have it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupt)
    stack = _stack_from(args)
    started: list[str] = []
    demo: DemoTraffic | None = None
    replicator: subprocess.Popen[bytes] | None = None
    replicator_log = stack.data_dir / "replicator.log"
    try:
        started = stack.up(timeout=args.timeout, keep_running=True)
        if not args.no_demo:
            demo = DemoTraffic(stack.bootstrap(stack.clusters[0].name), rate=args.rate)
            demo.start()
        if args.replicate is not None:
            replicator = _start_replicator(args.replicate, replicator_log)
        _print_where_to_look(stack, args, replicator_log)
        _supervise(demo, replicator)
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    finally:
        # A second Ctrl-C must not leave brokers half stopped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if replicator is not None and replicator.poll() is None:
            replicator.terminate()  # SIGTERM: it flushes what is in flight, then exits
            replicator.wait(60)
        if demo is not None:
            demo.stop()
        stack.down(started)
        if started:
            print(f"stopped: {', '.join(started)}", flush=True)
    return 0


def _print_where_to_look(stack: LocalStack, args: argparse.Namespace, replicator_log: Path) -> None:
    print("\nLocal Kafka clusters:")
    for spec in stack.clusters:
        print(f"  {spec.name:<10} bootstrap.servers={spec.bootstrap}")
    print(f"  data and logs under {stack.data_dir}")
    if not args.no_demo:
        print(f"Demo traffic: {args.rate} records/s into {stack.clusters[0].name}")
    if args.replicate is not None:
        print(f"Replicator: --config {args.replicate}, log {replicator_log}")
        print(f"  .venv/bin/replicator status --config {args.replicate}")
    print("Status: .venv/bin/replicator stack status    Stop: Ctrl-C\n", flush=True)


def _supervise(demo: DemoTraffic | None, replicator: subprocess.Popen[bytes] | None) -> None:
    """Report progress until interrupted; say so when the replicator exits."""
    while True:
        time.sleep(_REPORT_EVERY_S)
        if replicator is not None and replicator.poll() is not None:
            print(f"replicator exited with {replicator.returncode}; see its log", flush=True)
            replicator = None
        if demo is not None:
            counts = demo.counts
            print(f"demo: {counts.produced} records delivered, {counts.failed} failed", flush=True)
