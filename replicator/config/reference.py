"""docs/configuration.md, rendered from the settings table (`replicator.config.keys`)
and the client-setting translations (`replicator.config.clients`).

    python -m replicator.config.reference > docs/configuration.md

A unit test checks that the committed page is what this renders, so the page
never disagrees with what the loader does.
"""

from __future__ import annotations

import sys

from replicator.config.clients import renamed_settings, unsupported_settings
from replicator.config.keys import CLIENT_RULES, TABLE, Setting
from replicator.config.ports import GROUP_FILTERS, POLICIES, TOPIC_FILTERS

_INTRO = """\
# Configuration reference

The replicator reads MirrorMaker 2's `mm2.properties` as it is. This page lists every
key it knows, what it does with it, and where its default differs from MM2's (and why).
It is generated from the one table the loader reads (`replicator/config/keys.py`):

    python -m replicator.config.reference > docs/configuration.md

Every key is one of three things:

- **read**: honoured; the last column says which part of the replicator acts on it.
- **accepted**: MM2/Connect plumbing the replicator has no counterpart of (its REST
  server, Connect's own storage topics, ...). Accepted so that an MM2 file loads
  unchanged, and logged once at INFO with the reason. Where a value would change what
  MM2 does to records, only the values the replicator behaves as are accepted.
- **refused**: the load fails with a message naming the key, the reason and the fix.

A key that is none of these (nor a Kafka client setting) fails the load as unknown,
with the closest known key.

## Where a key may be set

- top level: `tasks.max = 4` (every flow);
- flow level: `primary->dr.tasks.max = 4` (this flow; over the top level, as in MM2);
- cluster level: `primary.bootstrap.servers`, `primary.consumer.fetch.min.bytes`: client
  settings of one cluster, and the `cluster`-scoped settings below (read from the flow's
  target cluster, as MM2's Connect worker reads them);
- client settings: `consumer.`, `producer.`, `admin.` prefixes at each level, and
  `<source>-><target>.source.consumer.` / `.target.producer.` (MM2's precedence: see
  `replicator/config/loader.py`). Java names are translated to librdkafka's (below).
  Kafka Connect's connector overrides, as Strimzi's connector configuration carries them:
  `<source>-><target>.producer.override.<k>` is the flow's target producer setting (the
  producer Connect applies it to in MM2); `consumer.override.` and `admin.override.`,
  which Connect applies only to sink connectors and topic creation, and any override
  outside a flow, load with a warning that they have no effect (nor in MM2).

Replication settings cannot be set per cluster (MM2 ignores them there too): the load
says so.
"""


def _cell(text: str | None) -> str:
    if text is None:
        return "(none)"
    if text == "":
        return '""'
    return "`" + text.replace("|", "\\|") + "`"


def _text(text: str) -> str:
    return text.replace("|", "\\|")


def _default(setting: Setting) -> str:
    cell = _cell(setting.default)
    if setting.differs:
        cell += f" (MM2: {_cell(setting.mm2_default)}: {_text(setting.differs)})"
    return cell


def _read_table(settings: list[Setting]) -> list[str]:
    lines = [
        "| key | type | default | scope | read by | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for s in settings:
        lines.append(
            f"| `{s.key}` | {_text(s.type)} | {_default(s)} | {s.scope} | {_text(s.reader)} "
            f"| {_text(s.doc)} |"
        )
    return lines


def _accepted_table(settings: list[Setting]) -> list[str]:
    lines = ["| key | MM2's default | scope | why nothing reads it |", "|---|---|---|---|"]
    for s in settings:
        key = f"`{s.key}*`" if s.prefix else f"`{s.key}`"
        lines.append(f"| {key} | {_cell(s.default)} | {s.scope} | {_text(s.doc)} |")
    return lines


def render() -> str:
    read = [s for s in TABLE if s.status == "read"]
    mm2 = [s for s in read if not s.doc.startswith("Ours")]
    ours = [s for s in read if s.doc.startswith("Ours")]
    accepted = [s for s in TABLE if s.status == "accepted"]
    refused = [s for s in TABLE if s.status == "refused"]
    out = [_INTRO, "## Replication settings (MM2's)", ""]
    out += _read_table(mm2)
    out += ["", "## The replicator's own settings", ""]
    out += _read_table(ours)
    out += ["", "## Accepted, with no counterpart", ""]
    out += _accepted_table(accepted)
    if refused:
        out += ["", "## Refused", ""]
        out += [f"- `{s.key}`: {s.doc}" for s in refused]
    out += [
        "",
        "## Client settings the engine decides",
        "",
        "These client settings are fixed by the engine for the client named; a value that",
        "agrees with the engine is accepted, any other is refused at load, naming the key.",
        "",
        "| setting (librdkafka name) | client | accepted values | why |",
        "|---|---|---|---|",
    ]
    clients = {"source": "source consumer", "target": "target producer", "all": "every"}
    for rule in CLIENT_RULES:
        accepts = ", ".join(f"`{a}`" for a in rule.accepts) or "none"
        who = (
            f"{clients[rule.client]} {rule.kind}" if rule.client == "all" else clients[rule.client]
        )
        out.append(f"| `{rule.name}` | {who} | {accepts} | {_text(rule.reason)} |")
    out += [
        "",
        "Every client of every flow is also built once at load (without connecting): a",
        "combination librdkafka refuses (e.g. `max.poll.interval.ms` below",
        "`session.timeout.ms`, `max.in.flight` above 5 with idempotence) fails the load,",
        "naming the keys, instead of every worker when it starts. A flow's source",
        "consumer and target producer, which the compiled data plane builds with the",
        "librdkafka it links (2.12.1, older than confluent-kafka's), are built by that",
        "librdkafka too, unless the flow sets `replicator.data.path = python`: a setting",
        "only the newer one knows (e.g. `sasl.oauthbearer.sub.claim.name`) is refused",
        "at load, naming the key and both ways out.",
        "",
        "## Java client settings",
        "",
        "Client settings are passed to librdkafka. Java names that librdkafka spells",
        "differently are translated:",
        "",
        "| Java setting | librdkafka setting, by client |",
        "|---|---|",
    ]
    for name, kinds in sorted(renamed_settings().items()):
        where = ", ".join(f"{kind}: `{target}`" for kind, target in kinds.items())
        out.append(f"| `{name}` | {where} |")
    out += [
        "",
        "Java settings with no librdkafka counterpart are left out with a warning naming",
        "the key and the reason:",
        "",
        "| Java setting | why |",
        "|---|---|",
    ]
    out += [f"| `{n}` | {_text(why)} |" for n, why in sorted(unsupported_settings().items())]
    out += [
        "",
        "## Custom classes",
        "",
        "`replication.policy.class`, `topic.filter.class` and `group.filter.class` may name a",
        "custom Java class: the replicator then loads the Python port an installed package",
        "registers under the same name, so the MM2 file loads unchanged. Register a port in",
        "the package's `pyproject.toml`:",
        "",
        "```toml",
        f'[project.entry-points."{POLICIES}"]',
        '"com.acme.mm2.TenantPolicy" = "acme_mm2_ports.policy:TenantPolicy"',
        "",
        f'[project.entry-points."{TOPIC_FILTERS}"]',
        '"com.acme.mm2.TenantTopicFilter" = "acme_mm2_ports.filters:TenantTopicFilter"',
        "",
        f'[project.entry-points."{GROUP_FILTERS}"]',
        '"com.acme.mm2.TenantGroupFilter" = "acme_mm2_ports.filters:TenantGroupFilter"',
        "```",
        "",
        "- a policy subclasses `replicator.config.policies.ReplicationPolicy` and implements",
        "  MM2's methods in Python spelling (`format_remote_topic`, `topic_source`,",
        "  `upstream_topic`, ...);",
        "- a topic filter has `should_replicate_topic(topic) -> bool`, a group filter",
        "  `should_replicate_group(group) -> bool`; either may have `configure(settings)`,",
        "  called with the flow's settings (flow level over top level) as MM2 calls",
        "  `configure(Map)`;",
        "- a port that reads settings of its own declares them in `config_keys` (keys, or",
        "  prefixes ending with a dot): the loader accepts them only when such a port is",
        "  installed, and refuses them as unknown otherwise.",
        "",
        "Without an installed port the load fails, naming the class and how to register one.",
        "A policy may also be named by its dotted Python path.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
