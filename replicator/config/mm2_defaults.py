"""Where a flow relies on a default that is not MirrorMaker 2's.

A file written for MM2 that never mentions a setting means MM2's default; where ours
differs (`Setting.differs`, e.g. `sync.topic.acls.enabled`: true in MM2, false here),
the same silence means something else here. `replicator run` says so once at start,
with both values and the key that decides, so an operator migrating from MM2 is not
surprised later (ACLs not copied, a topic left out)."""

from __future__ import annotations

from replicator.config.keys import TABLE, Setting
from replicator.config.model import FlowConfig

#: Keys that stand for another one (deprecated aliases): set, they count as it.
_ALIASES = {"topics.exclude": ("topics.blacklist",)}


def silent_differences(flow: FlowConfig) -> list[str]:
    """One line per flow-level setting the file leaves unset (at flow and top level)
    whose default here is not MM2's: the key, both defaults, and why."""
    written = flow.policy_settings
    return [
        f"{flow.name}: {s.key} is not set, so it is {s.default} here where MirrorMaker 2 "
        f"would use {s.mm2_default} ({s.differs}); set {s.key} to choose"
        for s in _differing()
        if not any(key in written for key in (s.key, *_ALIASES.get(s.key, ())))
    ]


def _differing() -> list[Setting]:
    return [
        s
        for s in TABLE
        if s.scope == "flow" and s.differs and s.mm2_default not in (None, s.default)
    ]
