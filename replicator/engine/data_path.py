"""Which data path a flow's records take, decided once per task: the compiled data
plane (`replicator._dataplane`'s Mover, docs/dataplane.md) or the Python loop (the
reference, and the fallback where the compiled module is absent).

`replicator.data.path` chooses: `auto` (the default) takes the compiled path when
the module is built (exactly-once flows too: one transactional Mover per source
partition, `mover_transactions`) and the flow's clients carry no Python callbacks
(`stats_cb`, `oauth_cb`, ... given through the Python API: only confluent-kafka's
clients can call them); `python` always takes the Python loop; `compiled`
takes the compiled path or refuses to start, naming the key and the fix. The choice
is said in the log, the metric `replicator_data_path{flow,path}` and `replicator
status` (the worker's line).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType

from replicator import metrics
from replicator.config.client_check import compiled_refusal
from replicator.config.model import FlowConfig
from replicator.errors import ConfigError

log = logging.getLogger(__name__)

COMPILED = "compiled"
PYTHON = "python"
_KEY = "replicator.data.path"


@dataclass(frozen=True)
class DataPath:
    """The path a task's records take, and why (the Python loop), or the compiled
    module to take it with."""

    path: str
    #: What the status line says after the path: the library version, or why Python.
    detail: str
    #: The compiled module: set exactly when the path is compiled.
    module: ModuleType | None = None

    @property
    def compiled(self) -> bool:
        return self.path == COMPILED

    def describe(self) -> str:
        """How the log and `replicator status` say it."""
        if self.compiled:
            return f"records move through the compiled data plane ({self.detail})"
        return f"records move through the Python loop: {self.detail}"


def _module() -> tuple[ModuleType | None, str]:
    """The compiled module, or None and why it cannot be imported."""
    try:
        return importlib.import_module("replicator._dataplane"), ""
    except ImportError as exc:
        return None, f"replicator._dataplane is not built ({exc})"


def _refused_settings(module: ModuleType, flow: FlowConfig) -> str | None:
    """Why the compiled data plane's own librdkafka (older than confluent-kafka's, and
    built without OAuth/OIDC) cannot build the flow's source consumer or target
    producer, or None."""
    clients = (("consumer", "source consumer", flow.source.consumer),
               ("producer", "target producer", flow.target.producer))  # fmt: skip
    for kind, name, settings in clients:
        refusal = compiled_refusal(module, kind, settings)
        if refusal is not None:
            version = module.LIBRDKAFKA_VERSION
            return f"its librdkafka {version} refuses the {name}'s settings: {refusal}"
    return None


def _callbacks(flow: FlowConfig) -> list[str]:
    """The data path's client settings that are Python callables, as `consumer.X` and
    `producer.X` (the compiled clients take librdkafka's strings only)."""
    clients = {"consumer": flow.source.consumer, "producer": flow.target.producer}
    return [
        f"{kind}.{key}"
        for kind, settings in clients.items()
        for key, value in settings.items()
        if callable(value)
    ]


def choose(flow: FlowConfig, *, own_producer: bool = False) -> DataPath:
    """The path of `flow`'s records (see the module's description). `own_producer`:
    the task was composed over a producer of the caller's (tests, benchmarks), which
    only the Python loop can write with. Raises ConfigError for `compiled` when the
    compiled path cannot be taken."""
    wanted = flow.data_path
    if wanted == PYTHON:
        return DataPath(PYTHON, f"{_KEY} = python")
    why = None
    if own_producer:
        why = "the task was given a target producer of its own"
    elif callbacks := _callbacks(flow):
        why = (
            f"the flow's client settings hold Python callbacks ({', '.join(callbacks)}), "
            "which only the Python loop's clients call"
        )
    module = None
    if why is None:
        module, why = _module()
        why = why or None
    if why is None:
        assert module is not None
        why = _refused_settings(module, flow)
    if why is None:
        assert module is not None
        detail = f"librdkafka {module.LIBRDKAFKA_VERSION}"
        if flow.exactly_once:
            detail += ", exactly-once: a transactional Mover per partition"
        return DataPath(COMPILED, detail, module)
    if wanted == COMPILED:
        fix = (
            "Build the data plane (`make setup` with cargo on PATH; REPLICATOR_REQUIRE_RUST=1 "
            "makes a missing toolchain an error) or"
            if module is None
            else "Change those settings or"
        )
        raise ConfigError(
            f"flow {flow.name}: {_KEY} = compiled, but {why}. {fix} set {_KEY} = auto to let "
            "such a flow take the Python loop"
        )
    return DataPath(PYTHON, why)


def announce(flow: str, choice: DataPath) -> None:
    """Say the choice once: a log line and the gauge (1 for the path taken, 0 for
    the other)."""
    log.info("flow %s: %s", flow, choice.describe())
    other = PYTHON if choice.compiled else COMPILED
    metrics.DATA_PATH.labels(flow, choice.path).set(1)
    metrics.DATA_PATH.labels(flow, other).set(0)
