"""Operators of the supervision DAGs: supervise, sync, diagnose.

Each calls one `replicator` function with the configuration and state store the
hook names and the run's params; its return value (plain data) is the task's
XCom, so the UI shows what it found or did.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, Context

from replicator.config import ReplicatorConfig
from replicator.operations import (
    DEFAULT_LAG_THRESHOLD,
    DEFAULT_SAMPLE_RETENTION,
    Bounds,
    Concern,
    SupervisionError,
    diagnose,
    launcher_from_environment,
    supervise,
    sync_round,
)
from replicator.statestore import StateStore
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings
from replicator_airflow.notifiers import NOTIFICATIONS_CONN_ID, NotificationSettings, tell


class _ReplicatorOperator(BaseOperator):
    """Knows where the configuration and the state store are (the hook)."""

    template_fields = ()

    def __init__(
        self, *, replicator_conn_id: str = ReplicatorHook.default_conn_name, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.replicator_conn_id = replicator_conn_id

    def settings(self) -> ReplicatorSettings:
        return ReplicatorHook(self.replicator_conn_id).settings()

    def config(self) -> ReplicatorConfig:
        return self.settings().load_config()


class SupervisorOperator(_ReplicatorOperator):
    """Restarts dead workers (param `restart`) and fails, listing every
    problem, when a bound in the params is exceeded (`replicator.operations.supervision`).
    Workers are those of the local launcher in `$REPLICATOR_RUN_DIR` (default
    `.data/replicators`, where `make run` starts them) or, with
    `$REPLICATOR_LAUNCHER=docker`, the replicator containers of a compose project
    (`DockerLauncher`, docker/compose.supervised.yml), or with
    `$REPLICATOR_LAUNCHER=kubernetes` the replicator chart's Deployments
    (`KubernetesLauncher`, docs/kubernetes.md). Each problem opens an
    incident, told once through the notifiers of connection `notifications_conn_id`
    (`replicator_airflow.notifiers`), and once more when it is resolved."""

    ui_color = "#fdf0e6"

    def __init__(
        self, *, notifications_conn_id: str = NOTIFICATIONS_CONN_ID, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.notifications_conn_id = notifications_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        params = context["params"]
        settings = self.settings()
        notifications = NotificationSettings.load(self.notifications_conn_id)
        store = StateStore(settings.state_url)
        launcher = (
            launcher_from_environment(settings.state_url) if params.get("restart", True) else None
        )
        bounds = Bounds.from_params(params)
        hours = params.get("sample_retention_hours")
        retention = DEFAULT_SAMPLE_RETENTION if hours is None else timedelta(hours=float(hours))
        try:
            try:
                report = supervise(
                    self.config(),
                    store,
                    launcher,
                    bounds,
                    notifications.policy,
                    sample_retention=retention,
                )
            except SupervisionError as exc:
                tell(context, exc.report.notices, store, notifications, failing=exc)
                raise
            tell(context, report.notices, store, notifications)
        finally:
            store.close()
        for restarted in report.restarted:
            self.log.warning("restarted worker %s (%s)", restarted.name, restarted.where)
        for flow in report.flows:
            self.log.info("%s", flow)
        return report.as_dict()


class SyncOperator(_ReplicatorOperator):
    """One round of `concerns` ("topics", "checkpoints") for the flows in param
    `flows` (empty: all) that the state store wants running."""

    def __init__(self, *, concerns: tuple[Concern, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.concerns = concerns

    def execute(self, context: Context) -> list[dict[str, Any]]:
        store = StateStore(self.settings().state_url)
        try:
            results = sync_round(
                self.config(), store.flows, self.concerns, context["params"].get("flows") or None
            )
        finally:
            store.close()
        return [result.as_dict() for result in results]


class DiagnoseOperator(_ReplicatorOperator):
    """Why topic `topic` (param) of flow `flow` (param) is or is not replicated:
    the diagnosis is logged and returned; the task succeeds whatever the verdict."""

    def execute(self, context: Context) -> dict[str, object]:
        params = context["params"]
        flow = self.config().flow(params["flow"])
        threshold = int(params.get("lag_threshold") or DEFAULT_LAG_THRESHOLD)
        diagnosis = diagnose(flow, params["topic"], threshold)
        self.log.info("diagnosis:\n%s", diagnosis.render())
        return diagnosis.as_dict()
