"""`replicator_worker_running`, as the health checks read it (`replicator.probe`): 1 while
a worker's loop runs, 0 when it failed, no series when it was stopped on purpose (a flow
the state store stopped is not a failure, and must not make a container unhealthy)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from replicator.engine.reporting import TaskReporter


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
