"""The Spark Kafka connector's options for a secured cluster, from the replicator's configuration.

The connector is a Java Kafka client: it takes the Java settings MM2 users write,
prefixed with `kafka.`. The replicator's configuration holds them translated to
librdkafka's names (`replicator.config.clients`); this turns them back. The job
loads the configuration file itself (the plan names the file, never a secret),
so credentials pass through no plan, command line, XCom or log. Spark redacts
`sasl.jaas.config` in what it logs.

Truststore and keystore files are read by the driver and by every executor. On a
cluster that does not share the driver's filesystem they are shipped with
`spark-submit --files` (`tls_files`): each lands in the executors' working
directory under its own name (`shipped_names`), and the options name it so; the
driver reads the same names from its working directory (`run.shipped_links`). The
connector's consumers get our group id (`VERIFIER_CONNECTOR_GROUP`, under the prefix
the verifier's ACL plan grants) instead of Spark's `spark-kafka-relation-<uuid>`.

Secrets the configuration takes from the Airflow connection (`${conn:NAME}`) reach
the driver in its environment (`connection_environment`): the one way into the
process that leaves them on no command line, plan, XCom or disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from replicator.acls.plan import VERIFIER_CONNECTOR_GROUP
from replicator.config import load_config
from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.config.properties import connection_references, read_properties
from replicator.errors import ConfigError

#: The job driver's environment variable holding the connection's secrets that its
#: configuration references: a JSON object, name -> value.
CONNECTION_SECRETS_ENV = "REPLICATOR_CONNECTION_SECRETS"

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def spark_kafka_options(settings: Mapping[str, object]) -> dict[str, str]:
    """`kafka.`-prefixed Java client options for librdkafka `settings` (their
    connection security only; the job sets everything else itself)."""
    java: dict[str, str] = {}
    for key in ("security.protocol", "sasl.mechanism"):
        if key in settings:
            java[key] = str(settings[key])
    if "sasl.username" in settings:
        mechanism = str(settings.get("sasl.mechanism", "PLAIN")).upper()
        if mechanism not in _LOGIN_MODULES:
            raise ConfigError(f"sasl.mechanism {mechanism} is not supported for verification")
        username = _quoted(settings["sasl.username"])
        password = _quoted(settings.get("sasl.password", ""))
        java["sasl.jaas.config"] = (
            f'{_LOGIN_MODULES[mechanism]} required username="{username}" password="{password}";'
        )
    if "ssl.ca.location" in settings:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = str(settings["ssl.ca.location"])
    certificate = settings.get("ssl.certificate.location")
    if certificate:
        if settings.get("ssl.key.location", certificate) != certificate:
            raise ConfigError(
                "the Spark Kafka connector reads the client key and certificate from one PEM "
                "keystore file: set ssl.keystore.type=PEM and ssl.keystore.location to a file "
                "holding both"
            )
        java["ssl.keystore.type"] = "PEM"
        java["ssl.keystore.location"] = str(certificate)
    if settings.get("ssl.endpoint.identification.algorithm") == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return {f"kafka.{key}": value for key, value in java.items()}


def _quoted(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


_FILE_OPTIONS = ("kafka.ssl.truststore.location", "kafka.ssl.keystore.location")


def cluster_options(config_file: str, bootstrap: str, shipped: bool = False) -> dict[str, str]:
    """The connector's options for the cluster of `config_file` whose bootstrap
    servers are `bootstrap`: our group id, and its security settings (none
    without a configuration file). `shipped`: its truststore and keystore are
    named as `spark-submit --files` ships them (`shipped_names`)."""
    options = {"kafka.group.id": VERIFIER_CONNECTOR_GROUP}
    if not config_file:
        return options
    config, cluster = _cluster(config_file, bootstrap)
    security = spark_kafka_options(cluster.consumer)
    if shipped:
        names = shipped_names(tls_files(config))
        for key in _FILE_OPTIONS:
            if key in security:
                security[key] = names[Path(security[key])]
    return options | security


#: librdkafka's settings that name a truststore or keystore file.
_FILE_SETTINGS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")


def client_settings(config_file: str, bootstrap: str, shipped: bool = False) -> dict[str, object]:
    """The librdkafka consumer settings of the cluster of `config_file` whose bootstrap
    servers are `bootstrap` (only those servers without a configuration file), for the
    job's driver's own reads; `shipped`: its files named as `spark-submit --files`
    ships them into the driver's working directory. Credentials included: never log."""
    if not config_file:
        return {"bootstrap.servers": bootstrap}
    config, cluster = _cluster(config_file, bootstrap)
    settings: dict[str, object] = dict(cluster.consumer)
    if shipped:
        names = shipped_names(tls_files(config))
        for key in _FILE_SETTINGS:
            if settings.get(key):
                settings[key] = names[Path(str(settings[key]))]
    return settings


def _cluster(config_file: str, bootstrap: str) -> tuple[ReplicatorConfig, ClusterConfig]:
    config = load_config(
        config_file, connection=json.loads(os.environ.get(CONNECTION_SECRETS_ENV, "{}"))
    )
    for cluster in config.clusters.values():
        if cluster.bootstrap_servers == bootstrap:
            return config, cluster
    raise ConfigError(f"{config_file} has no cluster with bootstrap.servers={bootstrap}")


def connection_environment(config_file: Path, secrets: Mapping[str, str]) -> dict[str, str]:
    """The environment that hands the job's driver those of the connection's `secrets`
    that `config_file` references (none: nothing), so that a secret it does not use
    (the state store's password) never goes along."""
    wanted = connection_references(read_properties(config_file))
    handed = {name: value for name, value in secrets.items() if name in wanted}
    return {CONNECTION_SECRETS_ENV: json.dumps(handed)} if handed else {}


def tls_files(config: ReplicatorConfig) -> list[Path]:
    """The truststore and keystore files of every cluster of `config` (each once)."""
    found: dict[Path, None] = {}
    for cluster in config.clusters.values():
        options = spark_kafka_options(cluster.consumer)
        for key in _FILE_OPTIONS:
            if key in options:
                found[Path(options[key])] = None
    return list(found)


def shipped_names(files: list[Path]) -> dict[Path, str]:
    """The name each file has in an executor's working directory when shipped with
    `spark-submit --files`: its own file name, which must be unique."""
    names: dict[Path, str] = {}
    for path in files:
        clash = [other for other, name in names.items() if name == path.name]
        if clash:
            raise ConfigError(
                f"{path} and {clash[0]} have the same file name, and `spark-submit --files` "
                "ships files to the executors under their names: rename one of them"
            )
        names[path] = path.name
    return names
