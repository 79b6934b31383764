"""ACL sync and grant_write on the secured stack (issue 14 item 3): SASL_SSL with
SCRAM-SHA-512, StandardAuthorizer, no ACL means no access. Each test runs the
replicator as a principal of its own with exactly its planned ACLs.

- ACL sync copies MM2's subset only (literal ALLOW on replicated topics, ALL as READ,
  no WRITE; and ours: no DENY), on the remote name, under both policies, once;
- a consumer that reads on primary reads the copy on dr after a sync;
- a principal lacking DESCRIBE or ALTER on CLUSTER is told which, where and how;
- the 3 a.m. problem: a producer that writes on primary is refused on dr after a
  failover, unless the failover ran `grant_write`; the failback removes exactly that.
"""

from __future__ import annotations

import re
import signal
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from replicator.acls import bindings
from replicator.acls.bindings import Binding
from replicator.acls.plan import application_rules, replicator_rules
from replicator.acls.status import read_acl_status
from replicator.acls.sync import DENY, PREFIXED, WRITE
from replicator.config import load_config
from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.operations.dr_status import acl_sync_info
from replicator.operations.sync_round import sync_round
from replicator.procedures import Failback, Failover, live_workers
from replicator.procedures.write_grants import grant
from replicator.statestore import StateStore

from helpers.kafka import create_topic, make_records, produce_records
from helpers.replication import running, start_replicator, wait_until
from helpers.secured import SecuredPair

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _replicator_config(pair: SecuredPair, tmp_path: Path, *lines: str) -> Path:
    """The stack's clients.properties for a new principal of this test (plus `lines`),
    granted exactly the ACLs `replicator acls plan` lists for it."""
    user = f"aclsync-{uuid.uuid4().hex[:6]}"
    pair.user(user)
    security = pair.stack.security
    assert security is not None
    text = (
        pair.clients_file.read_text()
        .replace('username="replicator"', f'username="{user}"')
        .replace(str(security.password_file("replicator")), str(security.password_file(user)))
    )
    path = tmp_path / f"{user}.properties"
    path.write_text(text + "\n".join(lines) + "\n")
    pair.grant(replicator_rules(load_config(path)))
    return path


def _properties(regex: str) -> str:
    """`regex` as a .properties value (where a backslash escapes the next character)."""
    return regex.replace("\\", "\\\\")


def _superuser(pair: SecuredPair, tmp_path: Path) -> ReplicatorConfig:
    return load_config(pair.write_admin_config(tmp_path / "admin.properties"))


def _acls_of(cluster: ClusterConfig, principal: str) -> set[Binding]:
    return {b for b in bindings.topic_acls(cluster, "DESCRIBE") if b.principal == principal}


def _read(bootstrap: str, topic: str, client: dict[str, str], group: str) -> list[bytes] | int:
    """The values of `topic[0]` up to its end, or the error code that refused them."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, **client, "group.id": group, "enable.auto.commit": False}
    )
    try:
        # A topic the principal may not describe is refused in the metadata (a watermark
        # query would say "unknown partition", librdkafka issue 3522).
        refused = consumer.list_topics(topic, timeout=10).topics[topic].error
        if refused is not None:
            return refused.code()
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        while len(values) < end:
            for message in consumer.consume(100, timeout=1):
                if message.error():
                    return message.error().code()
                values.append(message.value())
        return values
    except KafkaException as exc:
        return exc.args[0].code()
    finally:
        consumer.close()


def _write(bootstrap: str, topic: str, client: dict[str, str]) -> int | None:
    """Produce one record; None if delivered, else the error code that refused it."""
    producer = Producer({"bootstrap.servers": bootstrap, **client, "message.timeout.ms": 20_000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"after the switch", on_delivery=lambda e, _m: outcome.append(e))
    assert producer.flush(30) == 0
    return None if outcome[0] is None else outcome[0].code()


@pytest.mark.parametrize("policy", ["default", "identity"])
def test_acl_sync_copies_exactly_mm2s_subset_once_on_the_remote_name(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore, policy: str
) -> None:
    pair = secured_pair
    prefix = f"acl{uuid.uuid4().hex[:8]}"
    topic, outside = f"{prefix}.orders", f"{prefix}-outside"
    lines = [
        "sync.topic.acls.enabled = true",
        f"primary->dr.topics = {prefix}\\\\..*",
        "dr->primary.enabled = false",
    ]
    if policy == "identity":
        lines.append(f"replication.policy.class = {IDENTITY}")
    config = load_config(_replicator_config(pair, tmp_path, *lines))
    flow = config.flow("primary->dr")
    admin = _superuser(pair, tmp_path)
    reader, everything, writer, denied = (
        f"User:{prefix}-{role}" for role in ("reader", "all", "writer", "denied")
    )
    bindings.create(
        admin.clusters["primary"],
        [
            Binding("TOPIC", "LITERAL", topic, reader, "*", "READ", "ALLOW"),
            Binding("TOPIC", "LITERAL", topic, everything, "*", "ALL", "ALLOW"),
            Binding("TOPIC", "LITERAL", topic, writer, "*", "WRITE", "ALLOW"),
            Binding("TOPIC", "LITERAL", topic, denied, "*", "READ", "DENY"),
            Binding("TOPIC", "PREFIXED", f"{prefix}.", reader, "*", "DESCRIBE", "ALLOW"),
            Binding("TOPIC", "LITERAL", outside, reader, "*", "READ", "ALLOW"),
        ],
    )

    [first] = sync_round(config, store.flows, ("acls",))

    remote = f"primary.{topic}" if policy == "default" else topic
    mine = {
        b for b in bindings.topic_acls(admin.clusters["dr"], "DESCRIBE") if prefix in b.principal
    }
    assert mine == {
        Binding("TOPIC", "LITERAL", remote, reader, "*", "READ", "ALLOW"),
        Binding("TOPIC", "LITERAL", remote, everything, "*", "READ", "ALLOW"),
    }
    assert {b.describe() for b in mine} <= set(first.acls_created)
    assert {WRITE, DENY, PREFIXED} <= set(first.acls_left_out)
    # Besides these, the replicators' own ACLs on `heartbeats` (always replicated, as in
    # MM2) are synced to primary.heartbeats, their WRITE left out.
    assert all(
        created.endswith(f"on TOPIC {remote} (literal)")
        or created.endswith(
            f"on TOPIC {flow.policy.format_remote_topic('primary', 'heartbeats')} (literal)"
        )
        for created in first.acls_created
    )

    [again] = sync_round(config, store.flows, ("acls",))
    assert (again.acls_synced, again.acls_created) == (first.acls_synced, [])
    assert {
        b for b in bindings.topic_acls(admin.clusters["dr"], "DESCRIBE") if prefix in b.principal
    } == mine

    info = acl_sync_info(flow)  # what the DR status page shows
    assert (info.enabled, info.synced, info.error) == (True, first.acls_synced, None)
    assert info.last_sync_at is not None and info.age_seconds is not None


def test_a_consumer_that_reads_on_primary_reads_the_copy_on_dr_after_a_sync(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore
) -> None:
    pair = secured_pair
    prefix = f"acl{uuid.uuid4().hex[:8]}"
    topic, group, user = f"{prefix}.events", f"{prefix}-group", f"{prefix}-reader"
    config = load_config(
        _replicator_config(
            pair,
            tmp_path,
            "sync.topic.acls.enabled = true",
            f"primary->dr.topics = {prefix}\\\\..*",
            "dr->primary.enabled = false",
        )
    )
    flow = config.flow("primary->dr")
    create_topic(pair.primary, topic, 1, client=pair.admin("primary"))
    produce_records(pair.primary, topic, make_records(20), client=pair.admin("primary"))
    client = pair.user(user)
    # The consumer's grants on primary; its group on both (groups are not synced, as in MM2).
    pair.grant(application_rules(["primary"], f"User:{user}", "consumer", topic, group))
    pair.grant([r for r in application_rules(["dr"], f"User:{user}", "consumer", topic, group)
                if r.resource_type == "GROUP"])  # fmt: skip
    on_primary = _read(pair.primary, topic, client, group)
    assert isinstance(on_primary, list) and len(on_primary) == 20

    remote = f"primary.{topic}"
    with running(flow):
        wait_until(lambda: pair.end_offsets("dr", remote, 1) == [20], 120, f"{remote} copied")
    assert _read(pair.dr, remote, client, group) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    sync_round(config, store.flows, ("acls",))

    assert _read(pair.dr, remote, client, group) == on_primary


def test_replicator_run_syncs_acls_on_its_interval(
    secured_pair: SecuredPair, tmp_path: Path, state_url: str
) -> None:
    """No sync round: `replicator run` itself syncs every sync.topic.acls.interval.seconds,
    and picks up an ACL added at the source while it runs."""
    pair = secured_pair
    prefix = f"acl{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}.live"
    config_file = _replicator_config(
        pair,
        tmp_path,
        "sync.topic.acls.enabled = true",
        "sync.topic.acls.interval.seconds = 1",
        f"primary->dr.topics = {prefix}\\\\..*",
        "dr->primary.enabled = false",
    )
    flow = load_config(config_file).flow("primary->dr")
    admin = _superuser(pair, tmp_path)
    first = Binding("TOPIC", "LITERAL", topic, f"User:{prefix}-a", "*", "READ", "ALLOW")
    later = Binding("TOPIC", "LITERAL", topic, f"User:{prefix}-b", "*", "ALL", "ALLOW")
    bindings.create(admin.clusters["primary"], [first])

    def on_dr() -> set[Binding]:
        found = bindings.topic_acls(admin.clusters["dr"], "DESCRIBE")
        return {b for b in found if b.principal.startswith(f"User:{prefix}")}

    log = tmp_path / "replicator.log"
    replicator = start_replicator(config_file, log, "--state-url", state_url)
    try:
        copy = Binding(
            "TOPIC", "LITERAL", f"primary.{topic}", first.principal, "*", "READ", "ALLOW"
        )
        wait_until(lambda: on_dr() == {copy}, 120, "the first ACL synced by replicator run")
        bindings.create(admin.clusters["primary"], [later])
        copied = Binding(
            "TOPIC", "LITERAL", f"primary.{topic}", later.principal, "*", "READ", "ALLOW"
        )
        wait_until(lambda: on_dr() == {copy, copied}, 60, "the ACL added while it runs")
        status = read_acl_status(flow)
        assert status is not None and status.error is None and status.synced_ms is not None
    finally:
        replicator.send_signal(signal.SIGTERM)
        code = replicator.wait(90)
        print(log.read_text()[-5000:])  # noqa: T201 - shown by pytest only if the test fails
    assert code == 0


@pytest.mark.parametrize(("cluster", "operation"), [("primary", "DESCRIBE"), ("dr", "ALTER")])
def test_a_principal_lacking_the_cluster_acl_is_told_which_where_and_how(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore, cluster: str, operation: str
) -> None:
    pair = secured_pair
    prefix = f"acl{uuid.uuid4().hex[:8]}"
    user = f"lacking-{uuid.uuid4().hex[:6]}"
    pair.user(user)
    security = pair.stack.security
    assert security is not None
    path = tmp_path / "lacking.properties"
    path.write_text(
        pair.clients_file.read_text()
        .replace('username="replicator"', f'username="{user}"')
        .replace(str(security.password_file("replicator")), str(security.password_file(user)))
        + f"sync.topic.acls.enabled = true\nprimary->dr.topics = {prefix}\\\\..*\n"
        "dr->primary.enabled = false\n"
    )
    config = load_config(path)
    rules = replicator_rules(config)
    kept = [
        r
        for r in rules
        if (r.cluster, r.resource_type, r.operation) != (cluster, "CLUSTER", operation)
    ]
    assert len(kept) == len(rules) - 1
    pair.grant(kept)
    admin = _superuser(pair, tmp_path)
    bindings.create(
        admin.clusters["primary"],
        [Binding("TOPIC", "LITERAL", f"{prefix}.t", f"User:{prefix}", "*", "READ", "ALLOW")],
    )

    with pytest.raises(ReplicatorError) as refused:
        sync_round(config, store.flows, ("acls",))

    message = str(refused.value)
    assert f"User:{user} lacks ALLOW {operation} on CLUSTER on cluster {cluster!r}" in message
    assert "replicator acls apply" in message
    # Not silent: the status page says so too.
    status = read_acl_status(config.flow("primary->dr"))
    assert status is not None and f"lacks ALLOW {operation} on CLUSTER" in (status.error or "")


@pytest.mark.timeout(600)
def test_grant_write_lets_the_producer_write_on_dr_after_failover_and_failback_removes_it(
    secured_pair: SecuredPair, tmp_path: Path, state_url: str, store: StateStore
) -> None:
    pair = secured_pair
    topic = f"demo.gw-{uuid.uuid4().hex[:8]}"  # the stack's flows replicate demo\..*
    app, user = f"app-{uuid.uuid4().hex[:8]}", f"gw-producer-{uuid.uuid4().hex[:6]}"
    producer_principal = f"User:{user}"
    config_file = _replicator_config(
        pair,
        tmp_path,
        f"applications.{app}.producer.principals = {producer_principal}",
        f"applications.{app}.producer.topics = {_properties(re.escape(topic))}",
    )
    config = load_config(config_file)
    admin = _superuser(pair, tmp_path)
    dr = admin.clusters["dr"]
    for bootstrap, cluster in ((pair.primary, "primary"), (pair.dr, "dr")):
        create_topic(bootstrap, topic, 1, client=pair.admin(cluster))
    producer = pair.user(user)
    pair.grant(application_rules(["primary"], producer_principal, "producer", topic))
    # An administrator's own grant on dr, which no failback may take away.
    theirs = Binding("TOPIC", "LITERAL", topic, producer_principal, "*", "DESCRIBE", "ALLOW")
    bindings.create(dr, [theirs])
    assert _write(pair.primary, topic, producer) is None
    # The 3 a.m. problem: the producer is refused on dr (nothing syncs WRITE).
    assert _write(pair.dr, topic, producer) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    store.applications.register(app, "primary")
    store.flows.set("dr->primary", "stopped")  # the failover starts it
    log = tmp_path / "replicator.log"
    replicator = start_replicator(config_file, log, "--state-url", state_url)
    try:
        wait_until(lambda: live_workers(config.flow("primary->dr")), 120, "the replicator running")

        def failover(**options: object) -> Failover:
            return Failover(
                config, "primary->dr", [app], store, reverse=True, grant_write=True,
                timeout_s=120, **options,  # type: ignore[arg-type]
            )  # fmt: skip

        dry = failover(dry_run=True).run()
        assert dry.ok, dry.error
        wanted = Binding("TOPIC", "LITERAL", topic, producer_principal, "*", "WRITE", "ALLOW")
        assert dry.report_of("grant_write")["would_grant"] == {app: [wanted.describe()]}
        assert dry.report_of("grant_write")["present"] == {app: [theirs.describe()]}
        assert _acls_of(dr, producer_principal) == {theirs}  # the dry run applied nothing

        done = failover().run()
        assert done.ok, done.error
        names = [s.name for s in done.steps]
        assert names.index("grant_write") == names.index("switch") - 1
        granted = done.report_of("grant_write")["granted"][app]
        assert [Binding.from_dict(b) for b in granted] == [wanted]
        assert _acls_of(dr, producer_principal) == {theirs, wanted}
        assert _write(pair.dr, topic, producer) is None

        # A retry applies nothing twice: the step is done, and even run again by hand
        # it takes the saved plan (what this run created), not a new look at dr.
        assert failover().run_step(done.procedure_id, "grant_write").status == "skipped"
        again = grant(store.runs, done.procedure_id, config, config.flow("primary->dr"), [app])
        assert again["granted"][app] == granted
        assert _acls_of(dr, producer_principal) == {theirs, wanted}

        back = Failback(config, "primary->dr", [app], store, timeout_s=120).run()
        assert back.ok, back.error
        revoked = back.report_of("revoke_write")
        assert revoked["revoked"] == [wanted.describe()]
        assert revoked["failovers"] == {app: done.procedure_id}
        assert _acls_of(dr, producer_principal) == {theirs}
        assert _write(pair.dr, topic, producer) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        replicator.send_signal(signal.SIGTERM)
        code = replicator.wait(90)
        print(log.read_text()[-5000:])  # noqa: T201 - shown by pytest only if the test fails
    assert code == 0
