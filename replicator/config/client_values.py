"""Java client setting values in librdkafka's form, checked where librdkafka would
reject them late (or not at all).

Most values mean the same in both; these differ: the case of a security protocol,
an empty host-name check, `none` for an offset reset, Java's assignor class names,
`-1` for an OS-default socket buffer, and `buffer.memory` in bytes against
librdkafka's kilobytes. Errors name the configuration key the user wrote.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from replicator.config.redact import invalid_value
from replicator.errors import ConfigError

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_OFFSET_RESETS = {"earliest": "earliest", "latest": "latest", "none": "error", "error": "error"}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def convert(java_key: str, key: str, value: str, shown_as: str) -> str:
    """A Java value in librdkafka's form, validated where librdkafka would reject it late."""
    converter = _CONVERTERS.get(java_key) or _CONVERTERS.get(key)
    return converter(value, shown_as) if converter else value


def _security_protocol(value: str, shown_as: str) -> str:
    if value.upper() not in _SECURITY_PROTOCOLS:
        raise invalid_value(shown_as, value, "one of " + ", ".join(_SECURITY_PROTOCOLS))
    return value.upper()


def _endpoint_identification(value: str, shown_as: str) -> str:
    # Java disables host name verification with an empty value, librdkafka with "none".
    if value.lower() not in ("", "https", "none"):
        raise invalid_value(shown_as, value, "https or an empty value")
    return value.lower() or "none"


def _offset_reset(value: str, shown_as: str) -> str:
    if value.lower() not in _OFFSET_RESETS:
        raise invalid_value(shown_as, value, "earliest, latest or none")
    return _OFFSET_RESETS[value.lower()]


def _isolation_level(value: str, shown_as: str) -> str:
    if value not in _ISOLATION_LEVELS:
        raise invalid_value(shown_as, value, " or ".join(_ISOLATION_LEVELS))
    return value


def _socket_buffer(value: str, shown_as: str) -> str:
    # Java's -1 ("use the OS default") is librdkafka's 0.
    return "0" if _integer(value, shown_as) == -1 else value


def _kilobytes(value: str, shown_as: str) -> str:
    return str(max(1, math.ceil(_integer(value, shown_as) / 1024)))


def _integer(value: str, shown_as: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise invalid_value(shown_as, value, "an integer") from None


def _assignors(value: str, shown_as: str) -> str:
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in names if part not in _ASSIGNORS]
    if unknown:
        raise ConfigError(
            f"{shown_as}: {', '.join(unknown)} has no librdkafka equivalent "
            "(librdkafka has range, roundrobin and cooperative-sticky)"
        )
    return ",".join(dict.fromkeys(_ASSIGNORS[part] for part in names))


_CONVERTERS: dict[str, Callable[[str, str], str]] = {
    "security.protocol": _security_protocol,
    "ssl.endpoint.identification.algorithm": _endpoint_identification,
    "auto.offset.reset": _offset_reset,
    "isolation.level": _isolation_level,
    "partition.assignment.strategy": _assignors,
    "send.buffer.bytes": _socket_buffer,
    "receive.buffer.bytes": _socket_buffer,
    "buffer.memory": _kilobytes,
}
