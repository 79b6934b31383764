"""The secured path end to end (issue 14): a local stack with TLS, SCRAM-SHA-512 or mTLS
and the authorizer on; the replication engine, exactly-once, translation and
checkpoints run on it as the replicator's principal with exactly its planned ACLs;
bad credentials and certificates stop the command with one line naming the fix."""

from __future__ import annotations

import datetime
import re
import signal
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from replicator.acls.plan import application_rules, principal_of, replicator_rules
from replicator.cli import main
from replicator.config import load_config
from replicator.config.model import NameFilter
from replicator.config.properties import read_properties
from replicator.engine.headers import OFFSET_HEADER, decode_offset
from replicator.offsets.checkpoints import Checkpointer, read_checkpoints
from replicator.offsets.groups import GroupAdmin
from replicator.procedures import Failback, Failover, live_workers
from replicator.statestore import StateStore
from replicator.verification.run import verify
from replicator_lab import certificates

from helpers.kafka import Record, create_topic, make_records, produce_records, read_partition
from helpers.procedures import commit_offsets
from helpers.replication import preload, running, start_replicator, wait_until
from helpers.secured import SecuredPair, only_topic

pytestmark = pytest.mark.integration


def _own(record: Record) -> Record:
    """A replicated record without the two headers the replicator adds."""
    return replace(record, headers=tuple(h for h in record.headers if not h[0].startswith("__dr")))


def _demo_topic(pair: SecuredPair, prefix: str, partitions: int) -> str:
    """A topic the stack's configuration replicates (demo\\..*), created by the admin."""
    topic = f"demo.{prefix}-{uuid.uuid4().hex[:10]}"
    create_topic(pair.primary, topic, partitions, client=pair.admin("primary"))
    return topic


def _config_with(pair: SecuredPair, tmp_path: Path, *lines: str) -> Path:
    """The stack's clients.properties with `lines` added (later keys win)."""
    path = tmp_path / "mm2.properties"
    path.write_text(pair.clients_file.read_text() + "\n".join(lines) + "\n")
    return path


def test_only_authenticated_principals_get_in_and_only_to_their_acls(
    secured_pair: SecuredPair,
) -> None:
    pair = secured_pair
    server = read_properties(pair.stack.data_dir / "primary" / "server.properties")
    assert server["authorizer.class.name"].endswith("StandardAuthorizer")
    assert server["allow.everyone.if.no.acl.found"] == "false"
    assert server["super.users"] == "User:broker"

    anonymous = AdminClient({"bootstrap.servers": pair.primary, "log_level": 0})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=3)

    config = load_config(pair.clients_file)
    replicator = config.clusters["primary"].admin
    admin = AdminClient(replicator)
    assert admin.list_topics(timeout=10).cluster_id
    outside = f"not-demo-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(outside, 1, 1)])[outside].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # The file refers to the password; it never holds it.
    text = pair.clients_file.read_text()
    password = pair.stack.security.password("replicator")
    assert password not in text
    assert "primary.sasl.mechanism = SCRAM-SHA-512" in text
    assert "primary.security.protocol = SASL_SSL" in text

    # The broker holds exactly the planned ACLs of the replicator's principal.
    principals = {alias: principal_of(c) for alias, c in config.clusters.items()}
    assert set(principals.values()) == {"User:replicator"}
    planned = replicator_rules(config, principals)
    query = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:replicator",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for cluster in ("primary", "dr"):
        superuser = AdminClient(pair.admin(cluster))
        granted = superuser.describe_acls(query, request_timeout=30).result()
        assert len(granted) == len([r for r in planned if r.cluster == cluster])


def test_replicator_run_copies_and_checkpoints_with_the_stacks_config_as_is(
    secured_pair: SecuredPair, tmp_path: Path
) -> None:
    """`replicator run --config <data dir>/clients.properties`, unchanged; an
    application producer and consumer with their own principals and ACLs."""
    pair = secured_pair
    topic = _demo_topic(pair, "run", partitions=3)
    remote = f"primary.{topic}"
    group = f"app-{uuid.uuid4().hex[:8]}"
    pair.grant(application_rules(["primary"], "User:demo-producer", "producer", topic))
    pair.grant(application_rules(["primary"], "User:demo-consumer", "consumer", topic, group))
    records = make_records(3_000)
    produced = produce_records(pair.primary, topic, records, client=pair.user("demo-producer"))
    wanted = [len(produced[p]) for p in range(3)]

    log = tmp_path / "replicator.log"
    process = start_replicator(
        pair.clients_file, log, "--state-url", f"sqlite:///{tmp_path / 'state.db'}"
    )
    try:
        wait_until(lambda: pair.end_offsets("dr", remote, 3) == wanted, 120, f"{remote} copied")
        for partition in range(3):
            copied = read_partition(pair.dr, remote, partition, client=pair.admin("dr"))
            assert [_own(r) for _, r in copied] == [r for _, r in produced[partition]]

        consumer = Consumer(
            {
                "bootstrap.servers": pair.primary,
                **pair.user("demo-consumer"),
                "group.id": group,
                "enable.auto.commit": False,
            }
        )
        consumer.commit(
            offsets=[TopicPartition(topic, p, wanted[p] // 2) for p in range(3)],
            asynchronous=False,
        )
        consumer.close()
        flow = load_config(pair.clients_file).flow("primary->dr")
        with Checkpointer(flow) as checkpointer:
            positions = checkpointer.translate_group(group)
            report = checkpointer.emit([group])
        assert all(p.translation.exact for p in positions)
        # The running replicator's checkpoint loop may have written them first.
        assert len(report.emitted) + report.unchanged == 3 and not report.held
        stored = read_checkpoints(flow.target, "primary.checkpoints.internal")
        for checkpoint in (position.checkpoint() for position in positions):
            assert stored[(group, remote, checkpoint.partition)] == checkpoint
            assert checkpoint.upstream == wanted[checkpoint.partition] // 2
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    output = log.read_text()
    assert code == 0, output[-3000:]
    # The password is in no log line, no status or checkpoint record, no state store row.
    password = pair.stack.security.password("replicator").encode()
    assert password not in output.encode()
    assert password not in (tmp_path / "state.db").read_bytes()
    for internal in ("replicator-status.internal", "primary.checkpoints.internal"):
        for _, record in read_partition(pair.dr, internal, 0, client=pair.admin("dr")):
            assert password not in (record.key or b"") + (record.value or b"")


def test_exactly_once_on_the_secured_stack_survives_kill_9(
    secured_pair: SecuredPair,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Transactions need one more ACL (WRITE on the transactional ids), which
    `replicator acls apply` adds for a configuration with exactly.once."""
    monkeypatch.setenv("COLUMNS", "1000")  # the table's rows one a line, no name wrapped
    pair = secured_pair
    config = _config_with(pair, tmp_path, "exactly.once = true")
    admin_config = pair.write_admin_config(tmp_path / "admin.properties")
    apply = ["acls", "apply", "--config", str(config), "--admin-config", str(admin_config)]
    assert main(apply) == 0
    applied = capsys.readouterr().out
    assert "TRANSACTIONAL_ID" in applied and "replicator-primary-dr- (prefixed)" in applied

    partitions = 3
    topic = _demo_topic(pair, "eos", partitions)
    remote = f"primary.{topic}"
    wanted = preload_secured(pair, topic, 90_000, partitions)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    log = tmp_path / "replicator.log"
    first = start_replicator(config, log, "--state-url", state)
    try:
        wait_until(
            lambda: sum(pair.end_offsets("dr", remote, partitions) or [0]) > 5_000, 120, "progress"
        )
    finally:
        first.kill()  # kill -9, most likely inside a transaction
        first.wait(30)
    second = start_replicator(config, log, "--state-url", state)
    try:
        wait_until(
            lambda: (
                _committed_source_offsets(pair, remote, partitions)
                == [list(range(n)) for n in wanted]
            ),
            180,
            "every record committed exactly once",
        )
    finally:
        second.send_signal(signal.SIGTERM)
        code = second.wait(60)
    assert code == 0, log.read_text()[-3000:]


def preload_secured(pair: SecuredPair, topic: str, records: int, partitions: int) -> list[int]:
    """`preload` as the stack's admin (test data, not what is under test)."""
    return preload(pair.primary, topic, records, partitions, client=pair.admin("primary"))


def _committed_source_offsets(pair: SecuredPair, remote: str, partitions: int) -> list[list[int]]:
    """Per target partition, the source offsets of the committed copies, in order."""
    return [
        [
            decode_offset(dict(record.headers)[OFFSET_HEADER])
            for _, record in read_partition(pair.dr, remote, p, client=pair.admin("dr"))
        ]
        for p in range(partitions)
    ]


def test_replication_over_mtls(mtls_pair: SecuredPair) -> None:
    """Client certificates instead of passwords: the principal is the certificate's CN."""
    pair = mtls_pair
    config = load_config(pair.clients_file)
    assert principal_of(config.clusters["dr"]) == "User:replicator"
    topic = _demo_topic(pair, "mtls", partitions=2)
    records = make_records(1_000)
    produced = produce_records(pair.primary, topic, records, client=pair.admin("primary"))
    remote = f"primary.{topic}"
    wanted = [len(produced[p]) for p in range(2)]
    with running(config.flow("primary->dr")):
        wait_until(lambda: pair.end_offsets("dr", remote, 2) == wanted, 90, f"{remote} copied")
    for partition in range(2):
        copied = read_partition(pair.dr, remote, partition, client=pair.admin("dr"))
        assert [_own(r) for _, r in copied] == [r for _, r in produced[partition]]


def _on_dr(text: str, key: str, old: str, new: str) -> str:
    """`text` with `old` replaced by `new` in dr's `key` only: the message must name
    dr, the cluster that is wrong, not primary."""
    return "\n".join(
        line.replace(old, new) if line.startswith(f"dr.{key} ") else line
        for line in text.splitlines()
    )


def _wrong_password(pair: SecuredPair, tmp_path: Path) -> tuple[str, str, str]:
    wrong = tmp_path / "wrong.password"
    wrong.write_text("password=not-the-password\n")
    right = str(pair.stack.security.password_file("replicator"))
    text = _on_dr(pair.clients_file.read_text(), "sasl.jaas.config", right, str(wrong))
    return text, "dr.sasl.jaas.config", "credentials of user 'replicator'"


def _untrusted(pair: SecuredPair, tmp_path: Path) -> tuple[str, str, str]:
    other = tmp_path / "other-ca.pem"
    other.write_bytes(certificates.new_ca("another CA").certificate_pem())
    ca = str(pair.stack.security.ca_file)
    text = _on_dr(pair.clients_file.read_text(), "ssl.truststore.location", ca, str(other))
    return text, "dr.ssl.truststore.location", "not trusted"


def _hostname(pair: SecuredPair, tmp_path: Path) -> tuple[str, str, str]:
    text = _on_dr(pair.clients_file.read_text(), "bootstrap.servers", "127.0.0.1", "localhost")
    return text, "dr.bootstrap.servers", "not valid for 'localhost'"


def _missing_truststore(pair: SecuredPair, tmp_path: Path) -> tuple[str, str, str]:
    ca = str(pair.stack.security.ca_file)
    missing = str(tmp_path / "no-such-ca.pem")
    text = _on_dr(pair.clients_file.read_text(), "ssl.truststore.location", ca, missing)
    return text, "dr.ssl.truststore.location", "does not exist"


@pytest.mark.parametrize(
    "bad", [_wrong_password, _untrusted, _hostname, _missing_truststore], ids=lambda f: f.__name__
)
def test_bad_credentials_stop_replicator_run_with_one_line(
    secured_pair: SecuredPair, tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: object
) -> None:
    """Each mistake stops `replicator run` at once, before any worker starts (nothing
    written), with one line naming the cluster, the setting and the fix."""
    pair = secured_pair
    text, setting, reason = bad(pair, tmp_path)  # type: ignore[operator]
    config = tmp_path / "bad.properties"
    config.write_text(text)
    before = set(AdminClient(pair.admin("dr")).list_topics(timeout=10).topics)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    assert main(["run", "--config", str(config), "--state-url", state]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("replicator: error: cluster 'dr'"), err[0]
    assert setting in err[0] and reason in err[0], err[0]
    assert pair.stack.security.password("replicator") not in err[0]
    assert set(AdminClient(pair.admin("dr")).list_topics(timeout=10).topics) == before


@pytest.mark.parametrize(
    ("missing", "expected"),
    [
        (
            ("dr", "TOPIC", "LITERAL", "primary.{topic}", "WRITE"),
            "lacks ALLOW WRITE on TOPIC primary.{topic} on cluster 'dr'",
        ),
        (
            ("primary", "GROUP", "PREFIXED", "replicator-", "READ"),
            "lacks ALLOW READ on GROUP replicator-primary-dr on cluster 'primary'",
        ),
    ],
    ids=["target-write", "source-group"],
)
def test_a_replicator_without_one_acl_stops_naming_it(
    secured_pair: SecuredPair, tmp_path: Path, missing: tuple[str, ...], expected: str
) -> None:
    """Every planned ACL but one: the replicator stops, naming the missing operation,
    the resource and the principal, and the fix."""
    pair = secured_pair
    user = f"lacking-{uuid.uuid4().hex[:6]}"
    pair.user(user)
    security = pair.stack.security
    text = (
        pair.clients_file.read_text()
        .replace('username="replicator"', f'username="{user}"')
        .replace(str(security.password_file("replicator")), str(security.password_file(user)))
    )
    topic = _demo_topic(pair, "acl", partitions=1)
    # This topic only: the pair's other tests leave demo topics this user may not
    # write either, and the flow stops at the first refused one.
    config = tmp_path / "lacking.properties"
    config.write_text(
        text.replace("dr->primary.enabled = true", "dr->primary.enabled = false")
        + f"\n{only_topic('primary->dr', topic)}\n"
    )
    loaded = load_config(config)
    rules = replicator_rules(loaded)
    missing = tuple(part.format(topic=topic) for part in missing)
    kept = [
        rule
        for rule in rules
        if (rule.cluster, rule.resource_type, rule.pattern_type, rule.name, rule.operation)
        != missing
    ]
    assert len(kept) == len(rules) - 1
    pair.grant(kept)
    produce_records(pair.primary, topic, make_records(10), client=pair.admin("primary"))

    log = tmp_path / "replicator.log"
    process = start_replicator(config, log, "--state-url", f"sqlite:///{tmp_path / 'state.db'}")
    expected = expected.format(topic=topic)
    try:
        wait_until(lambda: expected in log.read_text(), 120, f"an error saying {expected!r}")
    finally:
        process.kill()
        process.wait(30)
    named = [line for line in log.read_text().splitlines() if expected in line]
    assert f"User:{user}" in named[0] and "replicator acls apply" in named[0]
    # Nothing was written half: the copy is empty (the flow stopped at its first batch).
    assert pair.end_offsets("dr", f"primary.{topic}", 1) in ([0], None) or missing[-1] != "WRITE"


def test_planned_failover_and_failback_on_the_secured_stack(
    secured_pair: SecuredPair, tmp_path: Path, state_url: str, store: StateStore
) -> None:
    """The procedures run with the replicator's own principal and ACLs: drain, stop,
    checkpoint, commit the application's offsets on dr, start the reverse flow,
    and back; the group's position is carried over exactly both ways."""
    pair = secured_pair
    topic = _demo_topic(pair, "failover", partitions=2)
    create_topic(pair.dr, topic, 2, client=pair.admin("dr"))  # the reverse flow's source
    wanted = preload_secured(pair, topic, 2_000, 2)
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    store.flows.set("dr->primary", "stopped")  # the failover starts it
    config = load_config(pair.clients_file)
    dr = config.clusters["dr"]
    halfway = {(topic, p): n // 2 for p, n in enumerate(wanted)}
    commit_offsets(config.clusters["primary"], app, halfway)
    log = tmp_path / "replicator.log"
    replicator = start_replicator(pair.clients_file, log, "--state-url", state_url)
    try:
        wait_until(lambda: live_workers(config.flow("primary->dr")), 120, "the replicator running")
        failover = Failover(config, "primary->dr", [app], store, reverse=True, timeout_s=120).run()
        assert failover.ok, failover.error
        assert failover.rpo_records == 0
        assert store.applications.get(app).active_cluster == "dr"
        on_dr = {(c.topic, c.partition): c.offset for c in GroupAdmin(dr).committed(app)}
        assert on_dr == {(f"primary.{topic}", p): n // 2 for p, n in enumerate(wanted)}

        failback = Failback(config, "primary->dr", [app], store, timeout_s=120).run()
        assert failback.ok, failback.error
        assert store.applications.get(app).active_cluster == "primary"
        assert store.flows.get("primary->dr").state == "running"
    finally:
        replicator.send_signal(signal.SIGTERM)
        code = replicator.wait(90)
        print(log.read_text()[-5000:])  # noqa: T201 - shown by pytest only if the test fails
    assert code == 0


@pytest.mark.timeout(900)  # a Spark job and the GX suites on a busy machine
def test_spark_verification_reads_the_secured_clusters(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore
) -> None:
    """`replicator verify` on SASL_SSL: the Spark connector gets the configuration's
    security settings as `kafka.` options (loaded by the job from the file the plan
    names), and the password is in no file the run leaves (plan, logs, tables)."""
    pair = secured_pair
    topic = _demo_topic(pair, "verify", partitions=2)
    wanted = preload_secured(pair, topic, 1_000, 2)
    flow = replace(load_config(pair.clients_file).flow("primary->dr"), topics=_only(topic))
    with running(flow):
        wait_until(lambda: pair.end_offsets("dr", f"primary.{topic}", 2) == wanted, 90, "copied")
    result = verify(flow, store, results=tmp_path / "results", config_file=pair.clients_file)
    assert result.success, result.summary
    password = pair.stack.security.password("replicator").encode()
    leaked = [p for p in result.directory.rglob("*") if p.is_file() and password in p.read_bytes()]
    assert not leaked


def _only(topic: str) -> NameFilter:
    return NameFilter((re.compile(re.escape(topic)),))


def _client_certificate(
    pair: SecuredPair,
    tmp_path: Path,
    ca: certificates.Issued,
    valid_from: datetime.datetime | None = None,
    valid_for: datetime.timedelta = certificates.VALIDITY,
) -> str:
    """clients.properties with dr's keystore replaced by a certificate of `ca`."""
    keystore = tmp_path / f"client-{uuid.uuid4().hex[:6]}.pem"
    issued = certificates.issue(
        ca, "replicator", server=False, valid_from=valid_from, valid_for=valid_for
    )
    keystore.write_bytes(issued.key_and_chain_pem(ca))
    right = str(pair.stack.security.keystore("replicator"))
    return _on_dr(pair.clients_file.read_text(), "ssl.keystore.location", right, str(keystore))


def test_refused_client_certificates_stop_replicator_run_with_one_line(
    mtls_pair: SecuredPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mTLS: a client certificate of another CA, and an expired one of the right CA."""
    pair = mtls_pair
    stack_ca = certificates.load(pair.stack.security.ca_key_file)
    cases = [
        (
            _client_certificate(pair, tmp_path, certificates.new_ca("another CA")),
            "refused the TLS handshake",
        ),
        (
            _client_certificate(
                pair,
                tmp_path,
                stack_ca,
                valid_from=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30),
                valid_for=datetime.timedelta(days=1),
            ),
            "expired on",
        ),
    ]
    for text, reason in cases:
        config = tmp_path / "bad.properties"
        config.write_text(text)
        state = f"sqlite:///{tmp_path / 'state.db'}"
        assert main(["run", "--config", str(config), "--state-url", state]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith("replicator: error: cluster 'dr'"), err[0]
        assert "dr.ssl.keystore.location" in err[0] and reason in err[0], err[0]
