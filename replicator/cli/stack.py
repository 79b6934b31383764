"""`replicator stack up|down|status|run`: the local Kafka clusters."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.localstack import DEFAULT_CLUSTERS, ClusterSpec, LocalStack
from replicator.localstack.client_config import CLIENTS_FILE
from replicator.localstack.container import (
    CONTAINER_PORT,
    ContainerBroker,
    ContainerNetwork,
    prepare,
    run_traffic,
)
from replicator.localstack.security import SECURITY_MODES, parse_mode
from replicator.localstack.stack import DEFAULT_DATA_DIR, DEFAULT_HEAP
from replicator.localstack.system import DEMO_APP_TOPIC, EmbeddedSystem, SystemOptions
from replicator.statestore import StateStore, default_state_url

_REPORT_EVERY_S = 30.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stack = commands.add_parser("stack", help="local Kafka clusters (KRaft, loopback)")
    actions = stack.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start the clusters and wait until each answers")
    _add_definition_options(up)
    up.add_argument("--timeout", type=float, default=90.0, help="start-up timeout, seconds")
    _add_security(up)
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
    _add_security(run)
    run.add_argument(
        "--replicate",
        type=Path,
        metavar="CONFIG",
        help="also run a replicator worker on CONFIG (log under the data dir); with "
        f"--security, <data dir>/{CLIENTS_FILE} unless given",
    )
    run.add_argument(
        "--demo-app",
        metavar="NAME",
        help=f"also run the DR-aware demo producer and consumer as application NAME "
        f"on {DEMO_APP_TOPIC} (needs --replicate)",
    )
    run.add_argument("--airflow", action="store_true", help="also run Airflow standalone")
    run.add_argument("--airflow-port", type=int, default=8080, help="Airflow UI port (loopback)")
    run.add_argument(
        "--state-url", help="state store URL (default: $REPLICATOR_STATE_URL or .data/state)"
    )
    run.set_defaults(handler=_run)
    _register_container_roles(actions)


def _register_container_roles(actions: argparse._SubParsersAction) -> None:
    """The roles docker-compose.yml runs from the image (see localstack.container)."""
    serve = actions.add_parser(
        "serve", help="one cluster in the foreground, on every interface (a container's broker)"
    )
    serve.add_argument("name", help="cluster name, e.g. primary")
    _add_data_dir(serve)
    serve.add_argument(
        "--port",
        type=int,
        default=CONTAINER_PORT,
        help="in-network port (controller: +1, external: +2)",
    )
    serve.add_argument("--advertise", required=True, help="its host name on the container network")
    serve.add_argument("--external", metavar="HOST:PORT", help="where the host publishes PORT+2")
    serve.add_argument("--heap", default=DEFAULT_HEAP, help="JVM heap")
    serve.set_defaults(handler=_serve)

    prepare = actions.add_parser(
        "prepare", help="one-shot set-up of a first start: flow states, demo application, topics"
    )
    prepare.add_argument("--config", type=Path, required=True, help="the replicator's config")
    prepare.add_argument("--home", required=True, help="the cluster applications run on at first")
    prepare.add_argument("--demo-app", metavar="NAME", help="register the demo application NAME")
    prepare.add_argument("--state-url", help="state store URL (default $REPLICATOR_STATE_URL)")
    prepare.set_defaults(handler=_prepare)

    traffic = actions.add_parser("traffic", help="demo traffic in the foreground until SIGTERM")
    traffic.add_argument("--bootstrap", required=True, help="bootstrap servers of the cluster")
    traffic.add_argument("--rate", type=int, default=50, help="records per second")
    traffic.add_argument("--skip", action="append", default=[], help="leave out this topic")
    traffic.set_defaults(handler=_traffic)


def _serve(args: argparse.Namespace) -> int:
    network = ContainerNetwork(advertise=args.advertise, external=args.external)
    spec = ClusterSpec(args.name, args.port)
    ContainerBroker(spec, args.data_dir, network, heap=args.heap).serve()
    return 0  # not reached: the broker replaced this process


def _prepare(args: argparse.Namespace) -> int:
    store = StateStore(args.state_url)
    try:
        prepare(load_config(args.config), store, args.home, args.demo_app)
    finally:
        store.close()
    print(f"prepared: applications start on {args.home}")
    return 0


def _traffic(args: argparse.Namespace) -> int:
    run_traffic(args.bootstrap, args.rate, frozenset(args.skip))
    return 0


def _add_security(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--security",
        type=parse_mode,
        metavar="MODE",
        help=f"secure the clusters: {' or '.join(SECURITY_MODES)} (TLS with a CA of the "
        "stack's own, SCRAM-SHA-512 or client certificates, ACLs enforced); writes "
        f"<data dir>/{CLIENTS_FILE} for the replicator. Default: PLAINTEXT, no ACLs",
    )


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
    return LocalStack(
        args.clusters or DEFAULT_CLUSTERS,
        data_dir=args.data_dir,
        heap=args.heap,
        security=args.security,
    )


def _print_table(stack: LocalStack) -> None:
    for status in stack.status():
        topics = ", ".join(status.topics) if status.topics else "-"
        print(f"{status.name:<10} {status.bootstrap:<18} {status.state:<12} topics: {topics}")


def _up(args: argparse.Namespace) -> int:
    stack = _stack_from(args)
    stack.up(timeout=args.timeout)
    _print_table(stack)
    if stack.security is not None:
        print(
            f"secured ({stack.security.mode}); the replicator's configuration, its ACLs "
            f"granted: {stack.data_dir / CLIENTS_FILE}"
        )
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


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run(args: argparse.Namespace) -> int:
    """Foreground supervisor of the embedded default; stops only what it started."""
    # SIGINT too: a shell starting us in the background would have it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupt)
    if args.security and args.replicate is None:
        args.replicate = args.data_dir / CLIENTS_FILE  # written by the stack's start
    if args.demo_app and args.replicate is None:
        raise ReplicatorError("--demo-app needs --replicate CONFIG (the app follows failovers)")
    options = SystemOptions(
        state_url=args.state_url or default_state_url(),
        work_dir=args.data_dir.resolve().parent,  # .data: beside the clusters' folder
        replicate=args.replicate,
        demo_rate=None if args.no_demo else args.rate,
        demo_app=args.demo_app,
        airflow_port=args.airflow_port if args.airflow else None,
        cluster_timeout_s=args.timeout,
    )
    system = EmbeddedSystem(_stack_from(args), options)
    try:
        system.start(progress=lambda line: print(line, flush=True))
        _print_where_to_look(system, args)
        _supervise(system)
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    finally:
        # A second Ctrl-C must not leave brokers half stopped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        report = system.stop()
        if report.ledgers is not None:
            print(f"demo application ledgers: {report.ledgers.summary()}", flush=True)
        if report.stopped_clusters:
            print(f"stopped: {', '.join(report.stopped_clusters)}", flush=True)
    return 0


def _print_where_to_look(system: EmbeddedSystem, args: argparse.Namespace) -> None:
    stack = system.stack
    print("\nLocal Kafka clusters:")
    for spec in stack.clusters:
        print(f"  {spec.name:<10} bootstrap.servers={spec.bootstrap}")
    print(f"  data and logs under {stack.data_dir}")
    if system.demo is not None:
        print(f"Demo traffic: {args.rate} records/s into {', '.join(system.demo.topics)}")
    if system.worker is not None:
        print(
            f"Replicator: --config {args.replicate}, {system.worker.where}, log {system.worker.log}"
        )
        print(f"  .venv/bin/replicator status --config {args.replicate}")
    if system.app is not None:
        app = system.app.app
        print(f"Demo application {app.name!r} on {app.topic}: ledgers in {app.data_dir}")
        print("  .venv/bin/replicator clients list")
    if system.airflow is not None:
        airflow = system.airflow
        print(f"Airflow: {airflow.url}  user {airflow.username}  password {airflow.password}")
        print(f"  DR status page: {airflow.url}/dr-status/   log: {airflow.log_file}")
        print("  failover: trigger the `failover` DAG (form: flow, mode, applications)")
    print("Status: .venv/bin/replicator stack status    Stop: Ctrl-C\n", flush=True)


def _supervise(system: EmbeddedSystem) -> None:
    """Report progress until interrupted; say so when a part stops by itself."""
    reported: set[str] = set()
    while True:
        time.sleep(_REPORT_EVERY_S)
        for problem in system.problems():
            if problem not in reported:
                print(problem, flush=True)
                reported.add(problem)
        if system.demo is not None:
            counts = system.demo.counts
            print(f"demo: {counts.produced} records delivered, {counts.failed} failed", flush=True)
