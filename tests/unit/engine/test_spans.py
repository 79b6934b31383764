"""When the replication loop may use its C part: only on the confluent-kafka whose
object layout it declares, and only once a Message reads back through that layout as
it was made. Otherwise the loop runs in Python alone and says so once."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import Message

from replicator.engine import _native_spans, spans


@pytest.fixture(autouse=True)
def _fresh_check() -> Iterator[None]:
    spans._native.cache_clear()
    yield
    spans._native.cache_clear()


def test_the_layout_reads_back_a_message_as_it_was_made() -> None:
    message = Message(
        topic="orders", partition=11, offset=(1 << 62) + 5, timestamp=(1, 1_800_000_000_123),
        key=None, value=b"\x00" * 3, headers=[("h", b"1")],
    )  # fmt: skip
    assert _native_spans.message_fields(message) == (
        "orders", 11, (1 << 62) + 5, 1_800_000_000_123, None, b"\x00" * 3, True,
    )  # fmt: skip
    assert spans.span_producer("primary") is not None


def test_another_confluent_kafka_version_runs_the_loop_in_python(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(confluent_kafka, "__version__", "2.17.0")
    assert spans.span_producer("primary") is None
    assert "reads confluent-kafka 2.16.1's objects and 2.17.0 is installed" in caplog.text


def test_a_layout_that_reads_back_wrong_runs_the_loop_in_python(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(
        _native_spans, "message_fields", lambda _message: ("t", 0, 0, 0, b"k", b"v", False)
    )
    assert spans.span_producer("primary") is None
    assert "Message layout is not the one its C part declares" in caplog.text


def test_the_span_producer_refuses_what_is_not_a_producer() -> None:
    native = spans.span_producer("primary")
    assert native is not None
    with pytest.raises(TypeError, match="produce\\(Producer"):
        native.produce(object(), "primary.orders", [], 0, 100)  # type: ignore[arg-type]
