"""The whole embedded default of `make run`, started and stopped as one.

Two local clusters, the replicator (a worker under `LocalProcessLauncher`, so the
`replicator_supervisor` DAG can restart it), a DR-aware demo application whose
ledgers prove a failover lost and duplicated nothing, background demo traffic,
Airflow standalone with our DAGs and the DR status page, and a verification server
(`replicator verification-server`) that the `verify_replication` DAG runs its Spark
job on (its `spark_local` connection names it). Everything shares one state store
and finds each other through the environment Airflow is given.

The verification server listens on loopback and answers only clients holding the
token made for this start (Airflow's tasks have it in their environment; a person
finds it in the 0600 file `verification-server.token` beside its log).

Airflow's approval policy (docs/failover-approval.md), unless `$REPLICATOR_APPROVAL`
is set already (then that one): `LOCAL_APPROVAL_POLICY`. The local `admin` answers
every failover, failback and full drill triggered in the UI (the form asks by
default); a script may run a planned failover or a failback unattended with
`skip_approval` (the README's curl example, bench/dr_downtime.py); an unplanned
failover and a full drill always ask.

The first cluster is where applications run at first: flows into it (the
reverse flows a failover starts) begin stopped unless the state store already
says otherwise, so a restart of `make run` resumes where the last one left off.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from replicator.config import ReplicatorConfig, load_config
from replicator.init.report import InitReport
from replicator.init.state import record_first_states
from replicator.operations.launchers import (
    DEFAULT_RUN_DIR,
    RUN_DIR_ENV,
    LaunchResult,
    LocalProcessLauncher,
)
from replicator.statestore import STATE_URL_ENV, LedgerCheck, StateStore
from replicator.verification.host import host_command
from replicator.verification.server import TOKEN_ENV, ServerProcess
from replicator_lab.airflow import AirflowStandalone
from replicator_lab.client_config import DEMO_FILE
from replicator_lab.demo import DEMO_TOPICS, DemoTraffic, ensure_topics
from replicator_lab.demo_apps import DemoApplication, DemoApplicationProcesses
from replicator_lab.private import private_umask, write_private
from replicator_lab.security import DEMO_USER
from replicator_lab.stack import LocalStack

log = logging.getLogger(__name__)

WORKER_NAME = "replicator"
#: Where the DAGs read the approval policy without a `replicator_default` connection
#: (replicator_airflow.operators.APPROVAL_ENV: the plugin, which this package never imports).
APPROVAL_ENV = "REPLICATOR_APPROVAL"
#: The demo's policy: the local admin approves; scripted planned failovers and
#: failbacks may skip the question (only when they ask to, with `skip_approval`).
LOCAL_APPROVAL_POLICY = {"approvers": ["admin"], "skip": ["planned_failover", "failback"]}
DEMO_APP_TOPIC = "demo.orders"
#: The verification DAG's Spark connection (`spark_local`), as Airflow reads it.
SPARK_CONNECTION_ENV = "AIRFLOW_CONN_SPARK_LOCAL"


@dataclass(frozen=True)
class SystemOptions:
    """What to run besides the clusters (None: not that part), and where the worker
    records, demo ledgers and Airflow home go (`work_dir`)."""

    state_url: str = field(repr=False)  # may hold the store's password
    work_dir: Path = Path(".data")
    replicate: Path | None = None
    demo_rate: int | None = 50
    demo_app: str | None = None
    airflow_port: int | None = None
    #: The DAGs that run on their schedule (None: all of them); the others run only
    #: when triggered. A test runs the supervisor alone (no hourly Spark verification).
    airflow_scheduled: frozenset[str] | None = None
    #: A verification server on this loopback port, for the `verify_replication` DAG
    #: (with Airflow) and `replicator verify --master sc://127.0.0.1:PORT`.
    verification_port: int | None = None
    cluster_timeout_s: float = 90.0
    #: Airflow's start gives up after this long without progress (it may take longer).
    airflow_timeout_s: float = 300.0


@dataclass(frozen=True)
class StopReport:
    stopped_clusters: list[str]
    ledgers: LedgerCheck | None


def prepare_state(
    config: ReplicatorConfig, store: StateStore, home: str, demo_app: str | None
) -> None:
    """What a first start records in the state store (`replicator init`'s state step),
    leaving what an earlier start (or a failover since) recorded as it is; the demo
    application is registered on `home` too. `make run` and the compose stack's
    `replicator stack prepare` call it."""
    report = InitReport(dry_run=False)
    record_first_states(config, store, home, report, dry_run=False)
    for finding in report.findings:
        log.info("%s", finding.text)
    if demo_app is not None:
        store.applications.register(demo_app, home)


class EmbeddedSystem:
    """Start everything (`start`), watch it (`problems`), stop what it started (`stop`)."""

    def __init__(self, stack: LocalStack, options: SystemOptions) -> None:
        self.stack = stack
        self.options = options
        self.launcher = LocalProcessLauncher(
            options.work_dir / DEFAULT_RUN_DIR.name, options.state_url
        )
        self.worker: LaunchResult | None = None
        self.airflow: AirflowStandalone | None = None
        self.verification: ServerProcess | None = None
        self.demo: DemoTraffic | None = None
        self.app: DemoApplicationProcesses | None = None
        self._started_clusters: list[str] = []
        self._verification_token = secrets.token_urlsafe(24)

    @property
    def verification_url(self) -> str | None:
        """The verification server's `sc://` URL, when one runs."""
        port = self.options.verification_port
        # `localhost`: PySpark sends a token in plain gRPC to no other name.
        return None if port is None else f"sc://localhost:{port}"

    @property
    def verification_token_file(self) -> Path:
        """Where a person finds the verification server's token (0600)."""
        return self.options.work_dir / "verification-server.token"

    @property
    def home(self) -> str:
        """The first cluster: where applications run until a failover."""
        return self.stack.clusters[0].name

    def start(self, progress: Callable[[str], None] | None = None) -> None:
        """Start every part; `.data` and whatever they write there (worker records and
        logs, ledgers, Airflow's home) are made under umask 077, their owner's only.
        `progress` gets a line now and then while a slow part (Airflow) starts."""
        with private_umask():
            self._start(progress)

    def _start(self, progress: Callable[[str], None] | None) -> None:
        options = self.options
        self._started_clusters = self.stack.up(timeout=options.cluster_timeout_s, keep_running=True)
        if options.verification_port is not None:  # its JVM starts while the rest does
            write_private(self.verification_token_file, self._verification_token)
            self.verification = ServerProcess(
                host_command(options.verification_port),
                options.work_dir / "verification-server.log",
                token=self._verification_token,
            ).start()
        if options.replicate is not None:
            self._prepare_state(options.replicate)
            self.worker = self.launcher.ensure_running(WORKER_NAME, options.replicate)
        if options.demo_app is not None:
            self.app = DemoApplicationProcesses(self._demo_application())
            self.app.start()
        if options.demo_rate is not None:
            skip = frozenset({DEMO_APP_TOPIC}) if options.demo_app else frozenset()
            self.demo = DemoTraffic(
                self.stack.bootstrap(self.home), options.demo_rate, skip, self._demo_client
            )
            self.demo.start()
        if options.airflow_port is not None:
            self.airflow = AirflowStandalone(
                options.work_dir / "airflow",
                options.airflow_port,
                env=self._airflow_env(),
                scheduled=options.airflow_scheduled,
            ).start(timeout=options.airflow_timeout_s, progress=progress)
        if self.verification is not None:
            self.verification.wait_started()

    def problems(self) -> list[str]:
        """What stopped by itself since the start, for the operator's console."""
        found = []
        if self.worker is not None and not self.launcher.alive(WORKER_NAME):
            found.append(
                f"replicator worker is not running (log {self.worker.log}); the "
                "replicator_supervisor DAG restarts it within a minute"
            )
        if self.app is not None:
            found += [
                f"demo {role} exited with {code}; see its log in {self.app.app.data_dir}"
                for role, code in self.app.exited().items()
            ]
        if self.airflow is not None and not self.airflow.running:
            found.append(f"Airflow standalone exited; see {self.airflow.log_file}")
        if self.verification is not None and not self.verification.running:
            found.append(f"the verification server exited; see {self.verification.log}")
        return found

    def stop(self) -> StopReport:
        """Stop in reverse order of start; each part is stopped even if another fails."""
        ledgers = None
        if self.airflow is not None:
            self.airflow.stop()
        if self.verification is not None:
            self.verification.stop()
        if self.demo is not None:
            self.demo.stop()
        if self.app is not None:
            ledgers = self.app.stop()
        if self.worker is not None:
            self.launcher.stop(WORKER_NAME)  # SIGTERM: it flushes what is in flight
        self.stack.down(self._started_clusters)
        return StopReport(self._started_clusters, ledgers)

    def _prepare_state(self, config_path: Path) -> None:
        config = load_config(config_path)
        topics = {DEMO_APP_TOPIC: DEMO_TOPICS[DEMO_APP_TOPIC]} if self.options.demo_app else {}
        store = StateStore(self.options.state_url)
        try:
            prepare_state(config, store, self.home, self.options.demo_app)
        finally:
            store.close()
        # The application's topic exists on every cluster it may fail over to.
        for spec in self.stack.clusters:
            ensure_topics(spec.bootstrap, topics, self._demo_client)

    @property
    def _demo_client(self) -> dict[str, str]:
        """The demo's credentials on a secured stack (its own principal), else none."""
        security = self.stack.security
        return security.client_settings(DEMO_USER) if security is not None else {}

    def _demo_application(self) -> DemoApplication:
        if self.options.replicate is None:
            raise ValueError("a demo application needs the replicator's configuration")
        # Secured: the same clusters and flows, as the demo's own principal.
        config = self.options.replicate
        if self.stack.security is not None:
            config = self.stack.data_dir / DEMO_FILE
        return DemoApplication(
            name=str(self.options.demo_app),
            topic=DEMO_APP_TOPIC,
            config=config.resolve(),
            state_url=self.options.state_url,
            data_dir=self.options.work_dir / "demo",
        )

    def _airflow_env(self) -> dict[str, str]:
        run_dir = self.launcher.run_dir.resolve()
        env = {STATE_URL_ENV: self.options.state_url, RUN_DIR_ENV: str(run_dir)}
        env[APPROVAL_ENV] = os.environ.get(APPROVAL_ENV) or json.dumps(LOCAL_APPROVAL_POLICY)
        if self.options.replicate is not None:
            env["REPLICATOR_CONFIG"] = str(self.options.replicate.resolve())
        if self.options.verification_port is not None:
            env[SPARK_CONNECTION_ENV] = json.dumps(
                {
                    "conn_type": "spark",
                    "host": "sc://localhost",
                    "port": self.options.verification_port,
                }
            )
            env[TOKEN_ENV] = self._verification_token
        return env
