"""`replicator acls plan|apply`: the least ACLs each DR principal needs, printed or created."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from replicator.acls.apply import apply_rules
from replicator.acls.plan import (
    ROLES,
    AclRule,
    application_rules,
    replicator_rules,
    verifier_rules,
)
from replicator.cli.app import command, exit_statuses, group, usage_error
from replicator.cli.options import ConfigOption, JsonOption, OutputOption
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.errors import ConfigError

ACLS = group("acls", "the ACLs each principal needs: print or create them", "Set-up")


def _role(text: str) -> str:
    if text not in ROLES:
        raise usage_error(f"{text!r} is not a role; the roles are {', '.join(ROLES)}", "--role")
    return text


RoleOption = Annotated[
    list[str] | None,
    typer.Option(
        "--role",
        parser=_role,
        metavar="|".join(ROLES),
        help="whose ACLs (repeatable; default replicator): replicator (engine, checkpoints, "
        "group sync, procedures), verifier (Spark verification), producer, consumer",
    ),
]
PrincipalOption = Annotated[
    str | None,
    typer.Option(
        "--principal",
        metavar="PRINCIPAL",
        help="principal of the verifier, producer or consumer role (e.g. User:spark); the "
        "replicator's is the one its clients authenticate as in --config",
    ),
]
TopicOption = Annotated[
    str | None,
    typer.Option("--topic", metavar="TOPIC", help="the application's topic (producer, consumer)"),
]
GroupOption = Annotated[
    str | None, typer.Option("--group", metavar="GROUP", help="the consumer's group (consumer)")
]
ClusterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--cluster",
        metavar="ALIAS",
        help="where the application runs (producer, consumer; repeatable; default all)",
    ),
]
_EXITS = exit_statuses("an option the role needs is missing, a cluster is unknown, or an error")


def _rules(  # noqa: PLR0917 - the options of the command line, in its order
    config_file: Path,
    config: ReplicatorConfig,
    roles: list[str] | None,
    principal: str | None,
    topic: str | None,
    group_: str | None,
    clusters: list[str] | None,
) -> list[AclRule]:
    rules: list[AclRule] = []
    for role in roles or ["replicator"]:
        if role == "replicator":
            rules += replicator_rules(config)
            continue
        if not principal:
            raise ConfigError(f"--role {role} needs --principal (e.g. User:{role})")
        if role == "verifier":
            rules += verifier_rules(config, principal)
            continue
        if not topic:
            raise ConfigError(f"--role {role} needs --topic (the application's topic)")
        where = clusters or list(config.clusters)
        unknown = sorted(set(where) - set(config.clusters))
        if unknown:
            raise ConfigError(f"--cluster {', '.join(unknown)}: not a cluster of {config_file}")
        rules += application_rules(where, principal, role, topic, group_)
    return rules


#: The columns of `_rule_rows`.
_RULE_COLUMNS = ("CLUSTER", "PRINCIPAL", "RESOURCE", "NAME", "OPERATIONS", "WHY")


def _rule_rows(rules: list[AclRule]) -> list[tuple[str, ...]]:
    """One row per cluster, principal and resource: the operations, and why."""
    grouped: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for rule in rules:
        key = (rule.cluster, rule.principal, rule.resource_type, rule.name, rule.pattern_type)
        operations, whys = grouped.setdefault(key, ([], []))
        operations.append(rule.operation)
        if rule.why not in whys:
            whys.append(rule.why)
    rows: list[tuple[str, ...]] = []
    for (cluster, principal, resource_type, name, pattern_type), (ops, whys) in grouped.items():
        kind = "prefixed" if pattern_type == "PREFIXED" else "literal"
        rows.append(
            (
                cluster,
                principal,
                resource_type,
                f"{name} ({kind})",
                ", ".join(sorted(ops)),
                "; ".join(whys),
            )
        )
    return rows


@command(ACLS, "plan", help_="print the ACLs (nothing is changed)", epilog=_EXITS)
def _plan(
    *,
    config: ConfigOption,
    role: RoleOption = None,
    principal: PrincipalOption = None,
    topic: TopicOption = None,
    group_: GroupOption = None,
    cluster: ClusterOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    rules = _rules(config, load_config(config), role, principal, topic, group_, cluster)
    emit(
        [asdict(rule) for rule in rules],
        chosen(output, json_),
        lambda: print_table(_RULE_COLUMNS, _rule_rows(rules)),
    )
    return 0


@command(ACLS, "apply", help_="create the missing ACLs (never removes any)", epilog=_EXITS)
def _apply(
    *,
    config: ConfigOption,
    role: RoleOption = None,
    principal: PrincipalOption = None,
    topic: TopicOption = None,
    group_: GroupOption = None,
    cluster: ClusterOption = None,
    admin_config: Annotated[
        Path | None,
        typer.Option(
            "--admin-config",
            metavar="PATH",
            help="MM2 properties with the same cluster aliases, for a principal allowed to "
            "create ACLs (default: --config's own clients)",
        ),
    ] = None,
    output: OutputOption = Output.table,
) -> int:
    loaded = load_config(config)
    rules = _rules(config, loaded, role, principal, topic, group_, cluster)
    admin = load_config(admin_config) if admin_config else loaded
    missing = sorted({rule.cluster for rule in rules} - set(admin.clusters))
    if missing:
        raise ConfigError(f"{admin_config} has no cluster {', '.join(missing)}")
    created = apply_rules(rules, {alias: c.admin for alias, c in admin.clusters.items()})
    data = {"created": [asdict(r) for r in created], "present": len(rules) - len(created)}
    emit(data, output, lambda: _print_applied(created, len(rules)))
    return 0


def _print_applied(created: list[AclRule], planned: int) -> None:
    print_table(_RULE_COLUMNS, _rule_rows(created), title="created")
    print(f"{len(created)} ACLs created, {planned - len(created)} already present")
