"""`replicator acls plan|apply`: the least ACLs each DR principal needs, printed or created."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from replicator.acls.apply import apply_rules
from replicator.acls.plan import (
    ROLES,
    AclRule,
    application_rules,
    replicator_rules,
    verifier_rules,
)
from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.errors import ConfigError


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = commands.add_parser("acls", help="the ACLs each principal needs: print or create them")
    actions = acls.add_subparsers(dest="action", required=True, metavar="ACTION")
    plan = actions.add_parser("plan", help="print the ACLs (nothing is changed)")
    _add_options(plan)
    plan.add_argument("--json", action="store_true", help="print JSON for scripts")
    plan.set_defaults(handler=_plan)
    apply = actions.add_parser("apply", help="create the missing ACLs (never removes any)")
    _add_options(apply)
    apply.add_argument(
        "--admin-config",
        type=Path,
        help="MM2 properties with the same cluster aliases, for a principal allowed to "
        "create ACLs (default: --config's own clients)",
    )
    apply.set_defaults(handler=_apply)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, required=True, help="the replicator's mm2.properties"
    )
    parser.add_argument(
        "--role",
        action="append",
        choices=ROLES,
        help="whose ACLs (repeatable; default replicator): replicator (engine, checkpoints, "
        "group sync, procedures), verifier (Spark verification), producer, consumer",
    )
    parser.add_argument(
        "--principal",
        help="principal of the verifier, producer or consumer role (e.g. User:spark); the "
        "replicator's is the one its clients authenticate as in --config",
    )
    parser.add_argument("--topic", help="the application's topic (producer, consumer)")
    parser.add_argument("--group", help="the consumer's group (consumer)")
    parser.add_argument(
        "--cluster",
        action="append",
        help="where the application runs (producer, consumer; repeatable; default all)",
    )


def _rules(args: argparse.Namespace, config: ReplicatorConfig) -> list[AclRule]:
    rules: list[AclRule] = []
    for role in args.role or ["replicator"]:
        if role == "replicator":
            rules += replicator_rules(config)
            continue
        if not args.principal:
            raise ConfigError(f"--role {role} needs --principal (e.g. User:{role})")
        if role == "verifier":
            rules += verifier_rules(config, args.principal)
            continue
        if not args.topic:
            raise ConfigError(f"--role {role} needs --topic (the application's topic)")
        clusters = args.cluster or list(config.clusters)
        unknown = sorted(set(clusters) - set(config.clusters))
        if unknown:
            raise ConfigError(f"--cluster {', '.join(unknown)}: not a cluster of {args.config}")
        rules += application_rules(clusters, args.principal, role, args.topic, args.group)
    return rules


def format_rules(rules: list[AclRule]) -> list[str]:
    """One line per cluster, principal and resource: the operations, and why."""
    grouped: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for rule in rules:
        key = (rule.cluster, rule.principal, rule.resource_type, rule.name, rule.pattern_type)
        operations, whys = grouped.setdefault(key, ([], []))
        operations.append(rule.operation)
        if rule.why not in whys:
            whys.append(rule.why)
    lines = []
    for (cluster, principal, resource_type, name, pattern_type), (ops, whys) in grouped.items():
        kind = "prefixed" if pattern_type == "PREFIXED" else "literal"
        lines.append(
            f"{cluster:<10} {principal:<18} {resource_type:<16} {f'{name} ({kind})':<36} "
            f"{','.join(sorted(ops)):<52} # {'; '.join(whys)}"
        )
    return lines


def _plan(args: argparse.Namespace) -> int:
    rules = _rules(args, load_config(args.config))
    if args.json:
        json.dump([asdict(rule) for rule in rules], sys.stdout, indent=2)
        print()
    else:
        print("\n".join(format_rules(rules)))
    return 0


def _apply(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    rules = _rules(args, config)
    admin = load_config(args.admin_config) if args.admin_config else config
    missing = sorted({rule.cluster for rule in rules} - set(admin.clusters))
    if missing:
        raise ConfigError(f"{args.admin_config} has no cluster {', '.join(missing)}")
    created = apply_rules(rules, {alias: c.admin for alias, c in admin.clusters.items()})
    for line in format_rules(created):
        print(f"created {line}")
    print(f"{len(created)} ACLs created, {len(rules) - len(created)} already present")
    return 0
