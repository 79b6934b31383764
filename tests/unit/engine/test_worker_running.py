"""`replicator_worker_running`, as the health checks read it (`replicator.probe`): 1 while
a worker's loop runs, 0 when it failed, no series when it was stopped on purpose (a flow
the state store stopped is not a failure, and must not make a container unhealthy); and
a worker's counters when it loses a partition."""

from __future__ import annotations

from prometheus_client import REGISTRY

from replicator.engine.partition import PartitionTracker
from replicator.engine.reporting import TaskReporter
from replicator.engine.size_limits import SizeHold


def _value(flow: str, worker: str) -> float | None:
    return REGISTRY.get_sample_value("replicator_worker_running", {"flow": flow, "worker": worker})


def test_running_failed_and_stopped_on_purpose() -> None:
    reporter = TaskReporter("unit-a->b", "w-running", 0)

    reporter.running(True)
    assert _value("unit-a->b", "w-running") == 1

    reporter.running(False)  # the loop failed: the runner restarts it with backoff
    assert _value("unit-a->b", "w-running") == 0

    reporter.running(True)
    reporter.running(False, stopped_on_purpose=True)
    assert _value("unit-a->b", "w-running") is None
    reporter.running(False, stopped_on_purpose=True)  # twice: no error
    assert _value("unit-a->b", "w-running") is None


class _Producer:
    """Takes status records (the reporter's StatusWriter writes them)."""

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        pass

    def poll(self, timeout: float) -> int:
        return 0


def test_a_partition_revoked_before_the_per_second_publish_keeps_its_count() -> None:
    """The CI case of test_metrics_tree: the first worker of a group copies a partition
    and loses it to the second within a second of its assignment; the records it
    replicated are counted when it is revoked, not dropped with its tracker."""
    reporter = TaskReporter("unit-c->d", "w-revoked", 0)
    reporter.write_with(_Producer())  # type: ignore[arg-type]
    tracker = PartitionTracker(
        "unit-c->d", "revoked-topic", 0, "c.revoked-topic", SizeHold(1 << 20)
    )
    tracker.counters.replicated, tracker.counters.replicated_bytes = 100, 1_000

    reporter.revoked(tracker)

    labels = {"flow": "unit-c->d", "topic": "revoked-topic", "partition": ""}
    assert REGISTRY.get_sample_value("replicator_replicated_records_total", labels) == 100
    assert REGISTRY.get_sample_value("replicator_replicated_bytes_total", labels) == 1_000
