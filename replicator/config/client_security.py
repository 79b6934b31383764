"""Java's multi-key security settings turned into librdkafka's.

A Java client reads its SASL login from one JAAS string (`sasl.jaas.config`) and its
certificates from key and trust stores that may be JKS, PKCS#12 or PEM; librdkafka
takes separate `sasl.*` settings and PEM (or PKCS#12 for the client's own key)
files. Each `translate_*` here pops the Java settings it reads from `settings` and
adds what librdkafka needs to `derived` (librdkafka key -> value and the Java key it
came from), so `replicator.config.clients.translate` can name both when they
contradict a setting given directly. Errors name the configuration key and the
conversion to make, and never quote a JAAS string (it holds secrets).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from replicator.errors import ConfigError

#: Maps a client setting to the configuration key the user wrote, for messages.
Namer = Callable[[str], str]
#: What a translation adds: librdkafka key -> (value, the Java key it came from).
Derived = dict[str, tuple[str, str]]

#: The Java settings the translations below read (and pop from the settings).
SECURITY_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
    }
)

_TYPE_BY_SUFFIX = {
    ".pem": "PEM",
    ".crt": "PEM",
    ".cer": "PEM",
    ".p12": "PKCS12",
    ".pfx": "PKCS12",
}

_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([=;])|([^\s=;"]+))', re.DOTALL)
_JAAS_FORM = 'a login module, e.g. PlainLoginModule required username="..." password="...";'


def translate_jaas(
    settings: dict[str, str],
    derived: Derived,
    name: Namer,
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


def translate_truststore(
    settings: dict[str, str],
    derived: Derived,
    name: Namer,
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


def translate_keystore(
    settings: dict[str, str],
    derived: Derived,
    name: Namer,
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
