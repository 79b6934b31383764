"""Whether the replication loop produces plain records in C (`native_spans.c`), and
the object that does it for one flow.

The C module reads confluent-kafka's objects through their layout, which is not a
public API. So it is used only when three things hold, checked once per process:
it was built (`make setup`, or any install with a C compiler), the installed
confluent-kafka is the version whose layout it declares, and a Message built here
reads back through that layout exactly as it was made. Otherwise the loop runs in
Python alone, as correct and about half as fast at 100 B, and the reason is logged
once at start.
"""

from __future__ import annotations

import functools
import importlib
import logging
from types import ModuleType
from typing import Protocol

import confluent_kafka
from confluent_kafka import Message, Producer

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER

log = logging.getLogger(__name__)


class SpanProducer(Protocol):
    def produce(
        self, producer: Producer, remote: str, messages: list[Message], start: int, limit: int
    ) -> tuple[int, int, int, int, int, int]:
        """Produce `messages[start:index]`, each with the replica's two headers, and
        return (index, produced, bytes, first_offset, last_offset, refused); see
        native_spans.c."""


def span_producer(source_alias: str) -> SpanProducer | None:
    """The C span producer for replicas read from `source_alias`, or None when the
    loop must run in Python alone (see the module docstring)."""
    native = _native()
    if native is None:
        return None
    return native.SpanProducer(SOURCE_HEADER, source_alias.encode(), OFFSET_HEADER)


@functools.cache
def _native() -> ModuleType | None:
    try:
        native = importlib.import_module("replicator.engine._native_spans")
    except ImportError as exc:
        log.warning("the replication loop runs in Python alone: %s (run `make setup`)", exc)
        return None
    installed = confluent_kafka.__version__
    if installed != native.CONFLUENT_KAFKA_LAYOUT:
        log.warning(
            "the replication loop runs in Python alone: its C part reads confluent-kafka "
            "%s's objects and %s is installed",
            native.CONFLUENT_KAFKA_LAYOUT, installed,
        )  # fmt: skip
        return None
    sample = Message(
        topic="t", partition=7, offset=1 << 40, timestamp=(1, 1_700_000_000_000),
        key=b"k", value=b"v",
    )  # fmt: skip
    read = native.message_fields(sample)
    if read != ("t", 7, 1 << 40, 1_700_000_000_000, b"k", b"v", False):
        log.warning(
            "the replication loop runs in Python alone: confluent-kafka %s's Message "
            "layout is not the one its C part declares (read %r)",
            installed, read,
        )  # fmt: skip
        return None
    try:
        native.bind(confluent_kafka.cimpl.__file__)
    except OSError as exc:
        log.warning("the replication loop runs in Python alone: %s", exc)
        return None
    log.info("the replication loop produces plain records in C (%s)", native.__file__)
    return native
