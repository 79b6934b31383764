"""`replicator import strimzi` round-trips on real clusters (issue 44, point 4).

A KafkaMirrorMaker2 whose source connector carries Kafka Connect's per-connector client
overrides (`producer.override.batch.size`, `producer.override.linger.ms`, as Strimzi
users tune MM2's producer) and a `consumer.override.*` (which Connect applies to sink
connectors only) is converted through the CLI; the file it writes is what `replicator
run` loads: it loads, puts the producer overrides on the flow's target producer, and
replicates every record. Before, the loader refused the `producer.override.*` keys the
import wrote ("unknown setting")."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from replicator.config import load_config

from helpers.kafka import create_topic, make_records, produce_records, read_partition, unique_topic
from helpers.replication import end_offsets, running, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
RECORDS = 400

RESOURCE = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: imported
spec:
  version: 3.9.0
  replicas: 1
  connectCluster: "{target}"
  clusters:
  - alias: "{source}"
    bootstrapServers: {primary}
  - alias: "{target}"
    bootstrapServers: {dr}
    config:
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "{source}"
    targetCluster: "{target}"
    sourceConnector:
      tasksMax: 1
      config:
        replication.factor: 1
        offset-syncs.topic.replication.factor: 1
        sync.topic.acls.enabled: "false"
        refresh.topics.interval.seconds: 1
        producer.override.batch.size: 327680
        producer.override.linger.ms: 20
        consumer.override.fetch.min.bytes: 5
    heartbeatConnector:
      config:
        heartbeats.topic.replication.factor: 1
    checkpointConnector:
      config:
        checkpoints.topic.replication.factor: 1
    topicsPattern: "{topic}"
    groupsPattern: ".*"
"""


def test_an_imported_resource_with_client_overrides_loads_and_replicates(
    primary: str, dr: str, tmp_path: Path
) -> None:
    topic = unique_topic("strimzi")
    create_topic(primary, topic, partitions=PARTITIONS)
    produce_records(primary, topic, make_records(RECORDS))
    tag = uuid.uuid4().hex[:6]
    source, target = f"strimzi-a-{tag}", f"strimzi-b-{tag}"
    resource = tmp_path / "mm2.yaml"
    resource.write_text(
        RESOURCE.format(source=source, target=target, primary=primary, dr=dr, topic=topic),
        encoding="utf-8",
    )
    properties = tmp_path / "mm2.properties"
    converted = subprocess.run(
        [sys.executable, "-m", "replicator", "import", "strimzi", str(resource),
         "-o", str(properties), "--secrets-dir", str(tmp_path / "secrets")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr
    text = properties.read_text(encoding="utf-8")
    assert f"{source}->{target}.producer.override.batch.size = 327680" in text, text

    flow = load_config(properties).flow(f"{source}->{target}")  # as `replicator run` loads it
    assert flow.target.producer["batch.size"] == "327680"
    assert flow.target.producer["linger.ms"] == "20"
    assert "fetch.min.bytes" not in flow.source.consumer  # Connect: sink connectors only
    remote = f"{source}.{topic}"
    with running(flow):
        wait_until(
            lambda: sum(end_offsets(dr, remote, PARTITIONS) or [0]) == RECORDS,
            120,
            f"{RECORDS} records in {remote} on the target",
        )
    for partition in range(PARTITIONS):
        written = [r.value for _, r in read_partition(primary, topic, partition)]
        copied = [r.value for _, r in read_partition(dr, remote, partition)]
        assert copied == written, f"{remote}[{partition}]"
