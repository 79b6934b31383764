"""Whether the replication loop produces plain records in C (`native_spans.c`), and
the object that does it for one flow.

The C module reads confluent-kafka's objects through their layout, which is not a
public API. So it is used only when all of these hold, checked once per process: it
was built (`make setup`, or any install with a C compiler); the installed
confluent-kafka is the version whose layout it declares; the sizes of its Message and
Producer are the declared ones (`type(...).__basicsize__`); and records that a
consumer read from librdkafka's in-process mock cluster read back through the layout
as they were produced, and come out of the C part onto the mock cluster with what the
Python loop would give them. Each use then checks that the handle it reads from a
Producer is that Producer's (the C part raises `Unusable` otherwise, and the task
goes on in Python).

Otherwise the loop runs in Python alone, as correct and about half as fast at 100 B,
and says why once: a warning in the log, the metric
`replicator_c_span_producer_disabled{reason}` and the worker's line in `replicator
status` (`python_reason`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
import time
from types import ModuleType
from typing import Protocol

import confluent_kafka
from confluent_kafka import Message, TopicPartition

from replicator import metrics
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, TOPIC_HEADER, encode_offset
from replicator.kafka.clients import Consumer, Producer

log = logging.getLogger(__name__)


class _Refusal:
    """Why the loop runs in Python alone in this process (None: the C part is in
    use, or not checked yet). Set once, by the check or by a refused use."""

    reason: str | None = None
    lock = threading.Lock()


#: How the self-test's clients name librdkafka's mock cluster in their lines (they are
#: kept out of the reachability metrics: it is nobody's cluster).
_MOCK_CLUSTER = "librdkafka mock cluster (self-test)"
#: The topic the self-test writes on librdkafka's mock cluster (in this process only).
_CHECK_TOPIC = "replicator-span-check"


class SpanProducer(Protocol):
    def produce(
        self, producer: Producer, remote: str, messages: list[Message], start: int, limit: int
    ) -> tuple[int, int, int, int, int, int]:
        """Produce `messages[start:index]`, each with the replica's three headers, and
        return (index, produced, bytes, first_offset, last_offset, refused); see
        native_spans.c."""


def span_producer(source_alias: str) -> SpanProducer | None:
    """The C span producer for replicas read from `source_alias`, or None when the
    loop must run in Python alone (see the module docstring)."""
    native = _native()
    if native is None or _Refusal.reason is not None:
        return None
    return native.SpanProducer(SOURCE_HEADER, source_alias.encode(), OFFSET_HEADER, TOPIC_HEADER)


def unusable_error() -> type[Exception]:
    """The exception the C part raises when a Producer's handle is not its own: the
    caller goes on in Python (`refuse`). RuntimeError when the C part is absent."""
    native = _native()
    return native.Unusable if native is not None else RuntimeError


def python_reason() -> str | None:
    """Why the replication loop runs in Python alone in this process, or None while
    its C part is in use (for status)."""
    return _Refusal.reason


def refuse(code: str, reason: str) -> None:
    """From now on the loop runs in Python alone in this process, because of
    `reason`; said once, in the log, a metric (labelled `code`) and status."""
    with _Refusal.lock:
        if _Refusal.reason is not None:
            return
        _Refusal.reason = reason
    metrics.C_SPANS_DISABLED.labels(code).set(1)
    log.warning(
        "the replication loop runs in Python alone (about half as fast at 100 B): %s", reason
    )


@functools.cache
def _native() -> ModuleType | None:
    try:
        native = importlib.import_module("replicator.engine._native_spans")
    except ImportError as exc:
        refuse("not_built", f"its C part is not built: {exc} (run `make setup`)")
        return None
    installed = confluent_kafka.__version__
    if installed != native.CONFLUENT_KAFKA_LAYOUT:
        refuse(
            "version",
            f"its C part reads confluent-kafka {native.CONFLUENT_KAFKA_LAYOUT}'s objects and "
            f"{installed} is installed",
        )
        return None
    sizes = native.layout()
    if any(declared != actual for declared, actual in sizes.values()):
        refuse(
            "layout",
            f"confluent-kafka {installed}'s struct sizes are not the ones its C part "
            f"declares: {', '.join(f'{n} {a} bytes, declared {d}' for n, (d, a) in sizes.items())}",
        )
        return None
    try:
        native.bind(confluent_kafka.cimpl.__file__)
    except (OSError, native.Unusable) as exc:
        refuse("bind", str(exc))
        return None
    problem = _self_test(native)
    if problem is not None:
        refuse("self_test", f"its C part failed the check on consumed records: {problem}")
        return None
    log.info("the replication loop produces plain records in C (%s)", native.__file__)
    return native


#: What the self-test produces to partition 0 of `_CHECK_TOPIC`: (key, value,
#: headers). Plain records (null and empty key and value among them), then one with
#: headers of its own, which the span must stop before.
_CHECK_RECORDS: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None]] = [
    (b"k", b"v" * 100, None),
    (None, None, None),
    (b"", b"", None),
    (b"key", b"\x00\xff" * 600, None),
    (b"h", b"with headers", [("trace", b"1")]),
]
_CHECK_TIMESTAMP = 1_700_000_000_000


def _self_test(native: ModuleType) -> str | None:
    """Read records a consumer got from librdkafka's mock cluster through the layout,
    then produce them with the C part to the same cluster and read the replicas back.
    None when everything is as made, else what differed."""
    # log_level 4: not the mock cluster's notice that it replaced bootstrap.servers.
    producer = Producer(
        {"test.mock.num.brokers": 1, "enable.idempotence": True, "log_level": 4},
        cluster=_MOCK_CLUSTER,
        exported=False,
    )
    for offset, (key, value, headers) in enumerate(_CHECK_RECORDS):
        producer.produce(
            _CHECK_TOPIC, value, key, 0, timestamp=_CHECK_TIMESTAMP + offset, headers=headers
        )
    if producer.flush(10) != 0:
        return "the mock cluster did not take the records"
    consumed = _read(producer, _CHECK_TOPIC, len(_CHECK_RECORDS))
    if len(consumed) != len(_CHECK_RECORDS):
        return f"{len(consumed)} of {len(_CHECK_RECORDS)} records read back from the mock cluster"
    for offset, (key, value, headers) in enumerate(_CHECK_RECORDS):
        expected = (_CHECK_TOPIC, 0, offset, _CHECK_TIMESTAMP + offset, key, value, bool(headers))
        read = native.message_fields(consumed[offset])
        if read != expected:
            return f"record {offset} read {read!r}, expected {expected!r}"
    return _check_replicas(native, producer, consumed)


def _check_replicas(native: ModuleType, producer: Producer, consumed: list[Message]) -> str | None:
    """Produce the consumed records with the C part and read the replicas back: the
    plain ones but the last (the span leaves it to the caller), as the Python loop
    would make them. None when they are, else what differed."""
    span = native.SpanProducer(SOURCE_HEADER, b"check", OFFSET_HEADER, TOPIC_HEADER)
    remote = f"{_CHECK_TOPIC}.replica"
    plain = len(_CHECK_RECORDS) - 1
    result = span.produce(producer, remote, consumed, 0, 1 << 20)
    size = sum(len(k or b"") + len(v or b"") for k, v, _ in _CHECK_RECORDS[: plain - 1])
    expected_result = (plain - 1, plain - 1, size, 0, plain - 2, 0)
    if tuple(result) != expected_result:
        return f"produce() returned {result!r}, expected {expected_result!r}"
    if producer.flush(10) != 0:
        return "the mock cluster did not take the replicas"
    replicas = _read(producer, remote, plain - 1)
    if len(replicas) != plain - 1:
        return f"{len(replicas)} of {plain - 1} replicas read back from the mock cluster"
    for offset, replica in enumerate(replicas):
        key, value, _ = _CHECK_RECORDS[offset]
        made = (key, value, _CHECK_TIMESTAMP + offset, [
            (SOURCE_HEADER, b"check"), (OFFSET_HEADER, encode_offset(offset)),
            (TOPIC_HEADER, _CHECK_TOPIC.encode()),
        ])  # fmt: skip
        got = (replica.key(), replica.value(), replica.timestamp()[1], replica.headers())
        if got != made:
            return f"replica {offset} is {got!r}, expected {made!r}"
    return None


def _read(producer: Producer, topic: str, count: int) -> list[Message]:
    """The first `count` records of partition 0 of `topic` on `producer`'s mock cluster."""
    broker = next(iter(producer.list_topics(topic, timeout=10).brokers.values()))
    consumer = Consumer(
        {
            "bootstrap.servers": f"{broker.host}:{broker.port}",
            "group.id": "replicator-span-check",
            "enable.auto.commit": False,
        },
        cluster=_MOCK_CLUSTER,
        exported=False,
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Message] = []
        deadline = time.monotonic() + 30  # generous: a loaded host is slow, not wrong
        while len(messages) < count and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(count - len(messages), 0.2) if not m.error()]
        return messages[:count]
    finally:
        consumer.close()
