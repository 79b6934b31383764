"""The Spark Kafka connector's options for a secured cluster, from the replicator's configuration.

The connector is a Java Kafka client: it takes the Java settings MM2 users write,
prefixed with `kafka.`. The replicator's configuration holds them translated to
librdkafka's names (`replicator.config.clients`); this turns them back. The job
loads the configuration file itself (the plan names the file, never a secret),
so credentials pass through no plan, command line, XCom or log. Spark redacts
`sasl.jaas.config` in what it logs. Truststore and keystore files are read by
the executors at the same path (local mode; on a cluster, ship them to that path).
"""

from __future__ import annotations

from collections.abc import Mapping

from replicator.config import load_config
from replicator.errors import ConfigError

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


def cluster_options(config_file: str, bootstrap: str) -> dict[str, str]:
    """The connector's security options for the cluster of `config_file` whose
    bootstrap servers are `bootstrap` (none without a configuration file)."""
    if not config_file:
        return {}
    for cluster in load_config(config_file).clusters.values():
        if cluster.bootstrap_servers == bootstrap:
            return spark_kafka_options(cluster.consumer)
    raise ConfigError(f"{config_file} has no cluster with bootstrap.servers={bootstrap}")
