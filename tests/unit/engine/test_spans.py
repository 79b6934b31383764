"""When the replication loop may use its C part, and that misusing it raises a Python
exception, never crashes the process.

The C part reads confluent-kafka's objects through their layout: it is used only on
the confluent-kafka whose layout it declares, with the struct sizes it declares, once
records a consumer read from librdkafka's mock cluster read back through that layout
as they were made and come out of it as the Python loop makes them. Otherwise the loop
runs in Python alone and says why once: log, metric, and the worker's status.

The misuse cases run in a fresh interpreter each: a segfault there is exit -11, a
failure here, not the end of the test run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import REGISTRY

from replicator.engine import spans
from replicator.engine.reporting import TaskReporter
from replicator.engine.status import STATUS_TOPIC

if os.environ.get("REPLICATOR_PURE_PYTHON") == "1":
    _native_spans = pytest.importorskip("replicator.engine._native_spans")
else:
    from replicator.engine import _native_spans


@pytest.fixture(autouse=True)
def _fresh_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test checks afresh, as a new process would."""
    spans._native.cache_clear()
    monkeypatch.setattr(spans._Refusal, "reason", None)
    yield
    spans._native.cache_clear()


def _disabled(reason: str) -> float | None:
    return REGISTRY.get_sample_value("replicator_c_span_producer_disabled", {"reason": reason})


def test_the_guard_checks_consumed_records_and_uses_the_c_part() -> None:
    assert spans.span_producer("primary") is not None
    assert spans.python_reason() is None
    sizes = _native_spans.layout()
    assert sizes == {
        "Message": (confluent_kafka.Message.__basicsize__,) * 2,
        "Producer": (confluent_kafka.Producer.__basicsize__,) * 2,
    }


def test_the_self_tests_mock_cluster_is_not_in_the_reachability_metrics() -> None:
    """The self-test's clients of librdkafka's mock cluster are nobody's cluster: a
    dashboard's "Clusters reachable" showed them as two more clusters (an unnamed one
    and the mock broker's random 127.0.0.1 port). Only the series the self-test adds
    count: other tests of the same process leave clusters of their own in the registry."""
    before = _reachability_series()
    assert spans.span_producer("primary") is not None
    assert _reachability_series() - before == set()


def _reachability_series() -> set[tuple[tuple[str, str], ...]]:
    return {
        tuple(sorted(sample.labels.items()))
        for metric in REGISTRY.collect()
        if metric.name == "replicator_cluster_reachable"
        for sample in metric.samples
    }


def test_another_confluent_kafka_version_runs_the_loop_in_python_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(confluent_kafka, "__version__", "2.17.0")
    assert spans.span_producer("primary") is None
    assert "reads confluent-kafka 2.16.1's objects and 2.17.0 is installed" in caplog.text
    assert _disabled("version") == 1
    # Once: asking again says nothing more.
    caplog.clear()
    assert spans.span_producer("primary") is None
    assert caplog.text == ""


def test_struct_sizes_other_than_declared_run_the_loop_in_python(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(
        _native_spans, "layout", lambda: {"Message": (120, 128), "Producer": (176, 176)}
    )
    assert spans.span_producer("primary") is None
    assert "Message 128 bytes, declared 120" in caplog.text
    assert _disabled("layout") == 1


def test_a_layout_that_reads_consumed_records_wrong_runs_the_loop_in_python(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(
        _native_spans, "message_fields", lambda _message: ("t", 0, 0, 0, b"k", b"v", False)
    )
    assert spans.span_producer("primary") is None
    assert "failed the check on consumed records: record 0 read" in caplog.text
    assert _disabled("self_test") == 1


def test_the_reason_is_in_the_workers_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent_kafka, "__version__", "2.17.0")
    assert spans.span_producer("primary") is None
    producer = Producer({"test.mock.num.brokers": 1, "log_level": 4})
    reporter = TaskReporter("primary->dr", "worker-1", 0)
    reporter.write_with(producer)
    reporter.worker("running", [], ["orders"], None)
    assert producer.flush(10) == 0
    metadata = producer.list_topics(STATUS_TOPIC, timeout=10)
    broker = next(iter(metadata.brokers.values()))
    consumer = Consumer({"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "s"})
    try:
        partitions = metadata.topics[STATUS_TOPIC].partitions
        consumer.assign([TopicPartition(STATUS_TOPIC, p, 0) for p in partitions])
        records = [m for m in consumer.consume(1, 10) if m.error() is None]
    finally:
        consumer.close()
    assert records, "no status record read back"
    status = json.loads(records[0].value())
    assert "2.17.0 is installed" in status["python_reason"]


def _run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter: a crash there shows as its exit code."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


_SETUP = """
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    from replicator.engine import _native_spans as native

    producer = Producer({"test.mock.num.brokers": 1, "log_level": 4})
    producer.produce("orders", b"v", b"k", 0)
    assert producer.flush(10) == 0
    broker = next(iter(producer.list_topics("orders", timeout=10).brokers.values()))
    consumer = Consumer({"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "g"})
    consumer.assign([TopicPartition("orders", 0, 0)])
    messages = consumer.consume(1, 10)
    assert len(messages) == 1 and messages[0].error() is None, messages

    def refused(call, exception):
        try:
            call()
        except exception as exc:
            print(f"refused: {type(exc).__name__}: {exc}")
        else:
            raise SystemExit("not refused")
"""


@pytest.mark.parametrize(
    ("case", "said"),
    [
        (
            'refused(lambda: native.SpanProducer("s", b"a", "o", "t")'
            '.produce(producer, "r", messages, 0, 100), RuntimeError)',
            "RuntimeError: produce() before bind()",
        ),
        (
            "native.bind(confluent_kafka.cimpl.__file__)\n"
            "refused(lambda: native.SpanProducer.__new__(native.SpanProducer)"
            '.produce(producer, "r", messages, 0, 100), RuntimeError)',
            "RuntimeError: this SpanProducer was not initialised",
        ),
        (
            "native.bind(confluent_kafka.cimpl.__file__)\n"
            'refused(lambda: native.SpanProducer("s", b"a", "o", "t")'
            '.produce(Producer.__new__(Producer), "r", messages, 0, 100), RuntimeError)',
            "RuntimeError: Producer has been closed",
        ),
        (
            "native.bind(confluent_kafka.cimpl.__file__)\n"
            'refused(lambda: native.SpanProducer("s", b"a", "o", "t")'
            '.produce(consumer, "r", messages, 0, 100), TypeError)',
            "TypeError: produce(Producer",
        ),
        (
            "native.bind(confluent_kafka.cimpl.__file__)\n"
            'refused(lambda: native.SpanProducer("s", b"a", "o", "t")'
            '.produce(producer, "r", messages, 5, 100), IndexError)',
            "IndexError: start 5 of 1 messages",
        ),
        (
            "native.bind(confluent_kafka.cimpl.__file__)\n"
            "refused(lambda: native.message_fields(object()), TypeError)",
            "TypeError: expected a Message",
        ),
    ],
    ids=["before-bind", "uninitialised", "unopened-producer", "consumer", "start", "not-message"],
)
def test_misuse_raises_a_python_exception_and_never_crashes(case: str, said: str) -> None:
    result = _run_fresh(textwrap.dedent(_SETUP) + "\n" + case + "\n")
    assert result.returncode == 0, (
        f"exit {result.returncode} (-11 is a segfault)\n{result.stdout}\n{result.stderr}"
    )
    assert f"refused: {said}" in result.stdout, result.stdout + result.stderr
