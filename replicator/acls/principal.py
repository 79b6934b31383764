"""Who a configuration's clients are to a broker's authorizer, and how to say what they lack.

Kept apart from the ACL plan so that the engine can name the principal in its
errors without importing the planner.
"""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from replicator.config.model import ClusterConfig
from replicator.errors import ConfigError


def principal_of(cluster: ClusterConfig) -> str:
    """The principal the configuration's clients authenticate as on `cluster`:
    the SCRAM/PLAIN user, or the CN of the client certificate (brokers map
    `CN=name` to `User:name` with `ssl.principal.mapping.rules`), else ANONYMOUS."""
    settings = cluster.consumer
    if settings.get("sasl.username"):
        return f"User:{settings['sasl.username']}"
    certificate = settings.get("ssl.certificate.location")
    if certificate:
        return f"User:{_common_name(Path(certificate))}"
    return "User:ANONYMOUS"


def _common_name(certificate_file: Path) -> str:
    """The CN of the first certificate in a PEM file (a keystore or a certificate)."""
    try:
        certificate = x509.load_pem_x509_certificates(certificate_file.read_bytes())[0]
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the client certificate {certificate_file} to name its principal "
            f"({exc}); check ssl.keystore.location"
        ) from exc
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise ConfigError(f"the certificate in {certificate_file} has no common name (CN)")
    return str(names[0].value)


def missing_acl(cluster: ClusterConfig, operation: str, resource: str) -> str:
    """`User:x may not WRITE on TOPIC t on cluster 'dr'; grant ...`: the part of an
    error that names the missing ACL, its principal and the fix. `resource` is
    `TOPIC name`, `GROUP name`, `TRANSACTIONAL_ID name` or `CLUSTER`."""
    principal = principal_of(cluster)
    return (
        f"{principal} lacks ALLOW {operation} on {resource} on cluster {cluster.alias!r} "
        f"({cluster.bootstrap_servers}); grant it, e.g. with `replicator acls apply --config "
        "<this configuration>`, which grants everything the replicator needs"
    )
