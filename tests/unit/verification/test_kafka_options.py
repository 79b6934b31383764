"""The Spark Kafka connector's options from a secured configuration, without Spark or
Kafka: security settings as `kafka.` Java options, our consumer group prefix, the
truststore and keystore named as `spark-submit --files` ships them, and the Airflow
connection's secrets handed to the driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.acls.plan import VERIFIER_CONNECTOR_GROUP, VERIFIER_GROUP_PREFIX, verifier_rules
from replicator.config import load_config
from replicator.errors import ConfigError
from replicator.verification.kafka_options import (
    CONNECTION_SECRETS_ENV,
    cluster_options,
    connection_environment,
    shipped_names,
    tls_files,
)


def _config(tmp_path: Path, dr_ca: Path | None = None) -> Path:
    """mTLS on both clusters, one CA file and one keystore each; dr's CA may differ."""
    ca = tmp_path / "ca.pem"
    lines = [
        "clusters = primary, dr",
        "primary.bootstrap.servers = 127.0.0.1:9093",
        "dr.bootstrap.servers = 127.0.0.1:9094",
        "primary->dr.enabled = true",
        "primary->dr.topics = orders",
    ]
    for alias in ("primary", "dr"):
        truststore = dr_ca if alias == "dr" and dr_ca else ca
        lines += [
            f"{alias}.security.protocol = SSL",
            f"{alias}.ssl.truststore.type = PEM",
            f"{alias}.ssl.truststore.location = {truststore}",
            f"{alias}.ssl.keystore.type = PEM",
            f"{alias}.ssl.keystore.location = {tmp_path / f'{alias}.keystore.pem'}",
        ]
    path = tmp_path / "mm2.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_connector_reads_as_our_group_prefix_which_the_verifier_plan_grants(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    group = {"kafka.group.id": VERIFIER_CONNECTOR_GROUP}
    assert cluster_options("", "127.0.0.1:9093") == group
    assert VERIFIER_CONNECTOR_GROUP.startswith(f"{VERIFIER_GROUP_PREFIX}-")  # the ACL's prefix
    options = cluster_options(str(config), "127.0.0.1:9093")
    assert options["kafka.group.id"] == VERIFIER_CONNECTOR_GROUP
    assert options["kafka.ssl.truststore.location"] == str(tmp_path / "ca.pem")
    groups = {
        (rule.cluster, rule.name, rule.operation)
        for rule in verifier_rules(load_config(config), "User:spark")
        if rule.resource_type == "GROUP"
    }
    # The connector's group ids are `<prefix>-<uuid>-executor`; the plan's readers
    # (`replicator-<purpose>-<uuid>`, assign only) need only to find their coordinator.
    assert groups == {
        (cluster, f"{VERIFIER_GROUP_PREFIX}-", operation)
        for cluster in ("primary", "dr")
        for operation in ("READ", "DESCRIBE")
    } | {(cluster, "replicator-", "DESCRIBE") for cluster in ("primary", "dr")}


def test_shipped_files_are_named_as_the_executors_find_them(tmp_path: Path) -> None:
    config = _config(tmp_path)
    files = tls_files(load_config(config))
    assert files == [
        tmp_path / "ca.pem",
        tmp_path / "primary.keystore.pem",
        tmp_path / "dr.keystore.pem",
    ]
    assert list(shipped_names(files).values()) == [
        "ca.pem",
        "primary.keystore.pem",
        "dr.keystore.pem",
    ]
    options = cluster_options(str(config), "127.0.0.1:9094", shipped=True)
    assert options["kafka.ssl.truststore.location"] == "ca.pem"
    assert options["kafka.ssl.keystore.location"] == "dr.keystore.pem"


def test_two_files_of_one_name_cannot_be_shipped(tmp_path: Path) -> None:
    (tmp_path / "dr").mkdir()
    config = _config(tmp_path, dr_ca=tmp_path / "dr" / "ca.pem")
    with pytest.raises(ConfigError, match="have the same file name"):
        shipped_names(tls_files(load_config(config)))


def test_the_driver_gets_only_the_connection_secrets_its_configuration_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's driver loads the configuration itself: a `${conn:NAME}` secret reaches
    it in its environment, and a secret the file does not name (the state store's
    password) is not handed over at all."""
    secrets = {"password": "state-store-pw", "dr_password": "kafka-pw"}
    config = _config(tmp_path)
    assert connection_environment(config, secrets) == {}
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="verifier" password="${conn:dr_password}";'
    )
    text = config.read_text().replace("dr.security.protocol = SSL", "dr.security.protocol=SASL_SSL")
    config.write_text(f"{text}dr.sasl.mechanism = SCRAM-SHA-512\ndr.sasl.jaas.config = {jaas}\n")
    environment = connection_environment(config, secrets)
    assert environment == {CONNECTION_SECRETS_ENV: '{"dr_password": "kafka-pw"}'}
    with pytest.raises(ConfigError, match=r"\$\{conn:dr_password\}: the connection gives no"):
        cluster_options(str(config), "127.0.0.1:9094")
    monkeypatch.setenv(CONNECTION_SECRETS_ENV, environment[CONNECTION_SECRETS_ENV])
    options = cluster_options(str(config), "127.0.0.1:9094")
    assert 'password="kafka-pw"' in options["kafka.sasl.jaas.config"]
