"""The error inside a Kafka exception, in one place.

confluent-kafka raises `KafkaException` with the `KafkaError` as its first argument
(a client call, an admin future's `result()`), and only the error has the code to
act on and librdkafka's one-line text. Every module that handles a Kafka exception
unwraps it here rather than reaching into `exc.args[0]`. This module imports
nothing of the replicator, so `reachability` and `clients` may use it too.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def kafka_error(exc: KafkaException) -> KafkaError:
    """The KafkaError `exc` carries; one built without one (a bare message, as a test
    or a wrapper may raise it) reads as an error of code `_FAIL` with its text."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))


def error_code(exc: BaseException) -> int | None:
    """The Kafka error code of `exc`; None when it is not a KafkaException (a future's
    `result(timeout)` that timed out raises a TimeoutError)."""
    return kafka_error(exc).code() if isinstance(exc, KafkaException) else None


def error_text(exc: BaseException) -> str:
    """The one-line cause of `exc`: librdkafka's text of its error for a
    KafkaException, else the exception's own text, or its kind when it has none (a
    future's `result(timeout)` raises a TimeoutError without text)."""
    if isinstance(exc, KafkaException):
        return kafka_error(exc).str()
    return str(exc) or f"{type(exc).__name__} (no answer in time)"


def is_fatal(error: KafkaError) -> bool:
    """True when `error` means its client failed for good: the fatal error itself, or
    the `_FATAL` a call on the failed client returns ("Unable to produce message:
    Local: Fatal error"), which confluent-kafka raises without the fatal flag."""
    return error.fatal() or error.code() == KafkaError._FATAL
