"""`make run` waits for Airflow as long as its start makes progress (issue 30): on a
busy machine Airflow took longer than any fixed timeout, though it was getting there.
The wait gives up only after `timeout` seconds in which nothing changed (what is still
missing, the size of standalone.log), says where it stood, and prints a progress line
now and then. Airflow itself is not started: a live process stands in for it and the
readiness answers are scripted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator_lab import airflow as airflow_module
from replicator_lab.airflow import AirflowStandalone
from replicator_lab.errors import StackError


@pytest.fixture
def standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AirflowStandalone]:
    monkeypatch.setattr(airflow_module, "POLL_S", 0.05)
    monkeypatch.setattr(airflow_module, "_PROGRESS_EVERY_S", 0.2)
    tmp_path.joinpath("standalone.log").write_text("starting\n")
    airflow = AirflowStandalone(tmp_path, 18999, dag_ids=[], password="not-used")
    process = subprocess.Popen(["sleep", "60"])
    airflow._process = process  # the stand-in for `airflow standalone`
    yield airflow
    process.kill()
    process.wait()


def _answers(
    monkeypatch: pytest.MonkeyPatch, airflow: AirflowStandalone, answers: list[str]
) -> None:
    """`_readiness` answers these in turn, then keeps answering the last one."""
    remaining = list(answers)

    def readiness(*_: object) -> str:
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    monkeypatch.setattr(airflow, "_readiness", readiness)


def test_a_start_that_progresses_is_waited_for_past_the_timeout(
    standalone: AirflowStandalone, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [f"not healthy yet: scheduler (step {n})" for n in range(40)]
    _answers(monkeypatch, standalone, [*steps, ""])
    said: list[str] = []
    # 40 steps of 0.05 s each: longer than the 1 s timeout, each one a change.
    standalone._wait_ready(1.0, said.append)
    assert said and all(line.startswith("Airflow starting (") for line in said), said


def test_a_growing_log_counts_as_progress(
    standalone: AirflowStandalone, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = iter(range(1000))

    def readiness(*_: object) -> str:
        call = next(calls)
        with standalone.log_file.open("a") as log:
            log.write("migrating the metadata DB\n")
        return "" if call == 40 else "health answered HTTP 503"

    monkeypatch.setattr(standalone, "_readiness", readiness)
    standalone._wait_ready(1.0, lambda line: None)


def test_a_stuck_start_gives_up_and_says_where(
    standalone: AirflowStandalone, monkeypatch: pytest.MonkeyPatch
) -> None:
    _answers(monkeypatch, standalone, ["DAGs not registered yet: failover"])
    with pytest.raises(StackError) as stuck:
        standalone._wait_ready(1.0, lambda line: None)
    message = str(stuck.value)
    assert "made no progress for 1s" in message
    assert "still DAGs not registered yet: failover" in message
    assert "standalone.log did not grow" in message
    assert "starting" in message  # the log's tail
