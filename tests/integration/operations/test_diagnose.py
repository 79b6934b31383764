"""`replicator diagnose` on the real clusters: each reason a topic is not (fully)
replicated is named with its partition, offset and fix, and a healthy topic is
reported as replicated with every check listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclOperation, AdminClient, TopicDescription

from replicator.config.model import FlowConfig
from replicator.engine.status import PartitionStatus, read_status
from replicator.operations.diagnose import Diagnosis, Finding, diagnose

from helpers.kafka import create_topic, unique_topic
from helpers.replication import (
    end_offsets,
    flow_config,
    preload,
    recreate_topic,
    running,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

SOURCE_LIMIT = 2_097_152
BIG = 1_500_000


def _flow(primary: str, dr: str, topics: str, **properties: str) -> FlowConfig:
    return flow_config(("primary", primary), ("dr", dr), topics=topics, properties=properties)


def _findings(diagnosis: Diagnosis, check: str, partition: int | None = None) -> list[Finding]:
    return [f for f in diagnosis.findings if f.check == check and f.partition == partition]


def _one(diagnosis: Diagnosis, check: str, partition: int | None = None) -> Finding:
    found = _findings(diagnosis, check, partition)
    assert len(found) == 1, f"one {check!r} finding wanted:\n{diagnosis.render()}"
    return found[0]


def _states(flow: FlowConfig, topic: str) -> dict[int, str]:
    """Partition -> state, as the status topic says now."""
    return {
        r.partition: r.state
        for r in read_status(flow.target, flow.name)
        if isinstance(r, PartitionStatus) and r.topic == topic
    }


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    """Produce `values` (records up to 4 MB) to one partition, in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.max.bytes": 4_000_000}
    )
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(60) == 0, f"records to {topic}[{partition}] undelivered after 60 s"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator", "diagnose", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_topic_excluded_by_filter(primary: str, dr: str) -> None:
    prefix = unique_topic("diag-excluded")
    topic = f"{prefix}.secret"
    create_topic(primary, topic)
    flow = _flow(primary, dr, f"{prefix}\\..*", **{"topics.exclude": ".*\\.secret, __.*"})

    diagnosis = diagnose(flow, topic)

    assert diagnosis.verdict == "not replicated"
    excluded = _one(diagnosis, "topics filter")
    assert excluded.status == "problem"
    assert "'.*\\\\.secret'" in excluded.detail, excluded.detail
    assert "topics.exclude" in str(excluded.fix)
    assert _one(diagnosis, "source topic").status == "ok"
    assert diagnosis.render().splitlines()[1].startswith("  PROBLEM  topics filter")


def test_internal_and_cycle_rules(primary: str, dr: str) -> None:
    """MM2's rules hold whatever the filter says: internal topics never replicate,
    and a topic that came from the target would loop."""
    flow = _flow(primary, dr, ".*")
    internal = diagnose(flow, "__consumer_offsets")
    assert _one(internal, "internal topic").status == "problem"
    assert internal.verdict == "not replicated"

    looped = f"dr.{unique_topic('diag-loop')}"
    create_topic(primary, looped)
    cycle = diagnose(flow, looped)
    assert cycle.verdict == "not replicated"
    finding = _one(cycle, "cycle")
    assert finding.status == "problem" and "'dr'" in finding.detail and "loop" in finding.detail


def test_oversized_record_stops_a_partition(primary: str, dr: str) -> None:
    """Without config sync the remote keeps the broker's 1 MB limit: partition 0
    stops at the 1.5 MB record; diagnose names the partition, the offset, both
    limits and the fix, while partition 1 replicates."""
    topic = unique_topic("diag-big")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=2, config={"max.message.bytes": str(SOURCE_LIMIT)})
    _produce(primary, topic, 0, [b"before-0", b"before-1", b"before-2", os.urandom(BIG), b"after"])
    _produce(primary, topic, 1, [b"other"] * 5)
    flow = _flow(primary, dr, topic, **{"sync.topic.configs.enabled": "false"})

    with running(flow):
        wait_until(lambda: _states(flow, topic).get(0) == "stopped", 60, "partition 0 stopped")
        wait_until(lambda: end_offsets(dr, remote, 2) == [3, 5], 60, "records before the big one")
        diagnosis = diagnose(flow, topic)

    assert diagnosis.verdict == "partially replicated", diagnosis.render()
    stopped = _one(diagnosis, "status", 0)
    assert stopped.status == "problem"
    assert f"{topic}[0] offset 3" in stopped.detail, stopped.detail
    assert f"raise max.message.bytes of {remote}" in str(stopped.fix), stopped.fix
    assert "oversized.record.policy=skip" in str(stopped.fix)
    limits = _one(diagnosis, "max.message.bytes")
    assert limits.status == "problem"
    assert "1048588" in limits.detail and str(SOURCE_LIMIT) in limits.detail, limits.detail
    assert "sync.topic.configs.enabled=true" in str(limits.fix)
    assert _one(diagnosis, "status", 1).status == "ok"
    assert _one(diagnosis, "offsets", 0).status == "ok"  # it stopped inside the log


def test_recreated_source_topic(primary: str, dr: str) -> None:
    """The source topic is recreated with fewer records than were replicated: the
    resume offset lies beyond its end, and diagnose says so with the fix."""
    topic = unique_topic("diag-recreated")
    remote = f"primary.{topic}"
    create_topic(primary, topic)
    preload(primary, topic, 30, 1)
    flow = _flow(primary, dr, topic)
    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 1) == [30], 60, "first records")
    recreate_topic(primary, topic)
    preload(primary, topic, 10, 1)
    with running(flow):
        wait_until(lambda: _states(flow, topic).get(0) == "stopped", 60, "partition 0 stopped")

    diagnosis = diagnose(flow, topic)

    assert diagnosis.verdict == "not replicated", diagnosis.render()
    offsets = _one(diagnosis, "offsets", 0)
    assert offsets.status == "problem"
    assert "resume offset 30 is beyond the source log end 10" in offsets.detail, offsets.detail
    assert "recreated" in offsets.detail and "topic.reset.policy=skip" in str(offsets.fix)
    stopped = _one(diagnosis, "status", 0)
    assert stopped.status == "problem" and "topic.reset.policy=skip" in str(stopped.fix)
    assert "beyond the source log end" in stopped.detail


def test_remote_topic_with_fewer_partitions(primary: str, dr: str) -> None:
    topic = unique_topic("diag-narrow")
    create_topic(primary, topic, partitions=3)
    create_topic(dr, f"primary.{topic}", partitions=1)

    diagnosis = diagnose(_flow(primary, dr, topic), topic)

    assert diagnosis.verdict == "not replicated", diagnosis.render()
    finding = _one(diagnosis, "target topic")
    assert finding.status == "problem" and "partitions 1..2 of" in finding.detail, finding.detail
    assert f"--topic primary.{topic} --partitions 3" in str(finding.fix)
    assert _one(diagnosis, "status", 0).status == "warning"  # never replicated


def test_healthy_topic_and_cli(tmp_path: Path, primary: str, dr: str) -> None:
    topic = unique_topic("diag-healthy")
    create_topic(primary, topic, partitions=3)
    wanted = preload(primary, topic, 300, 3)
    flow = _flow(primary, dr, topic)
    config = write_config(tmp_path, primary, dr, topic)

    with running(flow):
        wait_until(lambda: end_offsets(dr, f"primary.{topic}", 3) == wanted, 60, "all records")
        wait_until(lambda: len(_states(flow, topic)) == 3, 60, "status of every partition")
        diagnosis = diagnose(flow, topic)
        cli = _cli("--config", str(config), "--flow", "primary->dr", topic, "--json")

    assert diagnosis.verdict == "replicated", diagnosis.render()
    assert {f.status for f in diagnosis.findings} == {"ok"}, diagnosis.render()
    checked = {f.check for f in diagnosis.findings}
    assert {"source topic", "target topic", "status", "offsets", "lag", "workers"} <= checked
    assert _one(diagnosis, "lag", 2).detail == f"{topic}[2]: 0 records behind"
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["verdict"] == "replicated"


def test_missing_topic_suggests_close_names(tmp_path: Path, primary: str, dr: str) -> None:
    topic = unique_topic("diag-orders")
    create_topic(primary, topic)
    typo = topic.replace("orders", "ordrs")
    flow = _flow(primary, dr, ".*")

    diagnosis = diagnose(flow, typo)
    assert diagnosis.verdict == "not replicated"
    missing = _one(diagnosis, "source topic")
    assert missing.status == "problem" and f"{typo} does not exist on 'primary'" in missing.detail
    assert topic in str(missing.fix)
    assert topic in str(_one(diagnose(flow, f"primary.{topic}"), "source topic").fix)

    config = write_config(tmp_path, primary, dr, ".*")
    cli = _cli("--config", str(config), "--flow", "primary->dr", typo, "--json")
    assert cli.returncode == 1, cli.stderr
    findings = json.loads(cli.stdout)["findings"]
    assert [f["fix"] for f in findings if f["check"] == "source topic"] == [missing.fix]
    text = _cli("--config", str(config), "--flow", "primary->dr", typo)
    assert text.returncode == 1
    assert f"flow primary->dr: {typo} -> primary.{typo}: not replicated" in text.stdout


# -- authorization: the clusters run without an authorizer, so the broker's answers
# -- are replaced by what a broker with ACLs would say -----------------------------------


def _answer_describe_topics(monkeypatch: pytest.MonkeyPatch, topic: str, answer: object) -> None:
    """Make the brokers answer `answer(description)` to DescribeTopics of `topic`."""
    describe = AdminClient.describe_topics

    def describe_topics(self: AdminClient, topics: object, **kwargs: object) -> dict[str, Future]:
        futures = describe(self, topics, **kwargs)
        if topic in futures:
            replaced: Future = Future()
            try:
                replaced.set_result(answer(futures[topic].result()))
            except KafkaException as exc:
                replaced.set_exception(exc)
            futures[topic] = replaced
        return futures

    monkeypatch.setattr(AdminClient, "describe_topics", describe_topics)


def test_missing_read_permission_named(
    monkeypatch: pytest.MonkeyPatch, primary: str, dr: str
) -> None:
    topic = unique_topic("diag-acl")
    create_topic(primary, topic)

    def without_read(description: TopicDescription) -> TopicDescription:
        granted = [op for op in description.authorized_operations if op != AclOperation.READ]
        return TopicDescription(
            description.name,
            description.topic_id,
            description.is_internal,
            description.partitions,
            granted,
        )

    _answer_describe_topics(monkeypatch, topic, without_read)
    diagnosis = diagnose(_flow(primary, dr, topic), topic)

    assert diagnosis.verdict == "not replicated"
    finding = _one(diagnosis, "authorization")
    assert finding.status == "problem" and "consume (READ)" in finding.detail, finding.detail
    assert f"READ on topic {topic} on 'primary'" in str(finding.fix)


def test_describe_refused_makes_the_verdict_unknown(
    monkeypatch: pytest.MonkeyPatch, primary: str, dr: str
) -> None:
    topic = unique_topic("diag-refused")
    create_topic(primary, topic)

    def refuse(_: TopicDescription) -> TopicDescription:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    _answer_describe_topics(monkeypatch, topic, refuse)
    diagnosis = diagnose(_flow(primary, dr, topic), topic)

    assert diagnosis.verdict == "unknown"
    finding = _one(diagnosis, "authorization")
    assert f"not allowed to describe topic {topic} on 'primary'" in finding.detail
    assert f"DESCRIBE on topic {topic} on 'primary'" in str(finding.fix)
