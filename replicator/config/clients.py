"""Java Kafka client settings, as found in `mm2.properties`, turned into librdkafka's.

MM2 passes producer, consumer and admin settings to the Java clients; the
replicator uses librdkafka (confluent-kafka). Most names are the same, some are
renamed (`max.request.size` is `message.max.bytes`), some need several Java
settings at once (`sasl.jaas.config` becomes `sasl.username`/`sasl.password`;
a truststore becomes `ssl.ca.location` only if it is PEM), and some have no
librdkafka meaning at all. `translate` does that for one client kind and says
what it dropped and why, so the loader can log it naming the key.

The librdkafka names and scopes below are those of librdkafka 2.x
(`CONFIGURATION.md`; C = consumer, P = producer, * = every client). An admin
client takes only the `*` ones.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from replicator.config.redact import invalid_value
from replicator.errors import ConfigError

ClientKind = Literal["consumer", "producer", "admin"]
CLIENT_KINDS: tuple[ClientKind, ...] = ("consumer", "producer", "admin")

# Maps a client setting to the configuration key the user wrote, for messages.
_Namer = Callable[[str], str]


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated names in `text` (long name lists read better as text)."""
    return frozenset(text.split())


_GLOBAL = _words(
    """
    allow.auto.create.topics api.version.fallback.ms api.version.request
    api.version.request.timeout.ms bootstrap.servers broker.address.family broker.address.ttl
    broker.version.fallback client.dns.lookup client.id client.rack connections.max.idle.ms debug
    enable.metrics.push enable.random.seed enable.sasl.oauthbearer.unsecure.jwt
    enable.ssl.certificate.verification https.ca.location https.ca.pem
    internal.termination.signal log.connection.close log.queue log.thread.name log_level
    max.in.flight max.in.flight.requests.per.connection message.copy.max.bytes message.max.bytes
    metadata.broker.list metadata.max.age.ms metadata.recovery.rebootstrap.trigger.ms
    metadata.recovery.strategy plugin.library.paths receive.message.max.bytes
    reconnect.backoff.jitter.ms reconnect.backoff.max.ms reconnect.backoff.ms
    retry.backoff.max.ms retry.backoff.ms sasl.kerberos.keytab sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.kerberos.principal sasl.kerberos.service.name
    sasl.mechanism sasl.mechanisms sasl.oauthbearer.assertion.algorithm
    sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
    sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.jwt.template.file
    sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.private.key.pem sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
    sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
    sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type
    sasl.oauthbearer.method sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url sasl.password sasl.username security.protocol
    socket.blocking.max.ms socket.connection.setup.timeout.ms socket.keepalive.enable
    socket.max.fails socket.nagle.disable socket.receive.buffer.bytes socket.send.buffer.bytes
    socket.timeout.ms ssl.ca.certificate.stores ssl.ca.location ssl.ca.pem
    ssl.certificate.location ssl.certificate.pem ssl.cipher.suites ssl.crl.location
    ssl.curves.list ssl.endpoint.identification.algorithm ssl.engine.id ssl.engine.location
    ssl.key.location ssl.key.password ssl.key.pem ssl.keystore.location ssl.keystore.password
    ssl.providers ssl.sigalgs.list statistics.interval.ms topic.blacklist
    topic.metadata.propagation.max.ms topic.metadata.refresh.fast.cnt
    topic.metadata.refresh.fast.interval.ms topic.metadata.refresh.interval.ms
    topic.metadata.refresh.sparse
    """
)
# `max.poll.records` is deliberately absent: in librdkafka it exists only for
# share consumers, which is not what an MM2 file means by it.
_CONSUMER = _words(
    """
    auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs
    consume.callback.max.messages coordinator.query.interval.ms enable.auto.commit
    enable.auto.offset.store enable.partition.eof fetch.error.backoff.ms fetch.max.bytes
    fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms fetch.wait.max.ms group.id
    group.instance.id group.protocol group.protocol.type group.remote.assignor
    heartbeat.interval.ms isolation.level max.partition.fetch.bytes max.poll.interval.ms
    offset.store.method offset.store.path offset.store.sync.interval.ms
    partition.assignment.strategy queued.max.messages.kbytes queued.min.messages
    session.timeout.ms
    """
)
_PRODUCER = _words(
    """
    acks batch.num.messages batch.size compression.codec compression.level compression.type
    delivery.report.only.error delivery.timeout.ms enable.gapless.guarantee enable.idempotence
    linger.ms message.send.max.retries message.timeout.ms partitioner produce.offset.report
    queue.buffering.backpressure.threshold queue.buffering.max.kbytes
    queue.buffering.max.messages queue.buffering.max.ms queuing.strategy request.required.acks
    request.timeout.ms retries sticky.partitioning.linger.ms transaction.timeout.ms
    transactional.id
    """
)

# Java names that mean the same as a differently named librdkafka setting.
# Kinds missing from an entry have no such Java setting.
_RENAMED: dict[str, dict[ClientKind, str]] = {
    "max.request.size": {"producer": "message.max.bytes"},
    "fetch.max.wait.ms": {"consumer": "fetch.wait.max.ms"},
    "buffer.memory": {"producer": "queue.buffering.max.kbytes"},
    # Java's request timeout is the network timeout of every request; in
    # librdkafka that is socket.timeout.ms, except for the producer, whose
    # request.timeout.ms is the produce request timeout as in Java.
    "request.timeout.ms": {
        "producer": "request.timeout.ms",
        "consumer": "socket.timeout.ms",
        "admin": "socket.timeout.ms",
    },
    "send.buffer.bytes": dict.fromkeys(CLIENT_KINDS, "socket.send.buffer.bytes"),
    "receive.buffer.bytes": dict.fromkeys(CLIENT_KINDS, "socket.receive.buffer.bytes"),
}

# Java settings that mean nothing to a replicator that copies bytes to the same
# partition number: dropped, logged at DEBUG.
_IRRELEVANT = dict.fromkeys(
    _words(
        """
    key.serializer value.serializer key.deserializer value.deserializer
    partitioner.class partitioner.ignore.keys partitioner.adaptive.partitioning.enable
    partitioner.availability.timeout.ms metric.reporters metrics.num.samples
    metrics.sample.window.ms metrics.recording.level auto.include.jmx.reporter
    exclude.internal.topics sasl.login.callback.handler.class sasl.client.callback.handler.class
    sasl.login.class
    """
    ),
    "the replicator copies raw bytes to the same partition and filters topics itself",
)

# Java settings with a meaning but no librdkafka equivalent: dropped with a warning.
_UNSUPPORTED: dict[str, str] = {
    "max.poll.records": "no librdkafka equivalent; the replicator sizes its own batches",
    "max.block.ms": "no librdkafka equivalent; the replicator handles a full queue itself",
    "interceptor.classes": "Java interceptors cannot run in librdkafka",
    "default.api.timeout.ms": "no librdkafka equivalent",
    "socket.connection.setup.timeout.max.ms": "no librdkafka equivalent",
    "metadata.max.idle.ms": "no librdkafka equivalent",
    "rebalance.timeout.ms": "no librdkafka equivalent (max.poll.interval.ms bounds a rebalance)",
    "security.providers": "Java security providers do not apply to librdkafka (OpenSSL)",
    "ssl.protocol": "librdkafka negotiates the TLS version with OpenSSL",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version with OpenSSL",
    "ssl.provider": "Java security providers do not apply to librdkafka (OpenSSL)",
    "ssl.keymanager.algorithm": "a Java (JSSE) setting",
    "ssl.trustmanager.algorithm": "a Java (JSSE) setting",
    "ssl.secure.random.implementation": "a Java (JSSE) setting",
    "ssl.engine.factory.class": "a Java (JSSE) setting; see ssl.engine.location",
    "sasl.kerberos.ticket.renew.window.factor": "librdkafka renews tickets with kinit",
    "sasl.kerberos.ticket.renew.jitter": "librdkafka renews tickets with kinit",
    "sasl.login.refresh.window.factor": "librdkafka refreshes SASL logins itself",
    "sasl.login.refresh.window.jitter": "librdkafka refreshes SASL logins itself",
    "sasl.login.refresh.min.period.seconds": "librdkafka refreshes SASL logins itself",
    "sasl.login.refresh.buffer.seconds": "librdkafka refreshes SASL logins itself",
    "sasl.login.connect.timeout.ms": "no librdkafka equivalent",
    "sasl.login.read.timeout.ms": "no librdkafka equivalent",
    "sasl.login.retry.backoff.ms": "no librdkafka equivalent",
    "sasl.login.retry.backoff.max.ms": "no librdkafka equivalent",
    "sasl.oauthbearer.scope.claim.name": "no librdkafka equivalent",
    "sasl.oauthbearer.jwks.endpoint.url": "a broker-side setting",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "a broker-side setting",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "a broker-side setting",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "a broker-side setting",
    "sasl.oauthbearer.clock.skew.seconds": "a broker-side setting",
    "sasl.oauthbearer.expected.audience": "a broker-side setting",
    "sasl.oauthbearer.expected.issuer": "a broker-side setting",
    "sasl.oauthbearer.header.urlencode": "no librdkafka equivalent",
    "compression.gzip.level": "use compression.level",
    "compression.lz4.level": "use compression.level",
    "compression.zstd.level": "use compression.level",
}

# Java settings that are read together by the multi-key translations below.
_COMPOSITE = _words(
    """
    sasl.jaas.config ssl.truststore.location ssl.truststore.type ssl.truststore.password
    ssl.truststore.certificates ssl.keystore.type ssl.keystore.key ssl.keystore.certificate.chain
    """
)

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}
_TYPE_BY_SUFFIX = {
    ".pem": "PEM",
    ".crt": "PEM",
    ".cer": "PEM",
    ".p12": "PKCS12",
    ".pfx": "PKCS12",
}
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_OFFSET_RESETS = {"earliest": "earliest", "latest": "latest", "none": "error", "error": "error"}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([=;])|([^\s=;"]+))', re.DOTALL)
_JAAS_FORM = 'a login module, e.g. PlainLoginModule required username="..." password="...";'


@dataclass(frozen=True)
class Dropped:
    """A Java setting left out of a librdkafka configuration, and why."""

    reason: str
    #: True when the setting cannot matter to the replicator (logged at DEBUG);
    #: False when the user asked for something librdkafka cannot do (a warning).
    harmless: bool


@dataclass(frozen=True)
class Translation:
    """The librdkafka configuration of one client, and what was left out of it."""

    config: dict[str, str]
    #: Java setting name -> why it has no librdkafka equivalent.
    dropped: dict[str, Dropped] = field(default_factory=dict)
    #: Settings that exist, but not for this client kind (e.g. `acks` for a consumer).
    other_kind: frozenset[str] = frozenset()


@functools.cache
def client_keys() -> frozenset[str]:
    """Every Java Kafka client setting and librdkafka setting this module knows."""
    return (
        _GLOBAL
        | _CONSUMER
        | _PRODUCER
        | _COMPOSITE
        | frozenset(_RENAMED).union(_IRRELEVANT, _UNSUPPORTED)
    )


def is_client_key(name: str) -> bool:
    """Whether `name` is a Java Kafka client setting or a librdkafka setting."""
    return name in client_keys()


def librdkafka_name(name: str, kind: ClientKind) -> str:
    """The librdkafka name `name` has for a `kind` client (itself unless Java renames it).

    The loader merges settings under this name, so that a more specific
    `max.request.size` overrides a less specific `message.max.bytes`.
    """
    return _RENAMED.get(name, {}).get(kind, name)


def is_connection_key(name: str) -> bool:
    """The settings MM2 treats as a cluster's connection settings (MirrorClientConfig).

    MM2 copies these from the top level and from `<alias>.` into every client
    of the cluster after the flow-level client overrides, so they take
    precedence over `A->B.consumer.*` (see `replicator.config.loader`).
    """
    return name in {"bootstrap.servers", "security.protocol"} or name.startswith(("ssl.", "sasl."))


def translate(
    settings: Mapping[str, str],
    kind: ClientKind,
    *,
    names: Mapping[str, str] | None = None,
) -> Translation:
    """The librdkafka configuration for a `kind` client from Java/librdkafka `settings`.

    `settings` are already merged (see the loader). A key that is no Kafka
    client setting at all is dropped like a Java-only one. `names` maps a
    setting to the configuration key it came from, so that errors name what
    the user wrote (`us-east.ssl.truststore.location`).
    Settings valid for another kind only are left out without complaint.
    """
    origin = dict(names or {})

    def name(key: str) -> str:
        return origin.get(key, key)

    remaining = dict(settings)
    derived: dict[str, tuple[str, str]] = {}  # librdkafka key -> (value, from which key)
    _translate_jaas(remaining, derived, name)
    _translate_truststore(remaining, derived, name)
    _translate_keystore(remaining, derived, name)

    config: dict[str, str] = {}
    dropped: dict[str, Dropped] = {}
    other_kind: set[str] = set()
    for key, value in remaining.items():
        if not is_client_key(key):
            dropped[key] = Dropped("not a Kafka client setting known to librdkafka", harmless=False)
            continue
        if key in _IRRELEVANT:
            dropped[key] = Dropped(_IRRELEVANT[key], harmless=True)
            continue
        if key in _UNSUPPORTED:
            dropped[key] = Dropped(_UNSUPPORTED[key], harmless=False)
            continue
        target = _RENAMED[key].get(kind) if key in _RENAMED else key
        if target is None or not _valid_for(target, kind):
            other_kind.add(key)
            continue
        config[target] = _convert(key, target, value, name(key))

    for key, (value, source) in derived.items():
        if key in config and config[key] != value:
            raise ConfigError(
                f"{name(source)} and {name(key)} contradict each other: set only one of them"
            )
        config[key] = value
    return Translation(config, dropped, frozenset(other_kind))


#: Callbacks an admin client needs to connect at all (the others are per client).
_CONNECTION_CALLBACKS = frozenset({"oauth_cb"})


def admin_settings(config: Mapping[str, object]) -> dict[str, object]:
    """The settings of a consumer's or producer's librdkafka `config` that an admin
    client of the same cluster takes: connection, security and network settings,
    without the other kind's (which librdkafka would warn about) or callbacks."""
    return {
        key: value
        for key, value in config.items()
        if key in _GLOBAL or key in _CONNECTION_CALLBACKS
    }


def _valid_for(librdkafka_key: str, kind: ClientKind) -> bool:
    if librdkafka_key in _GLOBAL:
        return True
    if kind == "consumer":
        return librdkafka_key in _CONSUMER
    if kind == "producer":
        return librdkafka_key in _PRODUCER
    return False


def _convert(java_key: str, key: str, value: str, shown_as: str) -> str:
    """A Java value in librdkafka's form, validated where librdkafka would reject it late."""
    converter = _CONVERTERS.get(java_key) or _CONVERTERS.get(key)
    return converter(value, shown_as) if converter else value


def _security_protocol(value: str, shown_as: str) -> str:
    if value.upper() not in _SECURITY_PROTOCOLS:
        raise invalid_value(shown_as, value, "one of " + ", ".join(_SECURITY_PROTOCOLS))
    return value.upper()


def _endpoint_identification(value: str, shown_as: str) -> str:
    # Java disables host name verification with an empty value, librdkafka with "none".
    if value.lower() not in ("", "https", "none"):
        raise invalid_value(shown_as, value, "https or an empty value")
    return value.lower() or "none"


def _offset_reset(value: str, shown_as: str) -> str:
    if value.lower() not in _OFFSET_RESETS:
        raise invalid_value(shown_as, value, "earliest, latest or none")
    return _OFFSET_RESETS[value.lower()]


def _isolation_level(value: str, shown_as: str) -> str:
    if value not in _ISOLATION_LEVELS:
        raise invalid_value(shown_as, value, " or ".join(_ISOLATION_LEVELS))
    return value


def _socket_buffer(value: str, shown_as: str) -> str:
    # Java's -1 ("use the OS default") is librdkafka's 0.
    return "0" if _integer(value, shown_as) == -1 else value


def _kilobytes(value: str, shown_as: str) -> str:
    return str(max(1, math.ceil(_integer(value, shown_as) / 1024)))


def _integer(value: str, shown_as: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise invalid_value(shown_as, value, "an integer") from None


def _assignors(value: str, shown_as: str) -> str:
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in names if part not in _ASSIGNORS]
    if unknown:
        raise ConfigError(
            f"{shown_as}: {', '.join(unknown)} has no librdkafka equivalent "
            "(librdkafka has range, roundrobin and cooperative-sticky)"
        )
    return ",".join(dict.fromkeys(_ASSIGNORS[part] for part in names))


_CONVERTERS: dict[str, Callable[[str, str], str]] = {
    "security.protocol": _security_protocol,
    "ssl.endpoint.identification.algorithm": _endpoint_identification,
    "auto.offset.reset": _offset_reset,
    "isolation.level": _isolation_level,
    "partition.assignment.strategy": _assignors,
    "send.buffer.bytes": _socket_buffer,
    "receive.buffer.bytes": _socket_buffer,
    "buffer.memory": _kilobytes,
}


def _translate_jaas(
    settings: dict[str, str],
    derived: dict[str, tuple[str, str]],
    name: _Namer,
) -> None:
    """`sasl.jaas.config` -> librdkafka's SASL settings, checked against `sasl.mechanism`."""
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is None:
        return
    key = name("sasl.jaas.config")
    module, options = _parse_jaas(jaas, key)
    if module not in _LOGIN_MODULES:
        raise ConfigError(
            f"{key}: login module {module} has no librdkafka equivalent (supported: "
            + ", ".join(sorted(m.rsplit(".", 1)[-1] for m in _LOGIN_MODULES))
            + ")"
        )
    mechanisms, translate_options = _LOGIN_MODULES[module]
    short_name = module.rsplit(".", 1)[-1]
    mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms"))
    if mechanism is None:
        if len(mechanisms) > 1:
            raise ConfigError(f"{key}: {short_name} needs sasl.mechanism {' or '.join(mechanisms)}")
        derived["sasl.mechanism"] = (mechanisms[0], "sasl.jaas.config")
    elif mechanism.upper() not in mechanisms:
        raise ConfigError(
            f"{key} uses {short_name} but {name('sasl.mechanism')} is {mechanism} "
            f"(expected {' or '.join(mechanisms)})"
        )
    for librdkafka_key, value in translate_options(options, f"{key}: {short_name}").items():
        derived[librdkafka_key] = (value, "sasl.jaas.config")


def _option(options: Mapping[str, str], option: str, context: str) -> str:
    if option not in options:
        raise ConfigError(f"{context} needs a {option} option")
    return options[option]


def _password_options(options: Mapping[str, str], context: str) -> dict[str, str]:
    return {
        "sasl.username": _option(options, "username", context),
        "sasl.password": _option(options, "password", context),
    }


def _oauthbearer_options(options: Mapping[str, str], context: str) -> dict[str, str]:
    if "clientId" in options:
        translated = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": options["clientId"],
            "sasl.oauthbearer.client.secret": _option(options, "clientSecret", context),
        }
        if "scope" in options:
            translated["sasl.oauthbearer.scope"] = options["scope"]
        return translated
    if "unsecuredLoginStringClaim_sub" in options:
        # Kafka's unsecured (test-only) tokens; librdkafka has the same mode.
        return {
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": f"principal={options['unsecuredLoginStringClaim_sub']}",
        }
    raise ConfigError(
        f"{context} needs clientId and clientSecret options (librdkafka fetches OIDC tokens itself)"
    )


def _kerberos_options(options: Mapping[str, str], _context: str) -> dict[str, str]:
    translated = {}
    if "keyTab" in options:
        translated["sasl.kerberos.keytab"] = options["keyTab"]
    if "principal" in options:
        translated["sasl.kerberos.principal"] = options["principal"]
    return translated


# Login module -> (the sasl.mechanism values it serves, how its options translate).
_LOGIN_MODULES: dict[
    str, tuple[tuple[str, ...], Callable[[Mapping[str, str], str], dict[str, str]]]
] = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": (("PLAIN",), _password_options),
    "org.apache.kafka.common.security.scram.ScramLoginModule": (
        ("SCRAM-SHA-256", "SCRAM-SHA-512"),
        _password_options,
    ),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": (
        ("OAUTHBEARER",),
        _oauthbearer_options,
    ),
    "com.sun.security.auth.module.Krb5LoginModule": (("GSSAPI",), _kerberos_options),
}


def _parse_jaas(text: str, key: str) -> tuple[str, dict[str, str]]:
    """Parse a one-module JAAS configuration: `Class flag key=value ... ;`.

    Errors say what is wrong without quoting the text, which holds secrets.
    """
    tokens: list[tuple[str, str]] = []  # (kind, text) with kind in quoted|punct|word
    position = 0
    stripped = text.strip()
    while position < len(stripped):
        match = _JAAS_TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{key}: cannot be parsed; expected {_JAAS_FORM}")
        position = match.end()
        if match.group(1) is not None:
            tokens.append(("quoted", re.sub(r"\\(.)", r"\1", match.group(1))))
        elif match.group(2) is not None:
            tokens.append(("punct", match.group(2)))
        elif match.group(3) is not None:
            tokens.append(("word", match.group(3)))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(f"{key}: cannot be parsed; expected {_JAAS_FORM}")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in _JAAS_FLAGS:
        raise ConfigError(f"{key}: the control flag must be one of {', '.join(_JAAS_FLAGS)}")
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0] != ("punct", ";"):
        if (
            len(rest) < 3
            or rest[0][0] != "word"
            or rest[1] != ("punct", "=")
            or rest[2][0] == "punct"
        ):
            raise ConfigError(f"{key}: cannot be parsed; expected {_JAAS_FORM}")
        options[rest[0][1]] = rest[2][1]
        rest = rest[3:]
    if not rest:
        raise ConfigError(f"{key}: the login module must end with ';'")
    if len(rest) > 1:
        raise ConfigError(f"{key}: Kafka clients take exactly one login module")
    return module, options


def _translate_truststore(
    settings: dict[str, str],
    derived: dict[str, tuple[str, str]],
    name: _Namer,
) -> None:
    """A PEM truststore -> `ssl.ca.location`/`ssl.ca.pem`; any other type is an error."""
    location = settings.pop("ssl.truststore.location", None)
    store_type = _store_type(settings.pop("ssl.truststore.type", None), location)
    settings.pop("ssl.truststore.password", None)  # PEM truststores have no password
    certificates = settings.pop("ssl.truststore.certificates", None)
    if location is not None:
        if store_type != "PEM":
            raise ConfigError(
                f"{name('ssl.truststore.location')}: a {store_type} truststore cannot be used: "
                "librdkafka reads CA certificates only as PEM (ssl.ca.location). Convert it, e.g. "
                "`keytool -exportcert -rfc -keystore truststore.jks -alias <alias> > ca.pem`, "
                "then set ssl.truststore.type=PEM and ssl.truststore.location=ca.pem "
                "(or ssl.ca.location=ca.pem)"
            )
        derived["ssl.ca.location"] = (location, "ssl.truststore.location")
    if certificates is not None:
        derived["ssl.ca.pem"] = (certificates, "ssl.truststore.certificates")


def _translate_keystore(
    settings: dict[str, str],
    derived: dict[str, tuple[str, str]],
    name: _Namer,
) -> None:
    """A PKCS#12 or PEM keystore -> librdkafka's client certificate settings."""
    location = settings.get("ssl.keystore.location")
    store_type = _store_type(settings.pop("ssl.keystore.type", None), location)
    key_pem = settings.pop("ssl.keystore.key", None)
    chain_pem = settings.pop("ssl.keystore.certificate.chain", None)
    if location is not None:
        if store_type == "PEM":
            # A PEM keystore file holds the private key and the certificate chain.
            settings.pop("ssl.keystore.location")
            settings.pop("ssl.keystore.password", None)
            derived["ssl.key.location"] = (location, "ssl.keystore.location")
            derived["ssl.certificate.location"] = (location, "ssl.keystore.location")
        elif store_type != "PKCS12":
            raise ConfigError(
                f"{name('ssl.keystore.location')}: a {store_type} keystore cannot be used: "
                "librdkafka reads PKCS12 or PEM keystores. Convert it, e.g. "
                "`keytool -importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 "
                "-deststoretype PKCS12`, then set ssl.keystore.type=PKCS12"
            )
        # PKCS12: ssl.keystore.location/password are librdkafka's names too.
    if key_pem is not None:
        derived["ssl.key.pem"] = (key_pem, "ssl.keystore.key")
    if chain_pem is not None:
        derived["ssl.certificate.pem"] = (chain_pem, "ssl.keystore.certificate.chain")


def _store_type(explicit: str | None, location: str | None) -> str:
    """The store type Java would use: the explicit one, else JKS.

    Without an explicit type, a file named like PEM or PKCS#12 is taken as
    such: Java's JKS loader reads PKCS#12 files too, and such a file is
    obviously not JKS.
    """
    if explicit:
        return explicit.upper()
    suffix = Path(location).suffix.lower() if location else ""
    return _TYPE_BY_SUFFIX.get(suffix, "JKS")
