"""`$REPLICATOR_STACK_JVM_OPTIONS`: more options for the local stack's JVMs (the tests
start theirs with the C1 compiler only); none when unset, as for the benchmarks."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.localstack.broker import ClusterSpec, LocalBroker
from replicator.localstack.jvm import JVM_OPTIONS_ENV, extra_jvm_options


def test_unset_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JVM_OPTIONS_ENV, raising=False)
    assert extra_jvm_options() == []


def test_the_brokers_jvm_gets_the_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(JVM_OPTIONS_ENV, " -XX:TieredStopAtLevel=1  -Xss1m ")
    broker = LocalBroker(ClusterSpec("jvm", 20000), tmp_path, "256m", None)
    command = broker.broker_command()
    assert command[command.index("-XX:MaxGCPauseMillis=20") + 1 :][:2] == [
        "-XX:TieredStopAtLevel=1",
        "-Xss1m",
    ]
    assert command.index("-Xss1m") < command.index("kafka.Kafka")
