"""Each client of a flow built once at load time, so that librdkafka's own checks of
its settings (combinations such as `max.poll.interval.ms` below `session.timeout.ms`,
or `max.in.flight` above 5 with idempotence) fail the load, naming the keys the user
wrote, instead of every worker when it starts.

The clients are built without brokers (no connection is ever made) and without the
TLS settings and SASL settings that name files (those may exist only where the
replicator runs; librdkafka checks them when a worker connects), with the settings
the engine fixes for that client (`keys.CLIENT_RULES`), and closed at once. The
security protocol and SASL mechanism are checked: a GSSAPI configuration against a
librdkafka built without Kerberos support fails the load, naming the key.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Mapping
from types import ModuleType
from typing import cast

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from replicator.errors import ConfigError

_log = logging.getLogger(__name__)
_NAME = re.compile(r"`([a-z_.]+)`")
_PROBE_GROUP = "replicator-config-check"
#: SASL settings that name files (a keytab, a key): they may exist only where the
#: replicator runs. The others are checked: a mechanism this librdkafka was not built
#: with (GSSAPI without Kerberos support) is refused at load, not by every worker.
_FILE_SUFFIXES = (".keytab", ".file", ".location", ".cmd")


class _DebugLog:
    """librdkafka's log lines of a probe client (e.g. "no bootstrap.servers") at DEBUG."""

    def log(self, level: int, message: str, *args: object) -> None:
        _log.debug(message, *args)


_LOGGER = _DebugLog()


def _shown(name: str, config: Mapping[str, str], names: Mapping[str, str]) -> str:
    """A setting named in librdkafka's refusal, as the user can find it."""
    if name in names:
        return f"{names[name]}={config[name]}"
    if name in config:
        return f"{name}={config[name]} (set by the replicator)"
    return f"{name} (librdkafka's default)"


def check_client(
    kind: str,
    config: Mapping[str, str],
    names: Mapping[str, str],
    what: str,
    data_path: bool = False,
) -> None:
    """Build the `kind` client of `config` once; ConfigError naming the keys (from `names`,
    librdkafka name -> key as written) if librdkafka refuses its settings. `what` says
    which client it is (e.g. "the source consumer of flow A->B"). `data_path`: a client
    the compiled data plane must build (a flow's source consumer or target producer
    under `replicator.data.path = compiled`), checked by the data plane's own librdkafka
    too (it links its own version); under `auto` a flow whose settings it refuses takes
    the Python loop instead (`engine.data_path`)."""
    probe = probe_settings(config)
    try:
        if kind == "consumer":
            Consumer({"group.id": _PROBE_GROUP, **probe, "logger": _LOGGER}).close()
        elif kind == "producer":
            Producer({**probe, "logger": _LOGGER}).flush(0)
        else:  # confluent-kafka's stubs type an admin client's settings without callbacks
            AdminClient(cast("dict[str, str | int | float | bool]", {**probe, "logger": _LOGGER}))
    except KafkaException as exc:
        error = exc.args[0]
        text = error.str() if hasattr(error, "str") else str(error)
        raise _refused(
            text.removeprefix(f"Failed to create {kind}: "), config, names, what
        ) from exc
    compiled = _compiled()
    if not data_path or compiled is None or kind == "admin":
        return
    refusal = compiled_refusal(compiled, kind, config)
    if refusal is not None:
        where = (
            f"{what}, through the compiled data plane (librdkafka {compiled.LIBRDKAFKA_VERSION})"
        )
        raise _refused(refusal, config, names, where, compiled_path=True)


def probe_settings(config: Mapping[str, object]) -> dict[str, object]:
    """The settings of `config` a client is built with to check them: without brokers,
    and without the TLS settings and SASL settings that name files."""
    return {
        key: value
        for key, value in config.items()
        if not (
            key in {"bootstrap.servers", "plugin.library.paths"}
            or key.startswith(("ssl.", "ssl_"))
            or (key.startswith("sasl.") and key.endswith(_FILE_SUFFIXES))
        )
    }


def compiled_refusal(module: ModuleType, kind: str, config: Mapping[str, object]) -> str | None:
    """What the compiled data plane's librdkafka (`module`, `replicator._dataplane`) says
    building a `kind` client of `config`, or None when it builds."""
    probe = {key: str(value) for key, value in probe_settings(config).items()}
    if kind == "consumer":
        probe.setdefault("group.id", _PROBE_GROUP)
    try:
        module.check_client(kind, probe)
    except ValueError as exc:
        return str(exc)
    return None


def _compiled() -> ModuleType | None:
    """The compiled data plane, when it is built."""
    try:
        return importlib.import_module("replicator._dataplane")
    except ImportError:
        return None


def _refused(
    text: str, config: Mapping[str, str], names: Mapping[str, str], what: str,
    compiled_path: bool = False,
) -> ConfigError:  # fmt: skip
    """The load's refusal: the keys librdkafka's `text` names, as the user wrote them."""
    found = _NAME.findall(text)
    if "SASL mechanism" in text:  # librdkafka names no key there
        mechanism = [n for n in ("sasl.mechanism", "sasl.mechanisms") if n in config]
        found += mechanism or ["security.protocol"]
        if not mechanism:
            text += " (no sasl.mechanism is set: Kafka's default is GSSAPI)"
    named = ", ".join(_shown(name, config, names) for name in dict.fromkeys(found))
    fix = "change the keys you set"
    if compiled_path:
        fix += (
            ", or set replicator.data.path = auto or python (the Python loop's librdkafka "
            "takes them)"
        )
    return ConfigError(
        f"{named or 'the client settings'}: librdkafka refuses {what}: {text}; {fix}"
    )
