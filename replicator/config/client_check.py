"""Each client of a flow built once at load time, so that librdkafka's own checks of
its settings (combinations such as `max.poll.interval.ms` below `session.timeout.ms`,
or `max.in.flight` above 5 with idempotence) fail the load, naming the keys the user
wrote, instead of every worker when it starts.

The clients are built without brokers (no connection is ever made) and without the
connection and security settings (certificate files may exist only where the
replicator runs; librdkafka checks those when a worker connects), with the settings
the engine fixes for that client (`keys.CLIENT_RULES`), and closed at once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from replicator.errors import ConfigError

_log = logging.getLogger(__name__)
_NAME = re.compile(r"`([a-z_.]+)`")
_PROBE_GROUP = "replicator-config-check"


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


def check_client(kind: str, config: Mapping[str, str], names: Mapping[str, str], what: str) -> None:
    """Build the `kind` client of `config` once; ConfigError naming the keys (from `names`,
    librdkafka name -> key as written) if librdkafka refuses its settings. `what` says
    which client it is (e.g. "the source consumer of flow A->B")."""
    probe: dict[str, object] = {
        key: value
        for key, value in config.items()
        if not (
            key in {"bootstrap.servers", "security.protocol", "plugin.library.paths"}
            or key.startswith(("ssl.", "sasl.", "ssl_"))
        )
    }
    probe["logger"] = _LOGGER
    try:
        if kind == "consumer":
            Consumer({"group.id": _PROBE_GROUP, **probe}).close()
        elif kind == "producer":
            Producer(probe).flush(0)
        else:
            AdminClient(probe)
    except KafkaException as exc:
        error = exc.args[0]
        text = error.str() if hasattr(error, "str") else str(error)
        text = text.removeprefix(f"Failed to create {kind}: ")
        named = ", ".join(
            _shown(name, config, names) for name in dict.fromkeys(_NAME.findall(text))
        )
        raise ConfigError(
            f"{named or 'the client settings'}: librdkafka refuses {what}: {text}; change "
            "the keys you set"
        ) from exc
