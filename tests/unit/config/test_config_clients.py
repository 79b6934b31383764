"""Java client settings -> librdkafka settings (no brokers)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from replicator.config import load_config
from replicator.config.clients import admin_settings, is_client_key, is_connection_key, translate
from replicator.engine.data_path import choose
from replicator.errors import ConfigError

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="pa$$ \\"word\\"";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="bob" password="scram-secret";'
)


def test_valid_librdkafka_names_pass_through_per_kind():
    settings = {
        "bootstrap.servers": "h:1",
        "client.id": "me",
        "acks": "all",
        "linger.ms": "5",
        "fetch.min.bytes": "10",
        "isolation.level": "read_committed",
    }
    consumer = translate(settings, "consumer")
    producer = translate(settings, "producer")
    admin = translate(settings, "admin")
    assert consumer.config == {
        "bootstrap.servers": "h:1",
        "client.id": "me",
        "fetch.min.bytes": "10",
        "isolation.level": "read_committed",
    }
    assert producer.config == {
        "bootstrap.servers": "h:1",
        "client.id": "me",
        "acks": "all",
        "linger.ms": "5",
    }
    assert admin.config == {"bootstrap.servers": "h:1", "client.id": "me"}
    assert consumer.other_kind == {"acks", "linger.ms"}
    assert not consumer.dropped


@pytest.mark.parametrize(
    ("java", "value", "kind", "expected"),
    [
        ("max.request.size", "2000000", "producer", {"message.max.bytes": "2000000"}),
        ("fetch.max.wait.ms", "250", "consumer", {"fetch.wait.max.ms": "250"}),
        ("request.timeout.ms", "40000", "producer", {"request.timeout.ms": "40000"}),
        ("request.timeout.ms", "40000", "consumer", {"socket.timeout.ms": "40000"}),
        ("request.timeout.ms", "40000", "admin", {"socket.timeout.ms": "40000"}),
        ("buffer.memory", "32768", "producer", {"queue.buffering.max.kbytes": "32"}),
        ("buffer.memory", "1000", "producer", {"queue.buffering.max.kbytes": "1"}),
        ("send.buffer.bytes", "-1", "producer", {"socket.send.buffer.bytes": "0"}),
        ("receive.buffer.bytes", "65536", "consumer", {"socket.receive.buffer.bytes": "65536"}),
        ("batch.size", "16384", "producer", {"batch.size": "16384"}),
        ("compression.type", "zstd", "producer", {"compression.type": "zstd"}),
        ("enable.idempotence", "true", "producer", {"enable.idempotence": "true"}),
        ("fetch.max.bytes", "1048576", "consumer", {"fetch.max.bytes": "1048576"}),
        ("max.partition.fetch.bytes", "1", "consumer", {"max.partition.fetch.bytes": "1"}),
        ("auto.offset.reset", "none", "consumer", {"auto.offset.reset": "error"}),
        ("auto.offset.reset", "Latest", "consumer", {"auto.offset.reset": "latest"}),
        ("security.protocol", "sasl_ssl", "admin", {"security.protocol": "SASL_SSL"}),
        (
            "ssl.endpoint.identification.algorithm",
            "",
            "admin",
            {"ssl.endpoint.identification.algorithm": "none"},
        ),
        (
            "ssl.endpoint.identification.algorithm",
            "HTTPS",
            "admin",
            {"ssl.endpoint.identification.algorithm": "https"},
        ),
        (
            "partition.assignment.strategy",
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            "consumer",
            {"partition.assignment.strategy": "cooperative-sticky"},
        ),
    ],
)
def test_java_settings_are_translated(java, value, kind, expected):
    assert translate({java: value}, kind).config == expected


def test_renamed_setting_for_a_kind_without_it_is_other_kind():
    result = translate({"max.request.size": "2000000"}, "consumer")
    assert result.config == {}
    assert result.other_kind == {"max.request.size"}


def test_serializers_and_interceptors_are_dropped_with_reasons():
    result = translate(
        {
            "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
            "interceptor.classes": "com.example.Interceptor",
            "max.poll.records": "500",
        },
        "consumer",
    )
    assert result.config == {}
    assert result.dropped["key.serializer"].harmless
    assert not result.dropped["interceptor.classes"].harmless
    assert not result.dropped["max.poll.records"].harmless
    assert "no librdkafka equivalent" in result.dropped["max.poll.records"].reason


def test_plain_jaas_becomes_username_and_password_and_mechanism():
    config = translate(
        {"security.protocol": "SASL_SSL", "sasl.jaas.config": PLAIN_JAAS}, "admin"
    ).config
    assert config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": 'pa$$ "word"',
    }


def test_scram_jaas_with_mechanism():
    config = translate(
        {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS}, "producer"
    ).config
    assert config == {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": "scram-secret",
    }


def test_scram_jaas_without_mechanism_is_an_error_without_the_secret():
    with pytest.raises(ConfigError) as info:
        translate({"sasl.jaas.config": SCRAM_JAAS}, "producer", names={"sasl.jaas.config": "B.x"})
    assert "sasl.mechanism SCRAM-SHA-256 or SCRAM-SHA-512" in str(info.value)
    assert str(info.value).startswith("B.x:")
    assert "scram-secret" not in str(info.value)


def test_jaas_mechanism_mismatch():
    with pytest.raises(ConfigError, match=r"uses PlainLoginModule but sasl\.mechanism is GSSAPI"):
        translate({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": PLAIN_JAAS}, "admin")


@pytest.mark.parametrize(
    ("jaas", "problem"),
    [
        ('PlainLoginModule required username="a" password="topsecret"', "must end with ';'"),
        ('x.PlainLoginModule maybe password="topsecret";', "control flag"),
        ('a.Mod required password="topsecret"; b.Mod required;', "exactly one login module"),
        ('a.Mod required password "topsecret";', "cannot be parsed"),
        ('com.example.Custom required password="topsecret";', "no librdkafka equivalent"),
        (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'password="topsecret";',
            "needs a username option",
        ),
    ],
)
def test_bad_jaas_never_shows_the_text(jaas, problem):
    with pytest.raises(ConfigError) as info:
        translate({"sasl.jaas.config": jaas}, "admin")
    assert problem in str(info.value)
    assert "topsecret" not in str(info.value)


def test_oauthbearer_jaas_becomes_oidc():
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="svc" clientSecret="oidc-secret" scope="kafka";'
    )
    config = translate(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": jaas,
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.login.callback.handler.class": "org.apache...OAuthBearerLoginCallbackHandler",
        },
        "consumer",
    ).config
    assert config == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": "oidc-secret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    }


def test_kerberos_jaas():
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/etc/kafka.keytab" principal="mm2@EXAMPLE.COM";'
    )
    config = translate({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas}, "admin").config
    assert config["sasl.kerberos.keytab"] == "/etc/kafka.keytab"
    assert config["sasl.kerberos.principal"] == "mm2@EXAMPLE.COM"


def test_jaas_and_explicit_username_that_differ_contradict():
    with pytest.raises(ConfigError, match="contradict each other"):
        translate({"sasl.jaas.config": PLAIN_JAAS, "sasl.username": "carol"}, "admin")


def test_pem_truststore_becomes_ssl_ca_location():
    config = translate(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.truststore.password": "unused",
        },
        "consumer",
    ).config
    assert config == {"ssl.ca.location": "/etc/ca.pem"}


def test_pem_truststore_type_is_inferred_from_the_file_name():
    assert translate({"ssl.truststore.location": "/etc/ca.crt"}, "admin").config == {
        "ssl.ca.location": "/etc/ca.crt"
    }


@pytest.mark.parametrize(
    ("settings", "kind_named"),
    [
        ({"ssl.truststore.location": "/etc/truststore.jks"}, "JKS"),
        ({"ssl.truststore.location": "/etc/t.p12", "ssl.truststore.type": "PKCS12"}, "PKCS12"),
    ],
)
def test_non_pem_truststore_is_an_error_explaining_pem(settings, kind_named):
    with pytest.raises(ConfigError) as info:
        translate(
            {**settings, "ssl.truststore.password": "trust-pw"},
            "consumer",
            names={"ssl.truststore.location": "us-east.ssl.truststore.location"},
        )
    message = str(info.value)
    assert message.startswith("us-east.ssl.truststore.location:")
    assert f"a {kind_named} truststore" in message
    assert "PEM" in message
    assert "ssl.ca.location" in message
    assert "trust-pw" not in message


def test_inline_pem_truststore_and_keystore():
    config = translate(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----...",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----...",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----chain",
            "ssl.key.password": "kp",
        },
        "producer",
    ).config
    assert config == {
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----...",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----...",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----chain",
        "ssl.key.password": "kp",
    }


def test_pkcs12_keystore_passes_through():
    config = translate(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/etc/client.p12",
            "ssl.keystore.password": "ks",
        },
        "admin",
    ).config
    assert config == {"ssl.keystore.location": "/etc/client.p12", "ssl.keystore.password": "ks"}


def test_pem_keystore_file_holds_key_and_certificate():
    config = translate(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/etc/client.pem"}, "admin"
    ).config
    assert config == {
        "ssl.key.location": "/etc/client.pem",
        "ssl.certificate.location": "/etc/client.pem",
    }


def test_jks_keystore_is_an_error():
    with pytest.raises(ConfigError, match="a JKS keystore cannot be used"):
        translate({"ssl.keystore.location": "/etc/keystore.jks"}, "admin")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("security.protocol", "TLS", "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ("auto.offset.reset", "by_duration:PT1H", "earliest, latest or none"),
        ("isolation.level", "READ_COMMITTED", "read_committed or read_uncommitted"),
        ("buffer.memory", "lots", "an integer"),
        ("ssl.endpoint.identification.algorithm", "ldaps", "https or an empty value"),
    ],
)
def test_bad_values_name_key_and_expectation(key, value, expected):
    with pytest.raises(ConfigError) as info:
        translate({key: value}, "consumer" if key != "buffer.memory" else "producer")
    assert str(info.value) == f"{key}: expected {expected}, got {value!r}"


def test_unknown_assignor_is_an_error():
    with pytest.raises(ConfigError, match="StickyAssignor has no librdkafka equivalent"):
        translate(
            {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"},
            "consumer",
        )


def test_client_key_recognition():
    assert is_client_key("sasl.jaas.config")
    assert is_client_key("max.poll.records")
    assert is_client_key("message.max.bytes")
    assert is_client_key("key.serializer")
    assert not is_client_key("topics")
    assert not is_client_key("fetch.min.byte")
    assert is_connection_key("ssl.truststore.location")
    assert is_connection_key("bootstrap.servers")
    assert not is_connection_key("acks")


def test_unknown_keys_are_dropped_not_passed_to_librdkafka():
    result = translate({"bootstrap.servers": "h:1", "no.such.setting": "x"}, "admin")
    assert result.config == {"bootstrap.servers": "h:1"}
    assert not result.dropped["no.such.setting"].harmless


def test_librdkafka_accepts_every_translated_setting():
    """Creating the clients (never connected) makes librdkafka check names and values."""
    settings = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_JAAS,
        "ssl.endpoint.identification.algorithm": "",
        "client.id": "mm2",
        "request.timeout.ms": "40000",
        "max.request.size": "2000000",
        "buffer.memory": "33554432",
        "batch.size": "16384",
        "linger.ms": "5",
        "compression.type": "zstd",
        "acks": "all",
        "enable.idempotence": "true",
        "delivery.timeout.ms": "120000",
        "fetch.max.bytes": "1048576",
        "max.partition.fetch.bytes": "1048576",
        "fetch.min.bytes": "1",
        "fetch.max.wait.ms": "100",
        "isolation.level": "read_committed",
        "auto.offset.reset": "none",
        "partition.assignment.strategy": (
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        ),
        "send.buffer.bytes": "-1",
        "receive.buffer.bytes": "65536",
        "client.dns.lookup": "use_all_dns_ips",
        "max.poll.records": "100",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }
    quiet = {"log_level": "0"}
    Consumer({**translate(settings, "consumer").config, "group.id": "probe", **quiet}).close()
    Producer({**translate(settings, "producer").config, **quiet}).flush(0)
    AdminClient({**translate(settings, "admin").config, **quiet})


def test_admin_settings_of_a_client_config_are_what_an_admin_client_takes():
    """The reachability probe is an admin client built from whichever client of the
    cluster reported first: it keeps connection and security settings, drops the
    other kinds' settings and the callbacks of that client."""
    connection = translate(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": SCRAM_JAAS,
            "socket.timeout.ms": "30000",
        },
        "admin",
    ).config
    consumer = {
        **connection,
        "group.id": "g",
        "isolation.level": "read_committed",
        "error_cb": print,
        "logger": object(),
    }
    assert admin_settings(consumer) == connection
    assert connection["sasl.password"] and connection["security.protocol"] == "SASL_SSL"
    AdminClient({**admin_settings(consumer), "log_level": "0"})  # librdkafka takes them all


def test_a_mechanism_this_librdkafka_lacks_is_refused_at_load(tmp_path):
    """Kerberos (GSSAPI) needs a librdkafka built with it; the one here is not. Before,
    the file loaded and every worker died at start, restarted in a loop."""
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/etc/kafka.keytab" principal="mm2@EXAMPLE.COM";'
    )
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nA.security.protocol = SASL_PLAINTEXT\n"
        f"A.sasl.mechanism = GSSAPI\nA.sasl.jaas.config = {jaas}\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "A.sasl.mechanism=GSSAPI" in str(refused.value)
    assert "No provider for SASL mechanism GSSAPI" in str(refused.value)


def test_sasl_without_a_mechanism_is_kerberos_and_refused_naming_the_protocol(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nA.security.protocol = SASL_SSL\n"
    )
    with pytest.raises(ConfigError, match=r"A\.security\.protocol=SASL_SSL.*default is GSSAPI"):
        load_config(path)


def test_the_compiled_data_planes_own_librdkafka_checks_its_clients(tmp_path):
    """The compiled data plane links its own librdkafka (2.12.1, built without OAuth/OIDC),
    older than confluent-kafka's: a setting only the newer one knows loaded, and every
    worker on the compiled path then failed to build its source consumer. Under `auto`
    such a flow takes the Python loop, saying why; `compiled` refuses it at load."""
    dataplane = pytest.importorskip("replicator._dataplane")
    path = tmp_path / "mm2.properties"
    text = (
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\nA.consumer.sasl.oauthbearer.sub.claim.name = client_id\n"
    )
    path.write_text(text)
    flow = load_config(path).flow("A->B")  # auto: loads
    choice = choose(flow)
    assert not choice.compiled
    assert f"its librdkafka {dataplane.LIBRDKAFKA_VERSION} refuses the source consumer" in (
        choice.detail
    )
    assert "sasl.oauthbearer.sub.claim.name" in choice.detail
    path.write_text(text + "A->B.replicator.data.path = compiled\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert "A.consumer.sasl.oauthbearer.sub.claim.name=client_id" in message
    assert f"compiled data plane (librdkafka {dataplane.LIBRDKAFKA_VERSION})" in message
    assert "replicator.data.path = auto or python" in message
    plain = text.replace("A.consumer.sasl.oauthbearer.sub.claim.name = client_id\n", "")
    path.write_text(plain)
    assert choose(load_config(path).flow("A->B")).compiled
