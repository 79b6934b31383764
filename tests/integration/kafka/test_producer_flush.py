"""`Producer.flush` lets a fatal error through as the KafkaException callers handle.

A batch the broker refuses trips the gapless guarantee of an idempotent producer: a
fatal error. Served inside confluent-kafka's own flush() together with other delivery
reports, it surfaced as a SystemError from the next report's callback, so a flow whose
target refused writes stopped on that SystemError during shutdown and was restarted,
instead of stopping once with the refusal named (CI, 2026-11-27,
test_access_denied.py::test_a_target_refusing_writes_stops_the_flow_once_with_one_line).
Here the refusal is a record larger than the topic's max.message.bytes.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from replicator.kafka.clients import Producer

from helpers.kafka import create_topic, unique_topic


def test_a_fatal_error_served_by_flush_raises_as_a_kafka_exception(primary: str) -> None:
    small, other = unique_topic("flush-small"), unique_topic("flush-other")
    create_topic(primary, small, config={"max.message.bytes": "2000"})
    create_topic(primary, other)
    producer = Producer(
        {
            "bootstrap.servers": primary,
            "enable.idempotence": True,
            "enable.gapless.guarantee": True,
            "linger.ms": 20,
        }
    )
    reports: list[str | None] = []

    def report(error: KafkaError | None, message: Message) -> None:
        """Reads the message, as the engine's run reports do: with the fatal error's
        exception still set, confluent-kafka's flush() failed right here."""
        reports.append(message.topic())

    for _ in range(50):
        producer.produce(other, b"x" * 100, on_delivery=report)
    producer.produce(small, b"y" * 10_000, on_delivery=report)
    for _ in range(50):
        producer.produce(other, b"x" * 100, on_delivery=report)

    with pytest.raises(KafkaException) as raised:
        producer.flush(30)

    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() == KafkaError._GAPLESS_GUARANTEE, error
    assert small in error.str(), error
    assert small in error.str(), error
    assert small not in reports, "the refused record was reported as written"
