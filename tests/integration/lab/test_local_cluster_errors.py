"""Every way `replicator stack up` can fail ends in one clear line, never a hang."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from replicator_lab import ClusterSpec, LocalStack, StackError
from replicator_lab.broker import LocalBroker, new_cluster_id

from helpers.kafka import free_port_pair


def _one_line(error: pytest.ExceptionInfo[StackError]) -> str:
    message = str(error.value)
    assert "\n" not in message, f"expected a one-line error, got:\n{message}"
    return message


@pytest.mark.integration
def test_starting_twice_is_refused(kafka_stack: LocalStack) -> None:
    with pytest.raises(StackError) as error:
        kafka_stack.up(timeout=10)
    assert "'primary' is already running" in _one_line(error)
    assert "replicator stack down" in str(error.value)
    assert {s.state for s in kafka_stack.status()} == {"running"}, "the running stack is untouched"


def test_port_taken_is_refused(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        stack = LocalStack([ClusterSpec("busy", port)], data_dir=tmp_path)

        with pytest.raises(StackError) as error:
            stack.up(timeout=10)

    assert f"port {port} needed by cluster 'busy' is already in use" in _one_line(error)
    assert stack.brokers["busy"].pids() == []


def test_missing_java_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    stack = LocalStack([ClusterSpec("nojava", free_port_pair())], data_dir=tmp_path)

    with pytest.raises(StackError) as error:
        stack.up(timeout=10)

    assert "java not found on PATH and JAVA_HOME is not set" in _one_line(error)


def test_broken_java_home_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    stack = LocalStack([ClusterSpec("badjdk", free_port_pair())], data_dir=tmp_path)

    with pytest.raises(StackError) as error:
        stack.up(timeout=10)

    assert "has no executable bin/java" in _one_line(error)


def test_missing_jars_point_to_make_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_JVM_DIR", str(tmp_path / "jvm"))
    stack = LocalStack([ClusterSpec("nojars", free_port_pair())], data_dir=tmp_path)

    with pytest.raises(StackError) as error:
        stack.up(timeout=10)

    assert "run `make setup`" in _one_line(error)


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ("garbage without equals signs\n\x00\x01", "no cluster.id"),
        ("version=1\ncluster.id=abc\nnode.id=7\n", "node.id is '7', expected 1"),
        (None, "it holds files but no meta.properties"),
    ],
)
def test_corrupt_data_dir_is_reported(tmp_path: Path, meta: str | None, problem: str) -> None:
    stack = LocalStack([ClusterSpec("corrupt", free_port_pair())], data_dir=tmp_path)
    storage = stack.brokers["corrupt"].storage_dir
    storage.mkdir(parents=True)
    if meta is None:
        (storage / "00000000000000000000.log").write_bytes(b"\x00" * 64)
    else:
        (storage / "meta.properties").write_text(meta)

    with pytest.raises(StackError) as error:
        stack.up(timeout=10)

    message = _one_line(error)
    assert f"data dir {storage} of cluster 'corrupt' is corrupt" in message
    assert problem in message
    assert "replicator stack down --wipe" in message


def test_broker_that_dies_at_start_fails_with_its_log(tmp_path: Path) -> None:
    # A heap far too small for Kafka: the JVM starts, then the broker dies.
    stack = LocalStack([ClusterSpec("tiny", free_port_pair())], data_dir=tmp_path, heap="8m")

    with pytest.raises(StackError) as error:
        stack.up(timeout=60)

    assert "cluster 'tiny' exited during start-up" in str(error.value)
    assert "console.log" in str(error.value), "the log tail is part of the error"
    assert stack.brokers["tiny"].pids() == []


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ([ClusterSpec("a", 20000), ClusterSpec("a", 20010)], "repeated: ['a']"),
        ([ClusterSpec("a", 20000), ClusterSpec("b", 20001)], "both need port 20001"),
        ([], "at least one cluster"),
    ],
)
def test_inconsistent_definitions_are_refused(
    tmp_path: Path, clusters: list[ClusterSpec], message: str
) -> None:
    with pytest.raises(StackError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LocalStack(clusters, data_dir=tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("primary", "is not NAME=PORT"),
        ("primary=abc", "is not NAME=PORT"),
        ("bad name=19092", "cluster name 'bad name' is not valid"),
        ("primary=80", "port 80 for cluster 'primary' is out of range"),
    ],
)
def test_cluster_option_is_validated(text: str, message: str) -> None:
    with pytest.raises(StackError, match=message):
        ClusterSpec.parse(text)


def test_cli_prints_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "replicator",
                "stack",
                "up",
                "--cluster",
                f"x={port}",
                "--data-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("replicator: error: port")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_cluster_ids_look_like_kafkas() -> None:
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and "=" not in i for i in ids)
    assert not any(i.startswith("-") for i in ids), "an id like '-abc' reads as an option"


@pytest.mark.integration
def test_down_leaves_no_jvm_and_restart_reuses_storage(tmp_path: Path) -> None:
    stack = LocalStack([ClusterSpec("lonely", free_port_pair())], data_dir=tmp_path)
    stack.up(timeout=90)
    broker: LocalBroker = stack.brokers["lonely"]
    assert len(broker.pids()) == 1
    cluster_id = broker.metadata().cluster_id

    result = subprocess.run(
        [sys.executable, "-m", "replicator", "stack", "down", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )

    assert result.stdout.strip() == "stopped: lonely"
    assert broker.pids() == []
    assert stack.up(timeout=90) == ["lonely"]
    assert broker.metadata().cluster_id == cluster_id, "storage is formatted only once"
    stack.down(wipe=True)
    assert broker.pids() == []
    assert not broker.root.exists()
