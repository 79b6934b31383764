"""Keeping secrets out of messages, logs and reprs.

Configuration values such as SASL passwords, JAAS strings and private keys end
up in plain dicts that are handed to librdkafka. Anything that shows a
configuration to a person (an exception, a log line, a `repr`) goes through
this module, so that the rule "secrets are never shown" lives in one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from replicator.errors import ConfigError

#: What a secret is replaced with wherever a configuration is shown.
REDACTED = "******"

# Substrings that make a key sensitive wherever they occur in it, including
# after a cluster, flow or client prefix (`us-east.producer.sasl.jaas.config`).
_SENSITIVE_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "jaas",
    "token",
    "credential",
    "oauthbearer",
    # private keys, not "key.converter" or "key.serializer":
    "ssl.key",
    "ssl_key",
    "keystore.key",
    "private.key",
    "key.pem",
    "api.key",
    "apikey",
)


# `scheme://user:password@host...`: everything from the colon after the user to the last
# `@` is taken for the password, even one holding an unescaped `@` or `:` (a URL that does
# not parse may be anything: better hide a port too than show a password). The scheme is
# possessive (`?+`), so `scheme://user@host` is not read as user `scheme`.
_URL_PASSWORD = re.compile(r"^(?P<user>(?:[^:/?#@]*://)?+[^:/?#@]*):.*@")


def is_sensitive(key: str) -> bool:
    """Whether the value of `key` may hold a secret and must never be shown."""
    lowered = key.lower()
    return any(part in lowered for part in _SENSITIVE_PARTS)


def redact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `mapping` with the values of sensitive keys replaced by `REDACTED`.

    Nested mappings are redacted too, so a whole configuration tree can be
    logged or printed safely.
    """
    redacted: dict[str, Any] = {}
    for key, value in mapping.items():
        if is_sensitive(key):
            redacted[key] = REDACTED
        elif isinstance(value, Mapping):
            redacted[key] = redact(value)
        else:
            redacted[key] = value
    return redacted


def shown(key: str, value: str) -> str:
    """`value` quoted for a message about `key`, or `REDACTED` if `key` is sensitive."""
    return REDACTED if is_sensitive(key) else repr(value)


def invalid_value(key: str, value: str, expected: str) -> ConfigError:
    """The one-line error for a value of the wrong form, never showing a secret.

    `expected` says what the key takes, e.g. "true or false".
    """
    return ConfigError(f"{key}: expected {expected}, got {shown(key, value)}")


def redact_url(url: str) -> str:
    """`url` with the password of its `user:password@` part replaced by `REDACTED`,
    also when the URL cannot be parsed (then it is shown in the error)."""
    return _URL_PASSWORD.sub(rf"\g<user>:{REDACTED}@", url, count=1)
