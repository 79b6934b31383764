"""`replicator.config.strimzi`: a Strimzi KafkaMirrorMaker2 resource as an mm2.properties.

Each conversion is loaded with the replicator's own loader (`load_config`, what
`replicator run` uses), the Secrets written as files under a temporary secrets dir as
Kubernetes mounts them, and the resolved values checked. The first resources are
Strimzi's own examples (packaging/examples/mirror-maker/), as Strimzi ships them.
"""

from __future__ import annotations

import re

import pytest
import yaml

from replicator.config import load_config
from replicator.config.strimzi import convert, convert_text
from replicator.errors import ConfigError

PASSWORD = "p4ss-w0rd-never-shown"

# --- Strimzi's examples, as shipped -------------------------------------------------------

STRIMZI_PLAIN = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 3.4.0
  replicas: 1
  connectCluster: "cluster-b" # Must be the target custer
  clusters:
  - alias: "cluster-a" # Source cluster
    bootstrapServers: cluster-a-kafka-bootstrap:9092
  - alias: "cluster-b" # Target cluster
    bootstrapServers: cluster-b-kafka-bootstrap:9092
    config:
      # -1 means it will use the default replication factor configured in the broker
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
    sourceConnector:
      tasksMax: 1
      config:
        replication.factor: 1
        offset-syncs.topic.replication.factor: 1
        sync.topic.acls.enabled: "false"
    checkpointConnector:
      tasksMax: 1
      config:
        checkpoints.topic.replication.factor: 1
    topicsPattern: ".*"
    groupsPattern: ".*"
"""

STRIMZI_TLS = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 3.5.0
  replicas: 1
  connectCluster: "cluster-b" # Must be the target custer
  clusters:
  - alias: "cluster-a" # Source cluster
    bootstrapServers: cluster-a-kafka-bootstrap:9093
    tls:
      trustedCertificates:
        - secretName: cluster-a-cluster-ca-cert
          certificate: ca.crt
  - alias: "cluster-b" # Target cluster
    bootstrapServers: cluster-b-kafka-bootstrap:9093
    tls:
      trustedCertificates:
        - secretName: cluster-b-cluster-ca-cert
          certificate: ca.crt
    config:
      # -1 means it will use the default replication factor configured in the broker
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
    sourceConnector:
      tasksMax: 1
      config:
        # -1 means it will use the default replication factor configured in the broker
        replication.factor: -1
        offset-syncs.topic.replication.factor: -1
        sync.topic.acls.enabled: "false"
    checkpointConnector:
      tasksMax: 1
      config:
        checkpoints.topic.replication.factor: -1
    topicsPattern: ".*"
    groupsPattern: ".*"
"""

# Older Strimzi examples trust the cluster CA Secret by pattern.
STRIMZI_TLS_PATTERN = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 4.0.0
  replicas: 1
  connectCluster: "cluster-b" # Must be the target custer
  clusters:
  - alias: "cluster-a" # Source cluster
    bootstrapServers: cluster-a-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - secretName: cluster-a-cluster-ca-cert
        pattern: "*.crt"
  - alias: "cluster-b" # Target cluster
    bootstrapServers: cluster-b-kafka-bootstrap:9093
    tls:
      trustedCertificates:
      - secretName: cluster-b-cluster-ca-cert
        pattern: "*.crt"
    config:
      # -1 means it will use the default replication factor configured in the broker
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
  mirrors:
  - sourceCluster: "cluster-a"
    targetCluster: "cluster-b"
    sourceConnector:
      tasksMax: 1
      config:
        replication.factor: -1
        offset-syncs.topic.replication.factor: -1
        sync.topic.acls.enabled: "false"
        refresh.topics.interval.seconds: 600
    checkpointConnector:
      tasksMax: 1
      config:
        checkpoints.topic.replication.factor: -1
        sync.group.offsets.enabled: "false"
        refresh.groups.interval.seconds: 600
    topicsPattern: ".*"
    groupsPattern: ".*"
"""

STRIMZI_CUSTOM_POLICY = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  version: 4.3.2
  replicas: 1
  target:
    alias: cluster-b
    bootstrapServers: cluster-b-kafka-bootstrap:9092
    groupId: my-mirror-maker-2-group
    configStorageTopic: my-mirror-maker-2-config
    offsetStorageTopic: my-mirror-maker-2-offset
    statusStorageTopic: my-mirror-maker-2-status
    config:
      # -1 means it will use the default replication factor configured in the broker
      config.storage.replication.factor: -1
      offset.storage.replication.factor: -1
      status.storage.replication.factor: -1
  mirrors:
  - source:
      bootstrapServers: cluster-a-kafka-bootstrap:9092
      alias: cluster-a
    sourceConnector:
      tasksMax: 1
      config:
        # -1 means it will use the default replication factor configured in the broker
        replication.factor: -1
        offset-syncs.topic.replication.factor: -1
        sync.topic.acls.enabled: "false"
        replication.policy.class: "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
        refresh.topics.interval.seconds: 600
    checkpointConnector:
      tasksMax: 1
      config:
        # -1 means it will use the default replication factor configured in the broker
        checkpoints.topic.replication.factor: -1
        replication.policy.class: "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
        sync.group.offsets.enabled: "false"
        refresh.groups.interval.seconds: 600
    topicsPattern: ".*"
    groupsPattern: ".*"
"""

# SCRAM-SHA-512 over TLS (the documentation's "securing MirrorMaker 2" shape, v1beta2).
STRIMZI_SCRAM = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
  namespace: kafka
spec:
  version: 3.9.0
  replicas: 3
  connectCluster: "my-target-cluster"
  clusters:
  - alias: "my-source-cluster"
    bootstrapServers: my-source-cluster-kafka-bootstrap:9094
    tls:
      trustedCertificates:
        - secretName: my-source-cluster-cluster-ca-cert
          certificate: ca.crt
    authentication:
      type: scram-sha-512
      username: my-source-user
      passwordSecret:
        secretName: my-source-user
        password: password
  - alias: "my-target-cluster"
    bootstrapServers: my-target-cluster-kafka-bootstrap:9094
    tls:
      trustedCertificates:
        - secretName: my-target-cluster-cluster-ca-cert
          certificate: ca.crt
    authentication:
      type: scram-sha-512
      username: my-target-user
      passwordSecret:
        secretName: my-target-user
        password: password
    config:
      config.storage.replication.factor: 1
      offset.storage.replication.factor: 1
      status.storage.replication.factor: 1
  mirrors:
  - sourceCluster: "my-source-cluster"
    targetCluster: "my-target-cluster"
    sourceConnector:
      tasksMax: 10
      config:
        replication.factor: 3
        offset-syncs.topic.replication.factor: 3
        sync.topic.acls.enabled: "false"
        replication.policy.separator: "."
        replication.policy.class: "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    heartbeatConnector:
      config:
        heartbeats.topic.replication.factor: 3
        emit.heartbeats.interval.seconds: 5
    checkpointConnector:
      config:
        checkpoints.topic.replication.factor: 3
        sync.group.offsets.enabled: "true"
        sync.group.offsets.interval.seconds: 30
        emit.checkpoints.interval.seconds: 30
        replication.policy.separator: "."
        replication.policy.class: "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    topicsPattern: "orders\\\\..*, payments"
    topicsExcludePattern: "orders\\\\.internal"
    groupsPattern: "app-.*"
    groupsExcludePattern: "app-test-.*"
"""

# mTLS (type tls) on both clusters, v1 shape.
STRIMZI_MTLS = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: my-mirror-maker-2
spec:
  replicas: 1
  target:
    alias: dr
    bootstrapServers: dr-kafka-bootstrap:9093
    groupId: mm2
    configStorageTopic: mm2-configs
    offsetStorageTopic: mm2-offsets
    statusStorageTopic: mm2-status
    tls:
      trustedCertificates:
        - secretName: dr-cluster-ca-cert
          certificate: ca.crt
    authentication:
      type: tls
      certificateAndKey:
        secretName: mm2-user
        certificate: user.crt
        key: user.key
  mirrors:
  - source:
      alias: primary
      bootstrapServers: primary-kafka-bootstrap:9093
      tls:
        trustedCertificates:
          - secretName: primary-cluster-ca-cert
            certificate: ca.crt
      authentication:
        type: tls
        certificateAndKey:
          secretName: mm2-user
          certificate: user.crt
          key: user.key
    sourceConnector:
      tasksMax: 4
      config:
        sync.topic.configs.enabled: "true"
    checkpointConnector:
      config:
        emit.checkpoints.interval.seconds: 10
    topicsPattern: "orders"
"""


# --- helpers -------------------------------------------------------------------------------


def secret(root, name, key, content):
    """One key of a Secret, as a Kubernetes Secret volume mounts it."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / key).write_text(content)
    return directory / key


def load(tmp_path, conversion):
    path = tmp_path / "mm2.properties"
    path.write_text(conversion.properties, encoding="utf-8")
    return load_config(path)


def flow_of(config, name):
    return next(flow for flow in config.flows if flow.name == name)


def resource(text):
    return yaml.safe_load(text)


@pytest.fixture
def secrets(tmp_path):
    return tmp_path / "secrets"


# --- Strimzi's examples --------------------------------------------------------------------


def test_strimzi_plain_example(tmp_path, secrets):
    conversion = convert_text(STRIMZI_PLAIN, secrets_dir=str(secrets))
    config = load(tmp_path, conversion)
    assert list(config.clusters) == ["cluster-a", "cluster-b"]
    flow = flow_of(config, "cluster-a->cluster-b")
    assert [f.name for f in config.flows] == ["cluster-a->cluster-b"]
    assert flow.source.bootstrap_servers == "cluster-a-kafka-bootstrap:9092"
    assert flow.target.bootstrap_servers == "cluster-b-kafka-bootstrap:9092"
    assert flow.source.consumer["security.protocol"] == "PLAINTEXT"
    assert flow.tasks_max == 1
    assert flow.replication_factor == 1
    assert flow.offset_syncs_topic_replication_factor == 1
    assert flow.checkpoints_topic_replication_factor == 1
    assert flow.sync_topic_acls_enabled is False
    assert flow.topics.matches("anything") and flow.groups.matches("any-group")
    # Connect's status topic setting is one the replicator reads; the other two are not.
    assert flow.status_topic_replication_factor == -1
    text = conversion.properties
    assert "cluster-b.status.storage.replication.factor = -1" in text
    assert "# cluster-b.config.storage.replication.factor = -1: a Kafka Connect worker" in text
    assert "# cluster-b.offset.storage.replication.factor = -1: a Kafka Connect worker" in text
    notes = "\n".join(conversion.notes)
    assert "spec.replicas = 1" in notes and "--scale replicator=N" in notes
    assert "spec.version = 3.4.0" in notes
    assert "spec.connectCluster = cluster-b" in notes
    # v1beta2 without heartbeatConnector: Strimzi emitted none, we do by default: said.
    assert "no heartbeatConnector" in notes
    assert "cluster-a->cluster-b.emit.heartbeats.enabled = false" in notes
    # Every note is in the file's header too.
    header = text.split("\nclusters = ")[0]
    assert "# - spec.replicas = 1:" in header


def test_strimzi_tls_example(tmp_path, secrets):
    conversion = convert_text(STRIMZI_TLS, secrets_dir=str(secrets))
    config = load(tmp_path, conversion)
    flow = flow_of(config, "cluster-a->cluster-b")
    for cluster, name in ((flow.source, "cluster-a"), (flow.target, "cluster-b")):
        for client in (cluster.consumer, cluster.producer, cluster.admin):
            assert client["security.protocol"] == "SSL"
            assert client["ssl.ca.location"] == str(secrets / f"{name}-cluster-ca-cert" / "ca.crt")
    assert flow.replication_factor == -1
    assert conversion.secrets == {
        "cluster-a-cluster-ca-cert": ("ca.crt",),
        "cluster-b-cluster-ca-cert": ("ca.crt",),
    }
    assert f"#   {secrets}/cluster-a-cluster-ca-cert/ with ca.crt" in conversion.properties


def test_strimzi_tls_pattern_example_reads_the_cluster_ca_certificate(tmp_path, secrets):
    conversion = convert_text(STRIMZI_TLS_PATTERN, secrets_dir=str(secrets))
    config = load(tmp_path, conversion)
    flow = flow_of(config, "cluster-a->cluster-b")
    assert flow.source.consumer["ssl.ca.location"] == str(
        secrets / "cluster-a-cluster-ca-cert" / "ca.crt"
    )
    assert flow.refresh_topics_interval_seconds == 600
    assert flow.refresh_groups_interval_seconds == 600
    assert flow.sync_group_offsets_enabled is False
    notes = [n for n in conversion.notes if "pattern '*.crt'" in n]
    assert len(notes) == 2
    assert "ca.crt" in notes[0]


def test_strimzi_scram_example(tmp_path, secrets):
    secret(secrets, "my-source-user", "password", PASSWORD)
    secret(secrets, "my-target-user", "password", "target-" + PASSWORD)
    conversion = convert_text(STRIMZI_SCRAM, secrets_dir=str(secrets))
    assert conversion.name == "kafka/my-mirror-maker-2"
    assert PASSWORD not in conversion.properties
    assert f'password="${{directory:{secrets}/my-source-user:password}}"' in conversion.properties
    config = load(tmp_path, conversion)
    flow = flow_of(config, "my-source-cluster->my-target-cluster")
    source, target = flow.source.consumer, flow.target.producer
    assert flow.source.bootstrap_servers == "my-source-cluster-kafka-bootstrap:9094"
    assert source["security.protocol"] == "SASL_SSL"
    assert source["sasl.mechanism"] == "SCRAM-SHA-512"
    assert source["sasl.username"] == "my-source-user"
    assert source["sasl.password"] == PASSWORD
    assert target["sasl.username"] == "my-target-user"
    assert target["sasl.password"] == "target-" + PASSWORD
    assert source["ssl.ca.location"] == str(secrets / "my-source-cluster-cluster-ca-cert/ca.crt")
    assert flow.tasks_max == 10
    assert flow.replication_factor == 3
    assert flow.heartbeats_topic_replication_factor == 3
    assert flow.emit_heartbeats_interval_seconds == 5
    assert flow.sync_group_offsets_enabled is True
    assert flow.sync_group_offsets_interval_seconds == 30
    assert flow.emit_checkpoints_interval_seconds == 30
    assert flow.replication_policy_separator == "."
    # The patterns, backslashes and all, reach the loader intact.
    assert flow.topics.matches("orders.eu") and flow.topics.matches("payments")
    assert not flow.topics.matches("ordersXeu")
    assert not flow.topics.matches("orders.internal")
    assert flow.groups.matches("app-billing") and not flow.groups.matches("app-test-1")
    notes = "\n".join(conversion.notes)
    assert "spec.replicas = 3" in notes
    assert PASSWORD not in notes
    assert conversion.secrets["my-source-user"] == ("password",)


def test_strimzi_mtls_example(tmp_path, secrets):
    conversion = convert_text(STRIMZI_MTLS, secrets_dir=str(secrets))
    config = load(tmp_path, conversion)
    flow = flow_of(config, "primary->dr")
    for cluster in (flow.source, flow.target):
        client = cluster.consumer
        assert client["security.protocol"] == "SSL"
        assert client["ssl.certificate.location"] == str(secrets / "mm2-user" / "user.crt")
        assert client["ssl.key.location"] == str(secrets / "mm2-user" / "user.key")
    assert flow.source.consumer["ssl.ca.location"] == str(
        secrets / "primary-cluster-ca-cert/ca.crt"
    )
    assert flow.target.consumer["ssl.ca.location"] == str(secrets / "dr-cluster-ca-cert/ca.crt")
    assert flow.tasks_max == 4
    assert flow.sync_topic_configs_enabled is True
    assert flow.emit_checkpoints_interval_seconds == 10
    assert flow.topics.matches("orders") and not flow.topics.matches("orders2")
    assert conversion.secrets["mm2-user"] == ("user.crt", "user.key")
    assert "# dr.group.id = mm2: a Kafka Connect worker setting" in conversion.properties


def test_strimzi_custom_replication_policy_example(tmp_path, secrets):
    conversion = convert_text(STRIMZI_CUSTOM_POLICY, secrets_dir=str(secrets))
    config = load(tmp_path, conversion)
    flow = flow_of(config, "cluster-a->cluster-b")
    assert flow.replication_policy_class.endswith("IdentityReplicationPolicy")
    assert flow.policy.format_remote_topic("cluster-a", "orders") == "orders"
    assert flow.tasks_max == 1
    # The same key in both connectors with the same value is one setting.
    assert conversion.properties.count(".replication.policy.class = ") == 1
    assert "spec.mirrors[0].checkpointConnector.tasksMax = 1" in "\n".join(conversion.notes)


# --- the two API shapes --------------------------------------------------------------------


def test_v1_and_v1beta2_give_the_same_file_body(secrets):
    v1beta2 = resource(STRIMZI_SCRAM)
    spec = v1beta2["spec"]
    target = dict(spec["clusters"][1])
    target.update(groupId="g", configStorageTopic="c", offsetStorageTopic="o")
    target["statusStorageTopic"] = "s"
    mirror = dict(spec["mirrors"][0])
    mirror.pop("sourceCluster")
    mirror.pop("targetCluster")
    mirror.pop("heartbeatConnector")
    mirror["source"] = spec["clusters"][0]
    v1 = {
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaMirrorMaker2",
        "metadata": v1beta2["metadata"],
        "spec": {"replicas": 3, "target": target, "mirrors": [mirror]},
    }
    del spec["mirrors"][0]["heartbeatConnector"]
    # v1beta2 keeps the Connect offsets topic (read by a takeover) in the cluster's config.
    worker = {**spec["clusters"][1].get("config", {}), "offset.storage.topic": "o"}
    spec["clusters"][1] = {**spec["clusters"][1], "config": worker}
    old = convert(v1beta2, secrets_dir=str(secrets)).properties
    new = convert(v1, secrets_dir=str(secrets)).properties

    def settings(text):
        return sorted(line for line in text.splitlines() if line and not line.startswith("#"))

    assert settings(old) == settings(new)


def test_deprecated_blacklist_patterns_are_the_exclude_patterns(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    mirror = spec["spec"]["mirrors"][0]
    mirror["topicsBlacklistPattern"] = "internal\\..*"
    mirror["groupsBlacklistPattern"] = "console-.*"
    config = load(tmp_path, convert(spec, secrets_dir=str(secrets)))
    flow = config.flows[0]
    assert not flow.topics.matches("internal.x") and flow.topics.matches("internalx")
    assert not flow.groups.matches("console-1") and flow.groups.matches("app")


def test_blacklist_and_exclude_that_differ_are_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    mirror = spec["spec"]["mirrors"][0]
    mirror["topicsBlacklistPattern"] = "a"
    mirror["topicsExcludePattern"] = "b"
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert "spec.mirrors[0].topicsExcludePattern" in message
    assert "spec.mirrors[0].topicsBlacklistPattern" in message


def test_plain_authentication_without_tls(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["clusters"][0]["authentication"] = {
        "type": "plain",
        "username": 'odd"name',
        "passwordSecret": {"secretName": "plain-user", "password": "pw"},
    }
    spec["spec"]["clusters"][1]["authentication"] = {
        "type": "scram-sha-256",
        "username": "u256",
        "passwordSecret": {"secretName": "scram-user", "password": "pw"},
    }
    secret(secrets, "plain-user", "pw", PASSWORD)
    secret(secrets, "scram-user", "pw", PASSWORD)
    flow = load(tmp_path, convert(spec, secrets_dir=str(secrets))).flows[0]
    assert flow.source.consumer["security.protocol"] == "SASL_PLAINTEXT"
    assert flow.source.consumer["sasl.mechanism"] == "PLAIN"
    assert flow.source.consumer["sasl.username"] == 'odd"name'
    assert flow.source.consumer["sasl.password"] == PASSWORD
    assert flow.target.producer["sasl.mechanism"] == "SCRAM-SHA-256"
    assert flow.target.producer["security.protocol"] == "SASL_PLAINTEXT"


def test_cluster_config_is_the_clusters_client_config(tmp_path, secrets):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["config"] = {
        "consumer.fetch.max.bytes": 1048576,
        "ssl.endpoint.identification.algorithm": "https",
    }
    flow = load(tmp_path, convert(spec, secrets_dir=str(secrets))).flows[0]
    assert flow.source.consumer["fetch.max.bytes"] == "1048576"
    assert flow.source.consumer["ssl.endpoint.identification.algorithm"] == "https"


def test_kubernetes_secret_provider_references_become_directory_references(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["clusters"][1]["config"].update(
        {
            "config.providers": "secrets,env",
            "config.providers.secrets.class": "io.strimzi.kafka.KubernetesSecretConfigProvider",
            "config.providers.env.class": (
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
            ),
        }
    )
    connector = spec["spec"]["mirrors"][0]["sourceConnector"]["config"]
    connector["consumer.ssl.key.password"] = "${secrets:kafka/source-key:password}"
    secret(secrets, "source-key", "password", PASSWORD)
    conversion = convert(spec, secrets_dir=str(secrets))
    assert (
        f"cluster-a->cluster-b.consumer.ssl.key.password = ${{directory:{secrets}/source-key:"
        "password}" in conversion.properties
    )
    assert "# cluster-b.config.providers.secrets.class: a config provider" in conversion.properties
    assert conversion.secrets["source-key"] == ("password",)
    flow = load(tmp_path, conversion).flows[0]
    assert flow.source.consumer["ssl.key.password"] == PASSWORD


def test_strimzi_builtin_providers_are_renamed(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    sasl = spec["spec"]["mirrors"][0]["sourceConnector"]["config"]
    sasl["consumer.client.id"] = "${strimzienv:CLIENT_ID}"
    conversion = convert(spec, secrets_dir=str(secrets))
    assert "cluster-a->cluster-b.consumer.client.id = ${env:CLIENT_ID}" in conversion.properties
    assert any("${strimzienv:...} became ${env:...}" in note for note in conversion.notes)


def test_paused_connector_is_noted(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["mirrors"][0]["sourceConnector"]["state"] = "paused"
    spec["spec"]["mirrors"][0]["checkpointConnector"]["pause"] = True
    notes = "\n".join(convert(spec, secrets_dir=str(secrets)).notes)
    assert "sourceConnector.state = paused" in notes
    assert "checkpointConnector.pause = true" in notes
    assert "cluster-a->cluster-b.enabled = false" in notes


def test_values_are_escaped_as_java_properties(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    mirror = spec["spec"]["mirrors"][0]
    mirror["topicsPattern"] = " café\\.\\d+"  # a leading space, non-ASCII, backslashes
    conversion = convert(spec, secrets_dir=str(secrets))
    assert "cluster-a->cluster-b.topics = \\ caf\\u00e9\\\\.\\\\d+" in conversion.properties
    config = load(tmp_path, conversion)
    assert config.flows[0].topics.matches("café.12")


# --- multi-document files ------------------------------------------------------------------


def test_the_mirror_maker_is_picked_among_other_documents(secrets):
    text = (
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaUser\nmetadata: {name: u}\n---\n"
        + STRIMZI_PLAIN
        + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"
    )
    assert convert_text(text, secrets_dir=str(secrets)).name == "my-mirror-maker-2"


def test_a_kubectl_list_is_read(secrets):
    listed = {"apiVersion": "v1", "kind": "List", "items": [resource(STRIMZI_PLAIN)]}
    assert convert_text(yaml.safe_dump(listed), secrets_dir=str(secrets)).name == (
        "my-mirror-maker-2"
    )


def test_several_mirror_makers_need_a_name(secrets):
    second = STRIMZI_TLS.replace("name: my-mirror-maker-2", "name: other-mm2")
    text = STRIMZI_PLAIN + "---\n" + second
    with pytest.raises(ConfigError) as info:
        convert_text(text, secrets_dir=str(secrets), source="mm2.yaml")
    message = str(info.value)
    assert message.startswith("mm2.yaml: 2 KafkaMirrorMaker2 resources")
    assert "my-mirror-maker-2, other-mm2" in message
    assert "--name" in message
    chosen = convert_text(text, name="other-mm2", secrets_dir=str(secrets))
    assert "cluster-a-kafka-bootstrap:9093" in chosen.properties
    with pytest.raises(ConfigError, match="no KafkaMirrorMaker2 named 'missing'"):
        convert_text(text, name="missing", secrets_dir=str(secrets))


def test_another_kind_is_refused():
    text = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker\nmetadata: {name: x}\n"
    with pytest.raises(ConfigError) as info:
        convert_text(text, source="mm.yaml")
    assert str(info.value).startswith("mm.yaml: no KafkaMirrorMaker2 resource (found: ")
    assert "KafkaMirrorMaker)" in str(info.value)


def test_invalid_yaml_names_the_line():
    with pytest.raises(ConfigError, match=r"x.yaml: not valid YAML \(line 2\)"):
        convert_text("kind: KafkaMirrorMaker2\n  bad: [\n", source="x.yaml")


# --- nothing is dropped in silence ---------------------------------------------------------

EVERY_FIELD = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: everything
  namespace: kafka
spec:
  version: 3.9.0
  replicas: 2
  image: registry.example/kafka-connect:1
  connectCluster: b
  clusters:
  - alias: a
    bootstrapServers: a:9093
    tls:
      trustedCertificates:
      - secretName: a-ca
        certificate: ca.crt
    authentication:
      type: scram-sha-512
      username: mm2
      passwordSecret: {secretName: mm2-user, password: password}
    config:
      consumer.fetch.min.bytes: 1
  - alias: b
    bootstrapServers: b:9093
    tls:
      trustedCertificates:
      - secretName: b-ca
        pattern: "*.crt"
    authentication:
      type: tls
      certificateAndKey: {secretName: mm2-cert, certificate: user.crt, key: user.key}
    config:
      group.id: mm2-cluster
      offset.storage.topic: mm2-offsets
      config.storage.topic: mm2-configs
      status.storage.topic: mm2-status
      key.converter: org.apache.kafka.connect.converters.ByteArrayConverter
      value.converter: org.apache.kafka.connect.converters.ByteArrayConverter
      config.providers: secrets
      config.providers.secrets.class: io.strimzi.kafka.KubernetesSecretConfigProvider
  mirrors:
  - sourceCluster: a
    targetCluster: b
    sourceConnector:
      tasksMax: 2
      state: running
      autoRestart: {enabled: true, maxRestarts: 10}
      listOffsets: {toConfigMap: {name: offsets}}
      alterOffsets: {fromConfigMap: {name: offsets}}
      config: {replication.factor: 3}
    checkpointConnector:
      tasksMax: 1
      pause: false
      config: {emit.checkpoints.interval.seconds: 20}
    heartbeatConnector:
      tasksMax: 1
      config: {emit.heartbeats.interval.seconds: 2}
    topicsPattern: orders
    topicsExcludePattern: orders-internal
    topicsBlacklistPattern: orders-internal
    groupsPattern: app-.*
    groupsExcludePattern: app-test
    groupsBlacklistPattern: app-test
  resources: {requests: {cpu: 1, memory: 2Gi}, limits: {memory: 2Gi}}
  livenessProbe: {initialDelaySeconds: 60}
  readinessProbe: {initialDelaySeconds: 60}
  jvmOptions: {-Xmx: 1g}
  jmxOptions: {}
  logging: {type: inline, loggers: {connect.root.logger.level: INFO}}
  clientRackInitImage: registry.example/operator:1
  rack: {topologyKey: topology.kubernetes.io/zone}
  metricsConfig:
    type: jmxPrometheusExporter
    valueFrom: {configMapKeyRef: {name: metrics, key: metrics-config.yml}}
  tracing: {type: opentelemetry}
  template: {pod: {metadata: {labels: {team: dr}}}}
  externalConfiguration:
    volumes:
    - name: extra
      secret: {secretName: extra}
"""

SPEC_NOTED = (
    "version",
    "replicas",
    "image",
    "connectCluster",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "jvmOptions",
    "jmxOptions",
    "logging",
    "clientRackInitImage",
    "rack",
    "metricsConfig",
    "tracing",
    "template",
    "externalConfiguration",
)


def test_every_field_is_mapped_noted_or_refused(tmp_path, secrets):
    secret(secrets, "mm2-user", "password", PASSWORD)
    conversion = convert_text(EVERY_FIELD, secrets_dir=str(secrets))
    notes = "\n".join(conversion.notes)
    for name in SPEC_NOTED:
        assert f"spec.{name}" in notes, name
    for connector_field in ("autoRestart", "listOffsets", "alterOffsets"):
        assert f"spec.mirrors[0].sourceConnector.{connector_field}" in notes
    assert "spec.mirrors[0].checkpointConnector.tasksMax = 1" in notes
    assert "spec.mirrors[0].heartbeatConnector.tasksMax = 1" in notes
    assert "spec.clusters[1].tls.trustedCertificates[0].pattern '*.crt'" in notes
    text = conversion.properties
    for worker in ("group.id", "config.storage.topic", "key.converter"):
        assert f"# b.{worker} = " in text
    assert "\nb.offset.storage.topic = mm2-offsets\n" in text  # read by a takeover
    assert "# b.config.providers.secrets.class: a config provider" in text
    config = load(tmp_path, conversion)
    flow = config.flows[0]
    assert flow.tasks_max == 2
    assert flow.replication_factor == 3
    assert flow.emit_checkpoints_interval_seconds == 20
    assert flow.emit_heartbeats_interval_seconds == 2
    assert flow.source.consumer["fetch.min.bytes"] == "1"
    assert flow.source.consumer["sasl.password"] == PASSWORD
    assert flow.target.producer["ssl.key.location"] == str(secrets / "mm2-cert/user.key")
    assert flow.target.producer["ssl.ca.location"] == str(secrets / "b-ca/ca.crt")
    assert not flow.topics.matches("orders-internal") and flow.topics.matches("orders")
    assert not flow.groups.matches("app-test") and flow.groups.matches("app-x")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("spec",), "someNewField"),
        (("spec", "clusters", 0), "listeners"),
        (("spec", "clusters", 0), "groupId"),  # a target-only field, on a v1beta2 cluster
        (("spec", "mirrors", 0), "topicsRegex"),
        (("spec", "mirrors", 0, "sourceConnector"), "className"),
    ],
)
def test_an_unknown_field_is_refused_by_its_path(secrets, path, field):
    spec = resource(STRIMZI_PLAIN)
    node = spec
    for step in path:
        node = node[step]
    node[field] = "x"
    where = ".".join(f"{p}" if isinstance(p, str) else f"[{p}]" for p in path)
    where = where.replace(".[", "[")
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    assert str(info.value).startswith(f"{where}.{field}: not a field this converter knows")


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authentication", "expected"),
    [
        (
            {
                "type": "oauth",
                "clientId": "mm2",
                "clientSecret": {"secretName": "oauth", "key": "secret"},
                "tokenEndpointUri": "https://sso/token",
            },
            "spec.clusters[0].authentication.type = oauth (cluster cluster-a): cannot be mapped",
        ),
        (
            {"type": "custom", "sasl": True, "config": {"sasl.mechanism": "AWS_MSK_IAM"}},
            "spec.clusters[0].authentication.type = custom (cluster cluster-a): cannot be mapped",
        ),
        (
            {"type": "gssapi"},
            "spec.clusters[0].authentication.type = gssapi (cluster cluster-a): cannot be mapped",
        ),
    ],
)
def test_authentication_that_cannot_be_mapped(secrets, authentication, expected):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["authentication"] = authentication
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert message.startswith(expected)
    assert "write that cluster's security settings by hand" in message


def test_mtls_without_tls_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["clusters"][0]["authentication"] = {
        "type": "tls",
        "certificateAndKey": {"secretName": "u", "certificate": "user.crt", "key": "user.key"},
    }
    with pytest.raises(ConfigError, match=r"type tls \(mTLS\) needs spec.clusters\[0\].tls"):
        convert(spec, secrets_dir=str(secrets))


def test_a_trust_pattern_other_than_crt_is_refused(secrets):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["tls"]["trustedCertificates"] = [
        {"secretName": "ca", "pattern": "*.pem"}
    ]
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert message.startswith("spec.clusters[0].tls.trustedCertificates[0]: pattern '*.pem'")
    assert "certificate:" in message


def test_several_trusted_certificates_are_refused(secrets):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["tls"]["trustedCertificates"].append(
        {"secretName": "other-ca", "certificate": "ca.crt"}
    )
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert message.startswith("spec.clusters[0].tls.trustedCertificates: 2 certificates")
    assert "one PEM truststore file" in message


def test_one_key_with_two_values_in_two_connectors_is_refused(secrets):
    spec = resource(STRIMZI_CUSTOM_POLICY)
    mirror = spec["spec"]["mirrors"][0]
    mirror["checkpointConnector"]["config"]["replication.policy.class"] = "com.example.Policy"
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert "spec.mirrors[0].sourceConnector.config.replication.policy.class" in message
    assert "spec.mirrors[0].checkpointConnector.config.replication.policy.class" in message
    assert "cluster-a->cluster-b.replication.policy.class" in message


def test_tasks_max_in_config_and_tasksmax_that_differ_are_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["mirrors"][0]["sourceConnector"]["config"]["tasks.max"] = 5
    with pytest.raises(ConfigError, match=re.escape("sourceConnector.tasksMax")):
        convert(spec, secrets_dir=str(secrets))


def test_an_unknown_config_provider_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["mirrors"][0]["sourceConnector"]["config"]["x"] = "${vault:kv/mm2:token}"
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    message = str(info.value)
    assert message.startswith("spec.mirrors[0].sourceConnector.config.x: ${vault:kv/mm2:token}")
    assert "write the value by hand" in message


def test_a_declared_provider_class_the_replicator_cannot_run_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["clusters"][1]["config"].update(
        {"config.providers": "vault", "config.providers.vault.class": "com.example.Vault"}
    )
    with pytest.raises(
        ConfigError, match=re.escape("config.providers.vault.class = com.example.Vault")
    ):
        convert(spec, secrets_dir=str(secrets))


def test_a_mirror_without_source_connector_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    del spec["spec"]["mirrors"][0]["sourceConnector"]
    with pytest.raises(ConfigError, match=r"spec.mirrors\[0\]: no sourceConnector"):
        convert(spec, secrets_dir=str(secrets))


def test_two_mirrors_of_one_flow_are_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["mirrors"].append(dict(spec["spec"]["mirrors"][0]))
    with pytest.raises(ConfigError, match=r"spec.mirrors\[1\]: a second mirror cluster-a->"):
        convert(spec, secrets_dir=str(secrets))


def test_target_and_clusters_together_are_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["target"] = {"alias": "x", "bootstrapServers": "x:1"}
    with pytest.raises(ConfigError, match=re.escape("spec.target and spec.clusters")):
        convert(spec, secrets_dir=str(secrets))


def test_a_mirror_naming_an_unknown_cluster_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["mirrors"][0]["sourceCluster"] = "cluster-c"
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    assert str(info.value) == (
        "spec.mirrors[0].sourceCluster = cluster-c: not an alias of spec.clusters "
        "(cluster-a, cluster-b)"
    )


def test_an_alias_mm2_cannot_read_is_refused(secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["spec"]["clusters"][0]["alias"] = "cluster.a"
    with pytest.raises(ConfigError, match=r"spec.clusters\[0\].alias = cluster.a"):
        convert(spec, secrets_dir=str(secrets))


def test_an_unknown_api_version_is_refused():
    spec = resource(STRIMZI_PLAIN)
    spec["apiVersion"] = "kafka.strimzi.io/v2"
    with pytest.raises(
        ConfigError, match=re.escape("apiVersion kafka.strimzi.io/v2: unknown version")
    ):
        convert(spec)


def test_a_sensitive_value_is_never_in_a_note_or_an_error(secrets):
    spec = resource(STRIMZI_PLAIN)
    config = spec["spec"]["clusters"][1]["config"]
    config["ssl.keystore.password"] = PASSWORD
    conversion = convert(spec, secrets_dir=str(secrets))
    # A client setting: mapped as written (it was in the resource), never in a note.
    assert f"cluster-b.ssl.keystore.password = {PASSWORD}" in conversion.properties
    assert PASSWORD not in "\n".join(conversion.notes)
    connector = spec["spec"]["mirrors"][0]["sourceConnector"]["config"]
    checkpoint = spec["spec"]["mirrors"][0]["checkpointConnector"]["config"]
    connector["consumer.sasl.jaas.config"] = f'x password="{PASSWORD}";'
    checkpoint["consumer.sasl.jaas.config"] = 'x password="other";'
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    assert "consumer.sasl.jaas.config" in str(info.value)
    assert PASSWORD not in str(info.value)


def test_text_of_the_resource_cannot_add_lines_to_the_file(tmp_path, secrets):
    spec = resource(STRIMZI_PLAIN)
    spec["metadata"]["name"] = "mm2\ncluster-a->cluster-b.tasks.max = 99"
    spec["spec"]["clusters"][1]["config"]["group.id"] = "g\ncluster-a->cluster-b.topics = x"
    conversion = convert(spec, secrets_dir=str(secrets))
    flow = load(tmp_path, conversion).flows[0]
    assert flow.tasks_max == 1
    assert flow.topics.matches("anything")


def test_a_secret_name_that_is_no_file_name_is_refused(secrets):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["tls"]["trustedCertificates"][0]["certificate"] = "../ca.crt"
    with pytest.raises(ConfigError) as info:
        convert(spec, secrets_dir=str(secrets))
    assert str(info.value).startswith(
        "spec.clusters[0].tls.trustedCertificates[0]: Secret key '../ca.crt' cannot be a file name"
    )


def test_hostname_verification_turned_off_as_strimzi_allows(tmp_path, secrets):
    spec = resource(STRIMZI_TLS)
    spec["spec"]["clusters"][0]["config"] = {"ssl.endpoint.identification.algorithm": ""}
    conversion = convert(spec, secrets_dir=str(secrets))
    assert "cluster-a.ssl.endpoint.identification.algorithm = \n" in conversion.properties
    flow = load(tmp_path, conversion).flows[0]
    assert flow.source.consumer["ssl.endpoint.identification.algorithm"] == "none"


def test_connector_client_overrides_load_as_mm2_reads_them(tmp_path, secrets):
    """A source connector's `producer.override.*` (Kafka Connect's per-connector client
    override) is the flow's target producer setting; a consumer override, which Connect
    applies only to sink connectors, loads with a warning that it has no effect."""
    text = STRIMZI_PLAIN.replace(
        '        sync.topic.acls.enabled: "false"\n',
        '        sync.topic.acls.enabled: "false"\n'
        "        producer.override.batch.size: 327680\n"
        "        producer.override.linger.ms: 100\n"
        "        consumer.override.fetch.min.bytes: 5\n",
    )
    conversion = convert_text(text, secrets_dir=str(secrets))
    assert "cluster-a->cluster-b.producer.override.batch.size = 327680" in conversion.properties
    flow = flow_of(load(tmp_path, conversion), "cluster-a->cluster-b")
    assert flow.target.producer["batch.size"] == "327680"
    assert flow.target.producer["linger.ms"] == "100"
    assert "fetch.min.bytes" not in flow.source.consumer
