"""Java Kafka client settings, as found in `mm2.properties`, turned into librdkafka's.

MM2 passes producer, consumer and admin settings to the Java clients; the
replicator uses librdkafka (confluent-kafka). Most names are the same, some are
renamed (`max.request.size` is `message.max.bytes`), some need several Java
settings at once (`sasl.jaas.config` becomes `sasl.username`/`sasl.password`;
a truststore becomes `ssl.ca.location` only if it is PEM), and some have no
librdkafka meaning at all. `translate` does that for one client kind and says
what it dropped and why, so the loader can log it naming the key. This module
knows which settings exist for which client kind; the values that librdkafka
writes differently are converted by `client_values`, and the security settings
that take several Java keys at once by `client_security`.

The librdkafka names and scopes below are those of librdkafka 2.x
(`CONFIGURATION.md`; C = consumer, P = producer, * = every client). An admin
client takes only the `*` ones.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from replicator.config.client_security import (
    SECURITY_KEYS,
    Derived,
    translate_jaas,
    translate_keystore,
    translate_truststore,
)
from replicator.config.client_values import convert
from replicator.errors import ConfigError

ClientKind = Literal["consumer", "producer", "admin"]
CLIENT_KINDS: tuple[ClientKind, ...] = ("consumer", "producer", "admin")


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

#: Consumer settings of the classic group protocol that, with `group.protocol=consumer`
#: (KIP-848), are the broker's (`group.consumer.*`): librdkafka refuses them then.
CLASSIC_GROUP_SETTINGS = (
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
)

#: librdkafka's defaults of the group timeouts `check_consumer_timeouts` orders.
_GROUP_TIMEOUT_DEFAULTS_MS = {
    "heartbeat.interval.ms": 3_000,
    "session.timeout.ms": 45_000,
    "max.poll.interval.ms": 300_000,
}


def check_consumer_timeouts(config: Mapping[str, str], names: Mapping[str, str]) -> None:
    """Refuse, at load time and naming the keys, group timeouts out of order:
    heartbeat.interval.ms < session.timeout.ms <= max.poll.interval.ms (librdkafka's
    defaults where unset). librdkafka would refuse such a consumer only when a
    worker starts; and the replication loop bounds its waits for the target below
    max.poll.interval.ms, so that a worker keeps its partitions while the target
    is away. Under `group.protocol=consumer` the broker owns the session."""
    if config.get("group.protocol") == "consumer":
        return

    def value(key: str) -> int:
        return int(config.get(key, _GROUP_TIMEOUT_DEFAULTS_MS[key]))

    def named(key: str) -> str:
        given = names.get(key)
        return f"{given}={config[key]}" if given else f"{key} ({value(key)}, librdkafka's default)"

    # Where the user set one of them (e.g. `A.consumer.`), the fix is named there too.
    prefix = next(
        (names[k][: -len(k)] for k in _GROUP_TIMEOUT_DEFAULTS_MS if names.get(k, "").endswith(k)),
        "",
    )
    heartbeat, session = value("heartbeat.interval.ms"), value("session.timeout.ms")
    poll = value("max.poll.interval.ms")
    if session > poll:
        raise ConfigError(
            f"{named('max.poll.interval.ms')} is below {named('session.timeout.ms')}: "
            f"librdkafka refuses such a consumer. Set {prefix}session.timeout.ms at or "
            f"below it (e.g. {min(10_000, poll)}), or {prefix}max.poll.interval.ms at or "
            f"above {session}"
        )
    if heartbeat >= session:
        raise ConfigError(
            f"{named('heartbeat.interval.ms')} is not below {named('session.timeout.ms')}: "
            f"a worker would miss its session between two heartbeats. Set "
            f"{prefix}heartbeat.interval.ms to a third of the session timeout or less "
            f"({session // 3})"
        )


# Java names that mean the same as a differently named librdkafka setting.
# Kinds missing from an entry have no such Java setting.
_RENAMED: dict[str, dict[ClientKind, str]] = {
    "max.request.size": {"producer": "message.max.bytes"},
    "fetch.max.wait.ms": {"consumer": "fetch.wait.max.ms"},
    "buffer.memory": {"producer": "queue.buffering.max.kbytes"},
    "sasl.oauthbearer.assertion.template.file": dict.fromkeys(
        CLIENT_KINDS, "sasl.oauthbearer.assertion.jwt.template.file"
    ),
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
    exclude.internal.topics
    """
    ),
    "the replicator copies raw bytes to the same partition and filters topics itself",
)

_JAVA_CALLBACK = (
    "Java login and callback classes cannot run in librdkafka; use its own SASL "
    "mechanisms (e.g. OAUTHBEARER with sasl.oauthbearer.method = oidc)"
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
    "sasl.login.callback.handler.class": _JAVA_CALLBACK,
    "sasl.client.callback.handler.class": _JAVA_CALLBACK,
    "sasl.login.class": _JAVA_CALLBACK,
    "sasl.oauthbearer.jwt.retriever.class": _JAVA_CALLBACK,
    "sasl.oauthbearer.jwt.validator.class": "a broker-side setting",
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


def renamed_settings() -> dict[str, dict[ClientKind, str]]:
    """Java setting -> its librdkafka name, per client kind (for the reference page)."""
    return {name: dict(kinds) for name, kinds in _RENAMED.items()}


def unsupported_settings() -> dict[str, str]:
    """Java settings with no librdkafka counterpart -> why (for the reference page)."""
    return dict(_UNSUPPORTED)


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
        | SECURITY_KEYS
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
    derived: Derived = {}
    translate_jaas(remaining, derived, name)
    translate_truststore(remaining, derived, name)
    translate_keystore(remaining, derived, name)

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
        config[target] = convert(key, target, value, name(key))

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
