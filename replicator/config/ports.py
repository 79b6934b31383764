"""Python ports of MM2's custom Java classes, found by the Java class name.

An MM2 file names custom classes by their Java names (`replication.policy.class =
com.acme.mm2.TenantPolicy`, `topic.filter.class = ...`, `group.filter.class = ...`).
So that such a file loads unchanged, the replicator looks the name up in the
entry points of the installed packages: a package that ports the class registers
it under the Java name, in pyproject.toml:

    [project.entry-points."replicator.replication_policies"]
    "com.acme.mm2.TenantPolicy" = "acme_mm2_ports.policy:TenantPolicy"

`replicator.topic_filters` and `replicator.group_filters` work the same way. A
policy port subclasses `replicator.config.policies.ReplicationPolicy`; a topic
filter has `should_replicate_topic(topic) -> bool`, a group filter
`should_replicate_group(group) -> bool` (MM2's method names in Python spelling).
Each may have `configure(settings)`, called with the flow's settings (flow level
over top level) as MM2 calls `configure(Map)`, and `config_keys`: the settings of
its own it reads (keys, or prefixes ending with a dot), which the loader then
accepts instead of refusing them as unknown.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from replicator.errors import ConfigError

POLICIES = "replicator.replication_policies"
TOPIC_FILTERS = "replicator.topic_filters"
GROUP_FILTERS = "replicator.group_filters"


def registered(group: str, class_name: str) -> object | None:
    """What an installed package registered under `class_name` in `group`, loaded;
    None if none did. A registration that cannot be loaded is a ConfigError."""
    found = [ep for ep in entry_points(group=group) if ep.name == class_name]
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        values = ", ".join(sorted(ep.value for ep in found))
        raise ConfigError(
            f"{class_name}: several installed packages register a port under this name "
            f"in {group} ({values}); uninstall all but one"
        )
    try:
        return found[0].load()
    except Exception as exc:  # any import error of a third-party package: name it
        raise ConfigError(
            f"{class_name}: the port registered in {group} ({found[0].value}) cannot be "
            f"loaded: {type(exc).__name__}: {exc}"
        ) from exc


def not_ported(key: str, class_name: str, group: str, what: str) -> ConfigError:
    """The error for a Java class with no Python port installed: how to register one."""
    return ConfigError(
        f"{key} = {class_name}: no Python port of this Java class is installed. Port it "
        f"({what}) and register it under the Java name in the entry-point group {group}, "
        f'e.g. in pyproject.toml: [project.entry-points."{group}"] "{class_name}" = '
        '"your_package.module:ClassName"; then install that package where the replicator runs'
    )
