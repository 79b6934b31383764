"""`KubernetesLauncher`: replicator workers as Deployments of a Kubernetes namespace.

A worker is a Deployment of the Helm chart (deploy/helm/replicator/) in one namespace,
selected by the chart's labels (`app.kubernetes.io/name=replicator`,
`app.kubernetes.io/component=engine`; narrow it to one release with
`app.kubernetes.io/instance=<release>`). The chart owns the Deployment, its ConfigMap and
its command; the launcher only changes how many replicas it has and rolls its pods:

- `alive`: the Deployment wants replicas and has at least one available (its status, as
  the Deployment controller reports it from the kubelets' pod readiness);
- `start`: clears the launcher's "stopped" mark, rolls the pods (the pod template's
  `kubectl.kubernetes.io/restartedAt` annotation, as `kubectl rollout restart` does) and
  scales to the wanted replicas (the current ones, or those it had when `stop` took it
  down, or the launcher's default);
- `stop`: marks the Deployment stopped (annotations: when, and how many replicas it had),
  then scales it to 0; never deletes it. A stopped Deployment is no longer a managed
  worker (`workers` leaves it out), so the supervisor does not start it again, as it does
  not start again a local worker or a container that `stop` removed;
- `scale` and `restart`: the same two steps on their own.

Replicas change through the `scale` subresource and everything else is a merge patch of
the Deployment, so the chart's least-privilege launcher Role (`launcher.enabled`: get,
list, watch, patch, update on `deployments` and `deployments/scale`) is all it needs.

A Deployment scaled to 0 by someone else (`kubectl scale --replicas=0`) is not marked: it is
a dead worker, and the supervisor's `restart_dead` brings it back if its flows are wanted.
One that wants replicas but has none available is dead too, unless its last (re)start is
younger than `start_grace_s`: pods take a while to pass their readiness probe, and a
rollout every supervisor run would only make it worse.

Connection: in a pod (`$KUBERNETES_SERVICE_HOST` set), its ServiceAccount's token
(`kubernetes.config.load_incluster_config`); elsewhere the kubeconfig (`$KUBECONFIG` or
~/.kube/config, context `$REPLICATOR_KUBE_CONTEXT` or the current one). The token stays in
the client's configuration: no message, log line or repr of this module holds it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from replicator.errors import ReplicatorError
from replicator.operations.launchers import (
    _STOP_TIMEOUT_S,
    Action,
    Launcher,
    LaunchResult,
    Worker,
    config_option,
)

#: The namespace of the replicator Deployments (the chart's release namespace).
NAMESPACE_ENV = "REPLICATOR_KUBE_NAMESPACE"
#: Label selector of the worker Deployments.
SELECTOR_ENV = "REPLICATOR_KUBE_SELECTOR"
#: kubeconfig context (outside a pod); default: the kubeconfig's current context.
CONTEXT_ENV = "REPLICATOR_KUBE_CONTEXT"
#: Replicas `start` gives a Deployment at 0 when nothing else says how many it had.
REPLICAS_ENV = "REPLICATOR_KUBE_REPLICAS"
#: Seconds after a (re)start during which a Deployment without available pods is
#: starting, not dead.
START_GRACE_ENV = "REPLICATOR_KUBE_START_GRACE_S"
#: The chart's selector labels, less the release (`app.kubernetes.io/instance`).
DEFAULT_SELECTOR = "app.kubernetes.io/name=replicator,app.kubernetes.io/component=engine"
DEFAULT_REPLICAS = 1
DEFAULT_START_GRACE_S = 180.0
#: What `kubectl rollout restart` sets on the pod template.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
#: The launcher's marks on a Deployment it stopped: when, and the replicas it had.
STOPPED_AT = "replicator.dr/stopped-at"
STOPPED_REPLICAS = "replicator.dr/stopped-replicas"
#: The replicas the Helm chart asks for (deploy/helm/replicator, the Deployment's
#: annotation): given back to a Deployment someone else scaled to 0.
CHART_REPLICAS = "replicator.dr/replicas"
#: Where a pod finds its ServiceAccount's namespace.
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: The container of the chart's pod that runs `replicator run --config FILE`.
CONTAINER = "replicator"
_MERGE_PATCH = "application/merge-patch+json"
_REQUEST_TIMEOUT_S = 30
# A DNS-1123 subdomain, what Kubernetes accepts as a Deployment's name.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: The RBAC the chart's launcher Role grants, for the fix of a refusal.
_RBAC_FIX = (
    "install the replicator chart in that namespace with launcher.enabled=true and "
    "launcher.serviceAccount.name (and .namespace) naming the ServiceAccount this process "
    f"runs as (Airflow's), and point ${NAMESPACE_ENV} at the chart's release namespace"
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KubernetesSettings:
    """What the launcher reads from the environment (`from_environment`)."""

    namespace: str
    selector: str = DEFAULT_SELECTOR
    context: str | None = None
    kubeconfig: str | None = None
    in_cluster: bool = False
    default_replicas: int = DEFAULT_REPLICAS
    start_grace_s: float = DEFAULT_START_GRACE_S

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] = os.environ, pod_namespace: Path = POD_NAMESPACE_FILE
    ) -> KubernetesSettings:
        in_cluster = bool(environ.get("KUBERNETES_SERVICE_HOST"))
        context = environ.get(CONTEXT_ENV) or None
        kubeconfig = environ.get("KUBECONFIG") or None
        if in_cluster and context:
            raise ReplicatorError(
                f"${CONTEXT_ENV}={context!r} names a kubeconfig context, but this process runs "
                "in a pod and uses its ServiceAccount; unset it"
            )
        namespace = environ.get(NAMESPACE_ENV, "").strip()
        if not namespace and in_cluster and pod_namespace.is_file():
            namespace = pod_namespace.read_text().strip()
        if not namespace and not in_cluster:
            namespace = _kubeconfig_namespace(kubeconfig, context)
        if not namespace:
            raise ReplicatorError(
                f"the Kubernetes launcher needs a namespace: set ${NAMESPACE_ENV} to the "
                "replicator chart's release namespace (e.g. kafka-dr)"
            )
        if not _NAME.fullmatch(namespace):
            raise ReplicatorError(
                f"${NAMESPACE_ENV}={namespace!r} is not a Kubernetes namespace name; use "
                "lower-case letters, digits and '-' (e.g. kafka-dr)"
            )
        selector = environ.get(SELECTOR_ENV, "").strip() or DEFAULT_SELECTOR
        return cls(
            namespace=namespace,
            selector=selector,
            context=context,
            kubeconfig=kubeconfig,
            in_cluster=in_cluster,
            default_replicas=_positive_int(environ, REPLICAS_ENV, DEFAULT_REPLICAS),
            start_grace_s=_seconds(environ, START_GRACE_ENV, DEFAULT_START_GRACE_S),
        )

    def api_client(self) -> k8s.ApiClient:
        """A client of the API server: the pod's ServiceAccount, else the kubeconfig."""
        configuration = k8s.Configuration()
        try:
            if self.in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                k8s_config.load_kube_config(
                    config_file=self.kubeconfig,
                    context=self.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except k8s_config.ConfigException as exc:
            where = "the pod's ServiceAccount" if self.in_cluster else _kubeconfig_name(self)
            raise ReplicatorError(
                f"the Kubernetes launcher cannot load its credentials from {where}: {exc}; "
                + (
                    "mount the ServiceAccount token (automountServiceAccountToken)"
                    if self.in_cluster
                    else "set $KUBECONFIG to a kubeconfig file (and "
                    f"${CONTEXT_ENV} to one of its contexts), or run in a pod"
                )
            ) from exc
        return k8s.ApiClient(configuration)


class KubernetesLauncher(Launcher):
    """The Deployments of `namespace` selected by `selector`, as workers."""

    def __init__(
        self,
        namespace: str,
        api_client: k8s.ApiClient,
        *,
        selector: str = DEFAULT_SELECTOR,
        default_replicas: int = DEFAULT_REPLICAS,
        start_grace_s: float = DEFAULT_START_GRACE_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if default_replicas < 1:
            raise ReplicatorError(
                f"default_replicas={default_replicas}: a started worker needs at least 1"
            )
        self.namespace = namespace
        self.selector = selector
        self.default_replicas = default_replicas
        self.start_grace_s = start_grace_s
        self._apps = k8s.AppsV1Api(api_client)
        self._server = str(api_client.configuration.host)
        self._clock = clock

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> KubernetesLauncher:
        settings = KubernetesSettings.from_environment(environ)
        return cls.from_settings(settings)

    @classmethod
    def from_settings(cls, settings: KubernetesSettings) -> KubernetesLauncher:
        return cls(
            settings.namespace,
            settings.api_client(),
            selector=settings.selector,
            default_replicas=settings.default_replicas,
            start_grace_s=settings.start_grace_s,
        )

    def __repr__(self) -> str:  # the client's configuration (its token) stays out
        return (
            f"KubernetesLauncher(server={self._server!r}, namespace={self.namespace!r}, "
            f"selector={self.selector!r})"
        )

    # -- the Launcher interface -------------------------------------------------------

    def workers(self) -> list[Worker]:
        """The selected Deployments, less those the launcher stopped."""
        return [
            _worker(deployment, self.namespace)
            for deployment in self._list()
            if STOPPED_AT not in _annotations(deployment)
        ]

    def alive(self, name: str) -> bool:
        deployment = self._find(name)
        return deployment is not None and _available(deployment) >= 1

    def start(self, name: str, config: Path, replicas: int | None = None) -> LaunchResult:
        """Roll worker `name`'s pods and scale it to `replicas` (default: what it has,
        else what it had when stopped, else `default_replicas`). `config` must be the
        one its pods run: the chart's ConfigMap holds it, not the launcher."""
        deployment = self._existing(name)
        runs = _config_of(deployment)
        if PurePosixPath(str(config)) != PurePosixPath(str(runs)):
            raise ReplicatorError(
                f"Deployment {self.namespace}/{name} runs --config {runs}, not {config}: the "
                "launcher cannot change a pod's configuration; change the chart's `config` "
                "value (helm upgrade --set-file config=mm2.properties) instead"
            )
        current = _replicas(deployment)
        wanted = replicas if replicas is not None else self._wanted_replicas(deployment)
        _check_replicas(name, wanted, minimum=1)
        self._patch(name, _restart_patch(self._now(), clear_stop=True), "restart")
        if wanted != current:
            self._scale(name, wanted)
        action: Action = "started" if current == 0 else "restarted"
        log.info(
            "%s worker %s (Deployment %s/%s, %d replicas)",
            action,
            name,
            self.namespace,
            name,
            wanted,
        )
        return LaunchResult(name, action, runs, self._where(name, wanted))

    def stop(self, name: str, timeout_s: float = _STOP_TIMEOUT_S) -> bool:
        """Mark the Deployment stopped and scale it to 0; True when it had an available
        replica. Returns once the API server stored it: the pods get the chart's
        terminationGracePeriodSeconds to flush (`timeout_s` is not used here)."""
        deployment = self._find(name)
        if deployment is None:
            return False
        was_alive = _available(deployment) >= 1
        replicas = _replicas(deployment)
        if STOPPED_AT not in _annotations(deployment):
            remembered = self._wanted_replicas(deployment)
            marks = {STOPPED_AT: _timestamp(self._now()), STOPPED_REPLICAS: str(remembered)}
            self._patch(name, {"metadata": {"annotations": marks}}, "mark as stopped")
        if replicas != 0:
            self._scale(name, 0)
        log.info("stopped worker %s (Deployment %s/%s scaled to 0)", name, self.namespace, name)
        return was_alive

    def restart_dead(self, wanted: Callable[[Worker], bool]) -> list[LaunchResult]:
        """Start again every managed Deployment that is dead and `wanted`; one that
        wants replicas and was (re)started less than `start_grace_s` ago is starting,
        and left alone."""
        results = []
        for deployment in self._list():
            if STOPPED_AT in _annotations(deployment) or _available(deployment) >= 1:
                continue
            worker = _worker(deployment, self.namespace)
            if _replicas(deployment) >= 1 and self._starting(deployment):
                log.info("worker %s has no available replica yet; still starting", worker.name)
                continue
            if wanted(worker):
                results.append(self.start(worker.name, worker.config))
        return results

    # -- what Deployments have beyond processes ---------------------------------------

    def scale(self, name: str, replicas: int) -> LaunchResult:
        """Scale worker `name` to `replicas` (at least 1; `stop` takes it to 0) through
        the `scale` subresource. A worker the launcher stopped is managed again."""
        _check_replicas(name, replicas, minimum=1)
        deployment = self._existing(name)
        if STOPPED_AT in _annotations(deployment):
            self._patch(name, {"metadata": {"annotations": _cleared()}}, "clear the stop mark")
        self._scale(name, replicas)
        return LaunchResult(name, "running", _config_of(deployment), self._where(name, replicas))

    def restart(self, name: str) -> LaunchResult:
        """Roll worker `name`'s pods (`kubectl rollout restart`): new pods replace the old
        ones as the Deployment's strategy says; the replicas stay."""
        deployment = self._existing(name)
        replicas = _replicas(deployment)
        if replicas == 0:
            raise ReplicatorError(
                f"Deployment {self.namespace}/{name} has 0 replicas: nothing to restart; "
                "start it (the launcher's start, or scale) instead"
            )
        self._patch(name, _restart_patch(self._now(), clear_stop=False), "restart")
        return LaunchResult(name, "restarted", _config_of(deployment), self._where(name, replicas))

    # -- the API ----------------------------------------------------------------------

    def _list(self) -> list[Any]:
        with self._api(f"list the Deployments selected by {self.selector!r}", "list"):
            found = self._apps.list_namespaced_deployment(
                self.namespace, label_selector=self.selector, _request_timeout=_REQUEST_TIMEOUT_S
            )
        return sorted(found.items, key=lambda d: d.metadata.name)

    def _find(self, name: str) -> Any | None:
        """Deployment `name` if the selector selects it (None when there is none)."""
        _checked(name)
        with self._api(f"look up Deployment {name}", "list"):
            found = self._apps.list_namespaced_deployment(
                self.namespace,
                label_selector=self.selector,
                field_selector=f"metadata.name={name}",
                _request_timeout=_REQUEST_TIMEOUT_S,
            )
        return found.items[0] if found.items else None

    def _existing(self, name: str) -> Any:
        deployment = self._find(name)
        if deployment is not None:
            return deployment
        # Listed by name, not read: the launcher's Role may get only its own release's
        # Deployment, and list any (a list by name cannot be narrowed by the Role).
        with self._api(f"look up Deployment {name}", "list"):
            exists = bool(
                self._apps.list_namespaced_deployment(
                    self.namespace,
                    field_selector=f"metadata.name={name}",
                    _request_timeout=_REQUEST_TIMEOUT_S,
                ).items
            )
        if exists:
            raise ReplicatorError(
                f"Deployment {self.namespace}/{name} is not a replicator worker: the launcher's "
                f"selector {self.selector!r} does not select it; name a Deployment of the "
                f"replicator chart, or set ${SELECTOR_ENV}"
            )
        raise ReplicatorError(
            f"Deployment {self.namespace}/{name} does not exist (selector {self.selector!r}); "
            "the replicator chart creates it (helm install), the launcher only scales and "
            "restarts it"
        )

    def _scale(self, name: str, replicas: int) -> None:
        with self._api(f"scale Deployment {name} to {replicas}", "patch", "deployments/scale"):
            self._apps.patch_namespaced_deployment_scale(
                name,
                self.namespace,
                {"spec": {"replicas": replicas}},
                _content_type=_MERGE_PATCH,
                _request_timeout=_REQUEST_TIMEOUT_S,
            )

    def _patch(self, name: str, body: dict[str, Any], what: str) -> None:
        with self._api(f"{what} Deployment {name}", "patch"):
            self._apps.patch_namespaced_deployment(
                name,
                self.namespace,
                body,
                _content_type=_MERGE_PATCH,
                _request_timeout=_REQUEST_TIMEOUT_S,
            )

    @contextmanager
    def _api(self, what: str, verb: str, resource: str = "deployments") -> Iterator[None]:
        """The API server's refusals, and a server that does not answer, as one line
        naming the namespace, the status and the fix."""
        try:
            yield
        except ApiException as exc:
            raise ReplicatorError(
                api_error(exc, what, self.namespace, self._server, verb=verb, resource=resource)
            ) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ReplicatorError(
                f"the Kubernetes API server at {self._server} did not answer ({what} in "
                f"namespace {self.namespace}: {type(exc).__name__}); check the kubeconfig's "
                "server (or the pod's network), or unset $REPLICATOR_LAUNCHER"
            ) from exc

    # -- helpers ----------------------------------------------------------------------

    def _now(self) -> datetime:
        return self._clock()

    def _where(self, name: str, replicas: int) -> str:
        return f"deployment {self.namespace}/{name} ({replicas} replicas)"

    def _wanted_replicas(self, deployment: Any) -> int:
        annotations = _annotations(deployment)
        return (
            _replicas(deployment)
            or _remembered(annotations, STOPPED_REPLICAS)
            or _remembered(annotations, CHART_REPLICAS)
            or self.default_replicas
        )

    def _starting(self, deployment: Any) -> bool:
        since = _started_at(deployment)
        return self._now() - since < timedelta(seconds=self.start_grace_s)


def api_error(
    exc: ApiException,
    what: str,
    namespace: str,
    server: str,
    *,
    verb: str = "get",
    resource: str = "deployments",
) -> str:
    """One line for a refusal of the API server: what was done, where, the status and
    reason the server gave, and the fix."""
    message = _server_message(exc)
    status = exc.status or 0
    head = f"Kubernetes API {server}: {what} in namespace {namespace}"
    if status == 0:  # the client's own failure (TLS): the reason holds it
        reason = " ".join(str(exc.reason or "").split())
        return (
            f"{head} failed before an answer ({reason}); check the kubeconfig's server and "
            "certificate authority"
        )
    said = f"{status} {exc.reason or ''}".strip() + (f": {message}" if message else "")
    if status == 401:
        fix = (
            "the credentials were not accepted (an expired or revoked token?): renew the "
            "kubeconfig's token, or check the pod's ServiceAccount token mount"
        )
    elif status == 403:
        fix = f"the launcher's identity may not {verb} {resource} (group apps) there: " + _RBAC_FIX
    elif status == 404:
        fix = (
            f"namespace {namespace} or the object does not exist; set ${NAMESPACE_ENV} to the "
            "replicator chart's release namespace"
        )
    elif status == 409:
        fix = "another client changed it at the same moment: run it again"
    elif status in {400, 422}:
        fix = "the API server refused the change as invalid: report it with this message"
    else:
        fix = "the API server failed: look at its health (kubectl get --raw /readyz) and retry"
    return f"{head} answered {said}; {fix}"


def _server_message(exc: ApiException) -> str:
    """The `message` of the API server's Status object, else nothing."""
    body = exc.body
    if not body:
        return ""
    try:
        status = json.loads(body)
    except ValueError:
        return ""
    return " ".join(str(status.get("message", "")).split()) if isinstance(status, dict) else ""


def _worker(deployment: Any, namespace: str) -> Worker:
    name = deployment.metadata.name
    return Worker(
        name=name,
        config=_config_of(deployment),
        started_at=_started_at(deployment),
        where=(
            f"deployment {namespace}/{name} "
            f"({_available(deployment)}/{_replicas(deployment)} available)"
        ),
    )


def _config_of(deployment: Any) -> Path:
    """The `--config` of the pod's `replicator run` command."""
    containers = deployment.spec.template.spec.containers or []
    ours = [c for c in containers if c.name == CONTAINER] or containers[:1]
    command = [*(ours[0].command or []), *(ours[0].args or [])] if ours else []
    config = config_option(command)
    if config is not None:
        return config
    raise ReplicatorError(
        f"Deployment {deployment.metadata.namespace}/{deployment.metadata.name} runs "
        f"{' '.join(command)!r}, not `replicator run --config FILE`: it is not a replicator "
        f"worker; narrow ${SELECTOR_ENV} to the replicator chart's labels"
    )


def _annotations(deployment: Any) -> dict[str, str]:
    return dict(deployment.metadata.annotations or {})


def _replicas(deployment: Any) -> int:
    replicas = deployment.spec.replicas
    return 1 if replicas is None else int(replicas)  # unset means 1 to the API server


def _available(deployment: Any) -> int:
    """Available replicas, when the Deployment wants any (a status not yet caught up
    with a scale to 0 does not count)."""
    if _replicas(deployment) == 0 or deployment.status is None:
        return 0
    return int(deployment.status.available_replicas or 0)


def _remembered(annotations: Mapping[str, str], key: str) -> int:
    """The replicas annotation `key` records: what `stop` saw, or what the chart asks
    for (0 when none or unreadable: the next choice applies)."""
    value = annotations.get(key, "")
    return int(value) if value.isdigit() else 0


def _started_at(deployment: Any) -> datetime:
    """The last restart the pod template records, else the Deployment's creation."""
    created = deployment.metadata.creation_timestamp or datetime.fromtimestamp(0, UTC)
    template = deployment.spec.template.metadata
    restarted = ((template.annotations or {}) if template else {}).get(RESTARTED_AT)
    if restarted:
        try:
            stamp = datetime.fromisoformat(restarted.replace("Z", "+00:00"))
        except ValueError:
            return created
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return max(stamp, created)
    return created


def _restart_patch(now: datetime, clear_stop: bool) -> dict[str, Any]:
    patch: dict[str, Any] = {
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: _timestamp(now)}}}}
    }
    if clear_stop:
        patch["metadata"] = {"annotations": _cleared()}
    return patch


def _cleared() -> dict[str, None]:
    """A merge patch's way of removing the stop marks (absent ones are no error)."""
    return {STOPPED_AT: None, STOPPED_REPLICAS: None}


def _timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC, as kubectl writes restartedAt, with microseconds: two restarts
    within a second must still change the pod template (kubectl's second would not)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name) or len(name) > 253:
        raise ReplicatorError(
            f"worker name {name!r} is not a Kubernetes Deployment name; use lower-case "
            "letters, digits, '-' and '.' (e.g. dr-replicator)"
        )
    return name


def _check_replicas(name: str, replicas: int, minimum: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < minimum:
        raise ReplicatorError(
            f"worker {name}: replicas={replicas!r}; give a whole number of at least {minimum}"
            + (" (stop the worker to take it to 0)" if minimum == 1 else "")
        )


def _positive_int(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ReplicatorError(f"${key}={raw!r} is not a whole number of at least 1; e.g. {key}=2")
    return int(raw)


def _seconds(environ: Mapping[str, str], key: str, default: float) -> float:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise ReplicatorError(f"${key}={raw!r} is not a number of seconds (0 or more); e.g. 180")
    return value


def _kubeconfig_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context (`context`, else the current one), as
    kubectl uses it; empty when it sets none or there is no kubeconfig."""
    try:
        contexts, current = k8s_config.list_kube_config_contexts(kubeconfig)
    except (k8s_config.ConfigException, OSError):
        return ""  # the namespace error names the variable; loading names the file
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    return str(((chosen or {}).get("context") or {}).get("namespace") or "")


def _kubeconfig_name(settings: KubernetesSettings) -> str:
    path = settings.kubeconfig or "~/.kube/config"
    return f"kubeconfig {path}" + (f" (context {settings.context})" if settings.context else "")
