"""`replicator stack up|down|status|run`: the local Kafka clusters (and the roles the
compose stack runs from the image: `serve`, `prepare`, `traffic`)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType
from typing import Annotated, cast

import typer

from replicator.cli.app import EXIT_FAILED, command, exit_statuses, group, usage_error
from replicator.cli.options import JsonOption, OutputOption, StateUrlOption, flag
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.statestore import StateStore
from replicator.verification.server import DEFAULT_PORT
from replicator_lab import DEFAULT_CLUSTERS, ClusterSpec, LocalStack, StackError
from replicator_lab.client_config import CLIENTS_FILE
from replicator_lab.container import (
    CONTAINER_PORT,
    ContainerBroker,
    ContainerNetwork,
    prepare,
    run_traffic,
)
from replicator_lab.security import SECURITY_MODES, SecurityMode, parse_mode
from replicator_lab.stack import DEFAULT_DATA_DIR, DEFAULT_HEAP
from replicator_lab.system import DEMO_APP_TOPIC, EmbeddedSystem, SystemOptions

_REPORT_EVERY_S = 30.0

STACK = group("stack", "local Kafka clusters (KRaft, loopback)", "Local stack")


def _cluster_spec(text: str) -> ClusterSpec:
    try:
        return ClusterSpec.parse(text)
    except StackError as exc:
        raise usage_error(str(exc), "--cluster") from None


def _security_mode(text: str) -> SecurityMode:
    try:
        return parse_mode(text)
    except StackError as exc:
        raise usage_error(str(exc), "--security") from None


_DEFAULTS = " ".join(f"{c.name}={c.port}" for c in DEFAULT_CLUSTERS)
DataDirOption = Annotated[
    Path,
    typer.Option("--data-dir", metavar="PATH", help="storage and logs of every cluster"),
]
ClustersOption = Annotated[
    list[ClusterSpec] | None,
    typer.Option(
        "--cluster",
        parser=_cluster_spec,
        metavar="NAME=PORT",
        help=f"a cluster and its broker port (controller: PORT+1); repeat; default {_DEFAULTS}",
    ),
]
HeapOption = Annotated[str, typer.Option("--heap", metavar="SIZE", help="JVM heap of each broker")]
StartTimeoutOption = Annotated[
    float, typer.Option("--timeout", metavar="SECONDS", help="start-up timeout, seconds")
]
SecurityOption = Annotated[
    str | None,
    typer.Option(
        "--security",
        parser=_security_mode,
        metavar="MODE",
        help=f"secure the clusters: {' or '.join(SECURITY_MODES)} (TLS with a CA of the "
        "stack's own, SCRAM-SHA-512 or client certificates, ACLs enforced); writes "
        f"<data dir>/{CLIENTS_FILE} for the replicator. Default: PLAINTEXT, no ACLs",
        show_default=False,
    ),
]


def _stack(
    clusters: list[ClusterSpec] | None, data_dir: Path, heap: str, security: str | None
) -> LocalStack:
    # `security` comes parsed by _security_mode (SecurityOption).
    mode = cast("SecurityMode | None", security)
    return LocalStack(clusters or DEFAULT_CLUSTERS, data_dir=data_dir, heap=heap, security=mode)


def _print_table(stack: LocalStack) -> None:
    print_table(
        ("CLUSTER", "BOOTSTRAP", "STATE", "TOPICS"),
        [
            (s.name, s.bootstrap, s.state, ", ".join(s.topics) if s.topics else "-")
            for s in stack.status()
        ],
    )


@command(
    STACK,
    "up",
    help_="start the clusters and wait until each answers",
    epilog=exit_statuses("a cluster did not start (its log is named)", zero="all answer"),
)
def _up(
    *,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    cluster: ClustersOption = None,
    heap: HeapOption = DEFAULT_HEAP,
    timeout: StartTimeoutOption = 90.0,
    security: SecurityOption = None,
) -> int:
    stack = _stack(cluster, data_dir, heap, security)
    stack.up(timeout=timeout)
    _print_table(stack)
    if stack.security is not None:
        print(
            f"secured ({stack.security.mode}); the replicator's configuration, its ACLs "
            f"granted: {stack.data_dir / CLIENTS_FILE}"
        )
    return 0


@command(STACK, "down", help_="stop the clusters; no JVM is left behind")
def _down(
    *,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    wipe: Annotated[bool, flag("--wipe", "also delete their data and logs")] = False,
) -> int:
    stack = LocalStack.load(data_dir)
    stopped = stack.down(wipe=wipe)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


@command(STACK, "status", help_="state, address and topics of each cluster")
def _status(
    *,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    stack = LocalStack.load(data_dir)
    emit([s.to_dict() for s in stack.status()], chosen(output, json_), lambda: _print_table(stack))
    return 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@command(
    STACK,
    "run",
    help_="bring the clusters up with demo traffic; Ctrl-C stops what it started",
    epilog=exit_statuses("a part did not start", zero="stopped on request"),
)
def _run(
    *,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    cluster: ClustersOption = None,
    heap: HeapOption = DEFAULT_HEAP,
    timeout: StartTimeoutOption = 90.0,
    rate: Annotated[int, typer.Option("--rate", metavar="N", help="demo records per second")] = 50,
    no_demo: Annotated[bool, flag("--no-demo", "start the clusters only")] = False,
    security: SecurityOption = None,
    replicate: Annotated[
        Path | None,
        typer.Option(
            "--replicate",
            metavar="CONFIG",
            help="also run a replicator worker on CONFIG (log under the data dir); with "
            f"--security, <data dir>/{CLIENTS_FILE} unless given",
        ),
    ] = None,
    demo_app: Annotated[
        str | None,
        typer.Option(
            "--demo-app",
            metavar="NAME",
            help="also run the DR-aware demo producer and consumer as application NAME "
            f"on {DEMO_APP_TOPIC} (needs --replicate)",
        ),
    ] = None,
    airflow: Annotated[bool, flag("--airflow", "also run Airflow standalone")] = False,
    airflow_port: Annotated[
        int, typer.Option("--airflow-port", metavar="PORT", help="Airflow UI port (loopback)")
    ] = 8080,
    verification_port: Annotated[
        int,
        typer.Option(
            "--verification-port",
            metavar="PORT",
            help="with --airflow, a verification server on PORT (loopback) that the "
            "verify_replication DAG runs its Spark job on; 0: none (a spark-submit per run)",
        ),
    ] = DEFAULT_PORT,
    state_url_: StateUrlOption = None,
) -> int:
    """Foreground supervisor of the embedded default; stops only what it started."""
    # SIGINT too: a shell starting us in the background would have it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupt)
    if security and replicate is None:
        replicate = data_dir / CLIENTS_FILE  # written by the stack's start
    if demo_app and replicate is None:
        raise ReplicatorError("--demo-app needs --replicate CONFIG (the app follows failovers)")
    options = SystemOptions(
        state_url=state_url(state_url_),
        work_dir=data_dir.resolve().parent,  # .data: beside the clusters' folder
        replicate=replicate,
        demo_rate=None if no_demo else rate,
        demo_app=demo_app,
        airflow_port=airflow_port if airflow else None,
        verification_port=verification_port if airflow and verification_port else None,
        cluster_timeout_s=timeout,
    )
    system = EmbeddedSystem(_stack(cluster, data_dir, heap, security), options)
    try:
        system.start(progress=lambda line: print(line, flush=True))
        _print_where_to_look(system, replicate, rate)
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


def _print_where_to_look(system: EmbeddedSystem, replicate: Path | None, rate: int) -> None:
    stack = system.stack
    print()
    print_table(
        ("CLUSTER", "CLIENTS CONNECT WITH"),
        [(spec.name, f"bootstrap.servers={spec.bootstrap}") for spec in stack.clusters],
        title="Local Kafka clusters:",
    )
    print(f"  data and logs under {stack.data_dir}")
    if system.demo is not None:
        print(f"Demo traffic: {rate} records/s into {', '.join(system.demo.topics)}")
    if system.worker is not None:
        print(f"Replicator: --config {replicate}, {system.worker.where}, log {system.worker.log}")
        print(f"  .venv/bin/replicator status --config {replicate}")
        print(f"  .venv/bin/replicator flows list --config {replicate}")
    if system.app is not None:
        app = system.app.app
        print(f"Demo application {app.name!r} on {app.topic}: ledgers in {app.data_dir}")
        print("  .venv/bin/replicator clients list")
    if system.airflow is not None:
        airflow = system.airflow
        print(f"Airflow: {airflow.url}  user {airflow.username}  password {airflow.password}")
        print(f"  DR status page: {airflow.url}/dr-status/   log: {airflow.log_file}")
        print("  failover: trigger the `failover` DAG (form: flow, mode, applications)")
    if system.verification is not None:
        url = system.verification_url
        print(f"Verification server: {url}  log: {system.verification.log}")
        if replicate is not None:
            token = f"SPARK_CONNECT_AUTHENTICATE_TOKEN=$(cat {system.verification_token_file})"
            print(f"  {token} .venv/bin/replicator verify --config {replicate} --master {url}")
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


# -- the roles docker-compose.yml runs from the image (see replicator_lab.container) --


@command(
    STACK,
    "serve",
    help_="one cluster in the foreground, on every interface (a container's broker)",
    epilog=EXIT_FAILED,
)
def _serve(
    *,
    name: Annotated[str, typer.Argument(metavar="NAME", help="cluster name, e.g. primary")],
    advertise: Annotated[
        str,
        typer.Option("--advertise", metavar="HOST", help="its host name on the container network"),
    ],
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    port: Annotated[
        int,
        typer.Option(
            "--port", metavar="PORT", help="in-network port (controller: +1, external: +2)"
        ),
    ] = CONTAINER_PORT,
    external: Annotated[
        str | None,
        typer.Option("--external", metavar="HOST:PORT", help="where the host publishes PORT+2"),
    ] = None,
    heap: Annotated[str, typer.Option("--heap", metavar="SIZE", help="JVM heap")] = DEFAULT_HEAP,
) -> int:
    network = ContainerNetwork(advertise=advertise, external=external)
    ContainerBroker(ClusterSpec(name, port), data_dir, network, heap=heap).serve()
    return 0  # not reached: the broker replaced this process


@command(
    STACK,
    "prepare",
    help_="one-shot set-up of a first start: flow states, demo application, topics",
)
def _prepare(
    *,
    config: Annotated[
        Path, typer.Option("--config", metavar="PATH", help="the replicator's config")
    ],
    home: Annotated[
        str,
        typer.Option("--home", metavar="CLUSTER", help="the cluster applications run on at first"),
    ],
    demo_app: Annotated[
        str | None,
        typer.Option("--demo-app", metavar="NAME", help="register the demo application NAME"),
    ] = None,
    state_url_: StateUrlOption = None,
) -> int:
    store = StateStore(state_url(state_url_))
    try:
        prepare(load_config(config), store, home, demo_app)
    finally:
        store.close()
    print(f"prepared: applications start on {home}")
    return 0


@command(STACK, "traffic", help_="demo traffic in the foreground until SIGTERM")
def _traffic(
    *,
    bootstrap: Annotated[
        str, typer.Option("--bootstrap", metavar="SERVERS", help="bootstrap servers of the cluster")
    ],
    rate: Annotated[int, typer.Option("--rate", metavar="N", help="records per second")] = 50,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", metavar="TOPIC", help="leave out this topic")
    ] = None,
) -> int:
    run_traffic(bootstrap, rate, frozenset(skip or []))
    return 0
