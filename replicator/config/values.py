"""Readers of the values of MM2's settings: `(key as written, value) -> typed value`.

Each raises ConfigError naming the key, the value (redacted when secret) and what
was expected, as Kafka's ConfigDef would; `pattern_list` reads MM2's Java regex
lists with Python's `re`, translating what differs and rejecting what cannot be.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

from replicator.config.redact import invalid_value
from replicator.errors import ConfigError

_MM2_PACKAGE = "org.apache.kafka.connect.mirror."
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)+")
#: Between the items of a list value (`clusters`, pattern lists), as ConfigDef splits it.
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_INLINE_COMMENT = re.compile(r"\s#")


def boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise invalid_value(key, value, "true or false")
    return value.lower() == "true"


def _integer(key: str, value: str, expected: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise invalid_value(key, value, expected) from None


def at_least(minimum: int) -> Callable[[str, str], int]:
    expected = f"an integer >= {minimum}"

    def parse(key: str, value: str) -> int:
        number = _integer(key, value, expected)
        if number < minimum:
            raise invalid_value(key, value, expected)
        return number

    return parse


def replication_factor(key: str, value: str) -> int:
    # -1 asks the broker for its default.replication.factor (KIP-464), as in MM2.
    expected = "an integer >= 1, or -1 for the broker default"
    number = _integer(key, value, expected)
    if number < 1 and number != -1:
        raise invalid_value(key, value, expected)
    return number


def interval(key: str, value: str) -> float:
    expected = "a positive number of seconds"
    try:
        seconds = float(value)
    except ValueError:
        raise invalid_value(key, value, expected) from None
    if not seconds > 0 or seconds == float("inf"):
        raise invalid_value(key, value, expected)
    return seconds


def port(key: str, value: str) -> int:
    number = _integer(key, value, "a TCP port (1-65535)")
    if not 1 <= number <= 65535:
        raise invalid_value(key, value, "a TCP port (1-65535)")
    return number


def choice(*options: str) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        if value not in options:
            raise invalid_value(key, value, " or ".join(options))
        return value

    return parse


def only(*accepted: str, why: str) -> Callable[[str, str], str]:
    """A setting the replicator behaves as one of `accepted` says (MM2's default, or what
    it does anyway); any other value is refused, naming the key and `why`. With no
    `accepted` values, every value is refused."""

    def parse(key: str, value: str) -> str:
        if value in accepted or value.lower() in accepted:
            return value
        allowed = f" (accepted: {', '.join(repr(a) for a in accepted)})" if accepted else ""
        raise ConfigError(f"{key}: refused{allowed}: {why}")

    return parse


def only_true(*, why: str) -> Callable[[str, str], bool]:
    """A boolean the replicator can only honour as true; false is refused with `why`."""

    def parse(key: str, value: str) -> bool:
        if not boolean(key, value):
            raise ConfigError(f"{key}: refused (accepted: true): {why}")
        return True

    return parse


def topic_name(key: str, value: str) -> str:
    """A Kafka topic name: 1 to 249 of letters, digits, '.', '_' and '-'."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", value):
        raise ConfigError(
            f"{key}: {value!r} is not a topic name (1 to 249 of letters, digits, '.', '_', '-')"
        )
    return value


def class_name(key: str, value: str) -> str:
    # Java class names (org.apache.kafka.connect.mirror.IdentityReplicationPolicy) and
    # dotted Python paths (package.module.ClassName) look alike; policies.py resolves them.
    if not _CLASS_NAME.fullmatch(value):
        raise invalid_value(key, value, "a fully qualified class name (package.ClassName)")
    return value


def separator(key: str, value: str) -> str:
    if not value:
        raise invalid_value(key, value, "a non-empty separator")
    return value


def exactly_once_source_support(key: str, value: str) -> bool:
    # Connect's worker setting: "preparing" is the first step of a rolling upgrade.
    if value.lower() not in ("enabled", "preparing", "disabled"):
        raise invalid_value(key, value, "enabled, preparing or disabled")
    return value.lower() == "enabled"


def filter_class(default: str, kind: str | None) -> Callable[[str, str], str]:
    """MM2's default filter class; for a topic or group filter (`kind`), also any other
    class name, whose Python port the loader looks up (`replicator.config.ports`)."""

    def parse(key: str, value: str) -> str:
        if value == _MM2_PACKAGE + default:
            return value
        if kind is None:
            raise ConfigError(
                f"{key}: custom Java filter classes cannot run in the replicator; "
                "express the filter with config.properties.exclude"
            )
        return class_name(key, value)

    return parse


def pattern_list(key: str, value: str) -> tuple[re.Pattern[str], ...]:
    """A comma-separated list of Java regexes, as MM2's ConfigDef LIST reads it.

    An empty list matches nothing, as in MM2 (MirrorUtils.compilePatternList).
    """
    items = [item for item in _LIST_SEPARATOR.split(value.strip()) if item]
    return tuple(_java_regex(key, item) for item in items)


def _java_regex(key: str, pattern: str) -> re.Pattern[str]:
    """Compile a Java regex with Python's `re`, translating what differs.

    Possessive quantifiers and atomic groups are the same in Python 3.11+.
    `\\Q...\\E`, `\\z`, `\\Z` and `(?<name>...)` are translated; Java's
    `\\p{...}` classes and set operations in classes are rejected clearly.
    """
    if _INLINE_COMMENT.search(pattern):
        raise ConfigError(
            f"{key}: pattern {pattern!r} holds an end-of-line comment; .properties files only "
            "have whole-line comments: move the comment to its own line"
        )
    translated = _python_regex(key, pattern)
    with warnings.catch_warnings():
        # Python warns (FutureWarning) where Java's class syntax ([a&&[b]]) differs.
        warnings.simplefilter("error", FutureWarning)
        try:
            return re.compile(translated)
        except (re.error, FutureWarning) as exc:
            raise ConfigError(f"{key}: invalid regular expression {pattern!r}: {exc}") from None


def _python_regex(key: str, pattern: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(pattern):
        if pattern.startswith("\\", position) and position + 1 < len(pattern):
            escape = pattern[position + 1]
            if escape == "Q":
                end = pattern.find("\\E", position + 2)
                end = len(pattern) if end < 0 else end
                out.append(re.escape(pattern[position + 2 : end]))
                position = end + 2
                continue
            if escape in "pP":
                raise ConfigError(
                    f"{key}: pattern {pattern!r} uses Java's \\{escape}{{...}} character classes, "
                    "which Python lacks; write the class out, e.g. [a-zA-Z0-9]"
                )
            out.append({"z": r"\Z", "Z": r"(?=\n?\Z)"}.get(escape, "\\" + escape))
            position += 2
        elif pattern.startswith("(?<", position) and pattern[position + 3 : position + 4] not in (
            "=",
            "!",
        ):
            out.append("(?P<")
            position += 3
        else:
            out.append(pattern[position])
            position += 1
    return "".join(out)


def cluster_aliases(value: str) -> tuple[str, ...]:
    """The aliases of the `clusters` list (its value), in order, each checked."""
    aliases = [alias for alias in _LIST_SEPARATOR.split(value) if alias]
    if not aliases:
        raise ConfigError("clusters: expected at least one cluster alias, got an empty list")
    for alias in aliases:
        if "#" in alias:
            raise ConfigError(
                f"clusters: alias {alias!r} holds an end-of-line comment; .properties files only "
                "have whole-line comments: move the comment to its own line"
            )
        if re.search(r"\s", alias) or "->" in alias:
            raise ConfigError(f"clusters: alias {alias!r} must not contain whitespace or '->'")
    if len(set(aliases)) != len(aliases):
        raise ConfigError("clusters: an alias is listed twice")
    return tuple(aliases)
