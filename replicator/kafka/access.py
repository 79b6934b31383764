"""Why a client cannot get into a cluster: one line naming the cluster, the setting and the fix.

librdkafka reports a wrong password, an untrusted or expired broker certificate, a
host name the certificate does not name, a refused client certificate and a
PLAINTEXT client on a TLS port all as `Failed to get metadata: Local: Broker
transport failure`, the same words as a broker that is down, and keeps retrying
for ever. A configuration mistake must stop a command at once instead, saying
what to change: `access_problem` connects once, and when that fails for a reason
other than the cluster being away, tells which setting is wrong. The TLS
details come from a handshake of Python's own `ssl` module with the same CA, key
and host name, whose verification errors are precise where librdkafka's are not.

Nothing here shows a secret: messages name settings and files, never values.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from cryptography import x509

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.errors import kafka_error

_TIMEOUT_S = 10.0
#: The metadata request is tried in steps this long, so that the first error that
#: settles the question ends the wait (a wrong password answers in milliseconds).
_STEP_S = 0.5
#: Errors after which trying longer tells nothing new.
_VERDICTS = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._SSL,
        KafkaError._ALL_BROKERS_DOWN,
    }
)
#: How long the TLS probe waits for a broker's alert after the handshake: a broker
#: that refuses the client's certificate says so right after TLS 1.3's handshake.
_ALERT_WAIT_S = 1.0
#: librdkafka settings naming files, and the Java setting MM2 users write for each.
_FILES = {
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.certificate.location": "ssl.keystore.location",
    "ssl.key.location": "ssl.keystore.location",
    "ssl.keystore.location": "ssl.keystore.location",
}
#: OpenSSL verification results (X509_V_ERR_*) that mean "wrong host name".
_HOST_MISMATCH = frozenset({62, 64})
_EXPIRED = frozenset({9, 10})  # not yet valid, expired


class AccessDenied(ReplicatorError):
    """A cluster refuses this configuration's clients; the message says which setting to fix."""


def check_access(clusters: Iterable[ClusterConfig]) -> None:
    """Raise AccessDenied for the first cluster whose clients cannot connect and
    authenticate. A cluster that is merely away passes: outages are the engine's
    to wait out, not a configuration error."""
    for cluster in clusters:
        problem = access_problem(cluster)
        if problem is not None:
            raise AccessDenied(problem)


def access_problem(cluster: ClusterConfig) -> str | None:
    """What keeps clients of `cluster` out, or None if they get in (or it is away)."""
    settings = cluster.admin
    local = _missing_file(cluster) or _expired_certificate(cluster)
    if local is not None:
        return local
    errors: list[KafkaError] = []
    config: dict[str, Any] = {**settings, "error_cb": errors.append, "log_level": 0}
    admin = AdminClient(config)
    deadline = time.monotonic() + _TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=_STEP_S)
        except KafkaException as exc:
            admin.poll(0)  # hands the connection errors to error_cb
            if any(error.code() in _VERDICTS for error in errors):
                break
            errors.append(kafka_error(exc))
        else:
            return None
    return _explain(cluster, errors)


def _where(cluster: ClusterConfig) -> str:
    return f"cluster {cluster.alias!r} ({cluster.bootstrap_servers})"


def _missing_file(cluster: ClusterConfig) -> str | None:
    for key, java_key in _FILES.items():
        location = cluster.admin.get(key)
        if location and not Path(location).is_file():
            return (
                f"{_where(cluster)}: {cluster.alias}.{java_key} names {location}, which does not "
                "exist or is not a file; point it at the PEM file "
                + ("of the CA that signed the brokers' certificates" if key == "ssl.ca.location"
                   else "holding the client's key and certificate")
            )  # fmt: skip
    return None


def _expired_certificate(cluster: ClusterConfig) -> str | None:
    """The client certificate out of its validity period (brokers only say "bad
    certificate"; the file says when)."""
    location = cluster.admin.get("ssl.certificate.location")
    if not location:
        return None
    try:
        certificate = x509.load_pem_x509_certificates(Path(location).read_bytes())[0]
    except (OSError, ValueError):
        return None  # not PEM or unreadable: the handshake reports it
    now = datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
        return None
    when = (
        f"expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
        if now > certificate.not_valid_after_utc
        else f"is valid only from {certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    )
    return (
        f"{_where(cluster)}: the client certificate in {cluster.alias}.ssl.keystore.location "
        f"({location}) {when}: renew it (a key and certificate signed by the CA the "
        "brokers trust)"
    )


def _explain(cluster: ClusterConfig, errors: list[KafkaError]) -> str | None:
    codes = {error.code() for error in errors}
    alias = cluster.alias
    if KafkaError._AUTHENTICATION in codes or KafkaError.SASL_AUTHENTICATION_FAILED in codes:
        user = cluster.admin.get("sasl.username", "?")
        mechanism = cluster.admin.get("sasl.mechanism", "?")
        return (
            f"{_where(cluster)} rejected the {mechanism} credentials of user {user!r}: check "
            f"the username and password in {alias}.sasl.jaas.config (or the file it refers "
            "to), and that the user exists on the cluster with this mechanism"
        )
    protocol = cluster.admin.get("security.protocol", "PLAINTEXT").upper()
    host, port = _first_address(cluster)
    if not protocol.endswith("SSL"):
        if _speaks_tls(host, port):
            return (
                f"{_where(cluster)} speaks TLS but {alias}.security.protocol is {protocol}: "
                "set it to SSL or SASL_SSL (whichever the listener is) with "
                f"{alias}.ssl.truststore.location naming the CA of the brokers' certificates"
            )
        return None  # away, or an error the command reports itself
    problem = _tls_problem(cluster, host, port)
    if problem is None and KafkaError._SSL in codes:
        return (
            f"{_where(cluster)}: TLS failed: check {alias}.ssl.truststore.location and "
            f"{alias}.ssl.keystore.location against the brokers' certificates"
        )
    return problem


def _first_address(cluster: ClusterConfig) -> tuple[str, int]:
    host, _, port = cluster.bootstrap_servers.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


def _speaks_tls(host: str, port: int) -> bool:
    """Whether a TLS handshake (verifying nothing) succeeds at host:port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=_TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except OSError:  # ssl.SSLError included
        return False


def _handshake(settings: dict[str, str], host: str, port: int) -> OSError | None:
    """A TLS handshake as the client would make it; the error, None if it worked
    (or the broker is away: no TLS problem to report)."""
    context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm") != "none"
    certificate = settings.get("ssl.certificate.location")
    if certificate:
        context.load_cert_chain(certificate, settings.get("ssl.key.location", certificate))
    try:
        with (
            socket.create_connection((host, port), timeout=_TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            tls.settimeout(_ALERT_WAIT_S)
            tls.recv(1)
    except ssl.SSLError as exc:
        return exc
    except OSError:  # a timeout (no alert: accepted) or away
        return None
    return None


def _tls_problem(cluster: ClusterConfig, host: str, port: int) -> str | None:
    """The TLS handshake again, with Python's ssl module, for a precise reason
    (None: it works, or the broker is away)."""
    settings = cluster.admin
    alias = cluster.alias
    error = _handshake(settings, host, port)
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = error.verify_message
        if error.verify_code in _HOST_MISMATCH:
            return (
                f"{_where(cluster)}: the broker's certificate is not valid for {host!r} "
                f"({reason}): write {alias}.bootstrap.servers with a host name or address the "
                "certificate names (its subjectAltName), or reissue the brokers' certificates "
                "with this name"
            )
        if error.verify_code in _EXPIRED:
            return (
                f"{_where(cluster)}: the broker's certificate is out of its validity period "
                f"({reason}): renew the brokers' certificates"
            )
        return (
            f"{_where(cluster)}: the broker's certificate is not trusted ({reason}): set "
            f"{alias}.ssl.truststore.location to the PEM file of the CA that signed the "
            f"brokers' certificates (now {settings.get('ssl.ca.location', 'the system CAs')})"
        )
    if isinstance(error, ssl.SSLError):
        given = settings.get("ssl.certificate.location") or "no client certificate"
        return (
            f"{_where(cluster)}: the broker refused the TLS handshake ({error.reason}): it "
            f"requires a client certificate it trusts, and {alias}.ssl.keystore.location "
            f"gives {given}; use a key and certificate signed by the CA the brokers trust"
        )
    return None
