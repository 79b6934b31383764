"""Per-application settings (ours, no MM2 equivalent): who writes for an application.

After a failover an application's producers write on the DR cluster, where nobody
granted them WRITE (MM2's ACL sync never copies WRITE). The failover's opt-in
`grant_write` step grants it, and needs to know whose producers and which topics:

    applications.<name>.producer.principals = User:orders-app, User:orders-batch
    applications.<name>.producer.topics = orders|orders\\..*

`<name>` is the application as the DR state store registers it (its consumer group,
by the demo's convention). `producer.topics` takes Java regexes like `topics` (names
or prefixes, since they become ACLs); without it, the flow's own `topics`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replicator.config.values import pattern_list
from replicator.errors import ConfigError

APPLICATIONS_PREFIX = "applications."
PRINCIPALS, TOPICS = "producer.principals", "producer.topics"
SETTINGS = (PRINCIPALS, TOPICS)
#: `User:name` (also `Group:name` and the like, for custom principal builders).
_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_]*:\S+")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


@dataclass(frozen=True)
class ApplicationConfig:
    """What the configuration says of one application."""

    name: str
    producer_principals: tuple[str, ...] = ()
    #: The topics its producers write; None: the failover flow's `topics`.
    producer_topics: tuple[re.Pattern[str], ...] | None = None


def application_setting(key: str) -> tuple[str, str]:
    """(application name, setting) of an `applications.<name>.<setting>` key."""
    rest = key[len(APPLICATIONS_PREFIX) :]
    for setting in SETTINGS:
        if rest.endswith(f".{setting}") and len(rest) > len(setting) + 1:
            return rest[: -len(setting) - 1], setting
    raise ConfigError(
        f"{key}: unknown application setting; an application has "
        f"{', '.join(f'{APPLICATIONS_PREFIX}<name>.{s}' for s in SETTINGS)}"
    )


def read_applications(
    values: dict[str, dict[str, tuple[str, str]]],
) -> dict[str, ApplicationConfig]:
    """`values`: application -> setting -> (key as written, value)."""
    applications = {}
    for name, settings in sorted(values.items()):
        principals: tuple[str, ...] = ()
        if PRINCIPALS in settings:
            key, value = settings[PRINCIPALS]
            principals = tuple(p for p in _LIST_SEPARATOR.split(value) if p)
            wrong = [p for p in principals if not _PRINCIPAL.fullmatch(p)]
            if wrong or not principals:
                raise ConfigError(
                    f"{key}: expected a comma-separated list of principals as the brokers "
                    f"name them (e.g. User:orders-app), got {', '.join(wrong) or 'nothing'}"
                )
        topics = None
        if TOPICS in settings:
            key, value = settings[TOPICS]
            topics = pattern_list(key, value)
        applications[name] = ApplicationConfig(name, principals, topics)
    return applications
