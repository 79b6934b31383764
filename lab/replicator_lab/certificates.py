"""A private certificate authority for the local stack, and the certificates it signs.

Everything is PEM, the one format both sides read: librdkafka takes a CA file and a
key + certificate file, and Kafka 4 brokers take the same files as
`ssl.keystore.type=PEM` / `ssl.truststore.type=PEM` (no keytool, no JKS). Keys are
EC P-256: generated in milliseconds, accepted by the JDK and OpenSSL alike. Keys
are written unencrypted with mode 0600: they protect loopback test clusters, and a
key password would only move the secret into another file next to it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Long enough for any local stack; a test makes expired ones on purpose.
VALIDITY = datetime.timedelta(days=825)
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate, as written to one PEM file."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    def key_pem(self) -> bytes:
        """The private key, PKCS#8 unencrypted (the form Kafka's PEM keystore reads)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def key_and_chain_pem(self, ca: Issued) -> bytes:
        """Key, certificate and the CA's: what a PEM keystore holds."""
        return self.key_pem() + self.certificate_pem() + ca.certificate_pem()

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(common_name: str = "replicator local stack CA") -> Issued:
    """A self-signed CA that may sign leaf certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, certificate)


def issue(
    ca: Issued,
    common_name: str,
    *,
    server: bool,
    addresses: Iterable[str] = (),
    valid_from: datetime.datetime | None = None,
    valid_for: datetime.timedelta = VALIDITY,
) -> Issued:
    """A leaf certificate `CN=<common_name>` signed by `ca`.

    A server certificate names 127.0.0.1 (an IP SAN, the address local listeners
    advertise) and the other `addresses` they listen on, and no host name, so a
    client that connects to `localhost` sees a host name mismatch, as it would with a
    wrong name in production. Every certificate may authenticate a client: a broker
    is a client of its controller.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    start = valid_from or datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + valid_for)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ip) for ip in _addresses(addresses)]),
            critical=False,
        )
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def _addresses(extra: Iterable[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """127.0.0.1 and `extra`, each once, in that order."""
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [LOOPBACK]
    for text in extra:
        address = ipaddress.ip_address(text)
        if address not in found:
            found.append(address)
    return found


def load(path: Path) -> Issued:
    """A key and certificate written by `write_key_and_chain` (or `write_ca`)."""
    data = path.read_bytes()
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} does not hold an EC private key")
    return Issued(key, x509.load_pem_x509_certificates(data)[0])


def write_private(path: Path, data: bytes) -> None:
    """Write `data` readable by the owner only (created so, never widened later)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def write_ca(ca: Issued, key_file: Path, certificate_file: Path) -> None:
    """The CA's key (private) and its certificate (the truststore every side reads)."""
    write_private(key_file, ca.key_pem() + ca.certificate_pem())
    certificate_file.write_bytes(ca.certificate_pem())
