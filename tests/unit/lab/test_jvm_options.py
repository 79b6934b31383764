"""`$REPLICATOR_STACK_JVM_OPTIONS`: more options for the local stack's JVMs (the tests
start theirs with the C1 compiler only); none when unset, as for the benchmarks."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator_lab.broker import ClusterSpec, LocalBroker
from replicator_lab.jvm import JVM_OPTIONS_ENV, class_archive, extra_jvm_options


def test_unset_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JVM_OPTIONS_ENV, raising=False)
    assert extra_jvm_options() == []


def test_the_brokers_jvm_gets_the_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(JVM_OPTIONS_ENV, " -XX:TieredStopAtLevel=1  -Xss1m ")
    broker = LocalBroker(ClusterSpec("jvm", 20000), tmp_path, "256m", None)
    command = broker.broker_command()
    first = command.index("-XX:TieredStopAtLevel=1")
    assert command[first : first + 2] == ["-XX:TieredStopAtLevel=1", "-Xss1m"]
    assert command.index("-XX:MaxGCPauseMillis=20") < first < command.index("kafka.Kafka")


def test_the_class_archive_is_mapped_when_make_setup_wrote_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLICATOR_JVM_DIR", str(tmp_path / "jvm"))
    (tmp_path / "jvm" / "kafka").mkdir(parents=True)
    (tmp_path / "jvm" / "kafka" / "kafka.jar").touch()
    broker = LocalBroker(ClusterSpec("jvm", 20000), tmp_path, "256m", None)
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in broker.broker_command())
    archive = class_archive("kafka")
    archive.touch()
    assert f"-XX:SharedArchiveFile={archive}" in broker.broker_command()
