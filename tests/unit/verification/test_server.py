"""A verification server's command (Spark Connect, the Kafka connector, a large local
job's JVM) and a run on a server (the job as its client), without Spark."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.verification import run as run_module
from replicator.verification.driver_jvm import (
    DEFAULT_JAVA_OPTIONS,
    DRIVER_MEMORY,
    HOT_DRIVER_MEMORY_MIB,
    HOT_JIT_OPTIONS,
    available_memory_mib,
)
from replicator.verification.server import (
    CONSUMER_CACHE,
    REMOTE_ENV,
    SERVER_CLASS,
    TOKEN_ENV,
    check_reachable,
    client_environment,
    is_remote,
    server_address,
    server_command,
)


@pytest.fixture
def jvm_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A JVM folder with the connector's jars and no class archive."""
    folder = tmp_path / "jvm"
    (folder / "spark-kafka").mkdir(parents=True)
    for name in ("spark-sql-kafka.jar", "kafka-clients.jar"):
        (folder / "spark-kafka" / name).touch()
    monkeypatch.setenv("REPLICATOR_JVM_DIR", str(folder))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    return folder


def _conf(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, word in enumerate(command) if word == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_server_runs_spark_connect_with_the_connector_and_a_large_jobs_jvm(
    jvm_dir: Path,
) -> None:
    command = server_command(port=15010, cores=4)

    assert command[0] == str(Path(sys.executable).with_name("spark-submit"))
    assert command[command.index("--class") + 1] == SERVER_CLASS
    assert command[command.index("--master") + 1] == "local[4]"
    jars = command[command.index("--jars") + 1].split(",")
    assert jars == [
        str(jvm_dir / "spark-kafka" / n) for n in ("kafka-clients.jar", "spark-sql-kafka.jar")
    ]
    conf = _conf(command)
    assert conf["spark.connect.grpc.binding.port"] == "15010"
    # Whoever reaches it runs code as its user: loopback unless told otherwise.
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert _conf(server_command(15010, 4, "0.0.0.0"))["spark.connect.grpc.binding.address"] == (
        "0.0.0.0"
    )
    # The job sizes its work by it: a Connect client cannot ask Spark's context.
    assert conf["spark.default.parallelism"] == "4"
    assert conf["spark.kafka.consumer.cache.capacity"] == str(CONSUMER_CACHE)
    assert conf[DEFAULT_JAVA_OPTIONS] == HOT_JIT_OPTIONS
    heap = min(HOT_DRIVER_MEMORY_MIB, available_memory_mib() // 4)
    assert conf.get(DRIVER_MEMORY) == (f"{heap}m" if heap > 1024 else None)
    assert conf["spark.ui.enabled"] == "false"


@pytest.mark.parametrize(("port", "cores"), [(0, 2), (15002, 0)])
def test_a_server_without_a_port_or_cores_is_refused(port: int, cores: int) -> None:
    with pytest.raises(ValueError, match="needs a port and cores"):
        server_command(port, cores)


def test_sc_urls_name_a_server_and_masters_do_not() -> None:
    assert is_remote("sc://verifier:15002")
    assert not any(is_remote(m) for m in ("local[2]", "spark://m:7077", "yarn", "k8s://h"))


def test_a_run_on_a_server_runs_the_job_as_its_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[list[str], str, Path, dict]] = []

    def run(command: list[str], what: str, log: Path, failing_ok: bool = False, env=None) -> None:
        ran.append((command, what, log, env))

    monkeypatch.setattr(run_module, "run_process", run)
    monkeypatch.setattr(run_module, "check_reachable", lambda remote: None)
    secrets = {"REPLICATOR_CONN_PASSWORD": "pw"}  # the Airflow connection's, in Airflow

    run_module.run_on_server(tmp_path, "sc://verifier:15002/;token=s3cret", secrets)

    [(command, what, log, env)] = ran
    assert command == [
        sys.executable, "-m", "replicator_spark.verify",
        "--plan", str(tmp_path / "plan.json"), "--out", str(tmp_path),
    ]  # fmt: skip
    # The URL (and its token) reaches the job in its environment, never its command line.
    assert env == {**secrets, "SPARK_REMOTE": "sc://verifier:15002/;token=s3cret"}
    assert "s3cret" not in " ".join(command) + what
    assert "sc://verifier:15002" in what
    assert log == tmp_path / "spark.log"


def test_messages_name_a_server_without_its_parameters() -> None:
    assert server_address("sc://verifier:15010/;token=s3cret;user_id=x") == "sc://verifier:15010"
    assert server_address("sc://verifier") == "sc://verifier:15002"
    for bad in ("sc://:15002/;token=s3cret", "sc://verifier:port/;token=s3cret"):
        with pytest.raises(ReplicatorError, match="not a Spark Connect URL") as raised:
            server_address(bad)
        assert "s3cret" not in str(raised.value)


def test_an_absent_server_is_named_with_the_fix() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ReplicatorError) as raised:
        check_reachable(f"sc://127.0.0.1:{port}/;token=s3cret", timeout=2)
    message = str(raised.value)
    assert f"no verification server answers at sc://127.0.0.1:{port}" in message
    assert f"replicator verification-server --port {port}" in message
    assert "s3cret" not in message


@pytest.mark.parametrize(
    ("remote", "sent"),
    [
        ("sc://localhost:15002", "sc://localhost:15002/;token=t0k"),
        ("sc://localhost:15002/;user_id=ops", "sc://localhost:15002/;user_id=ops;token=t0k"),
        ("sc://localhost:15002/;token=mine", "sc://localhost:15002/;token=mine"),
    ],
)
def test_the_client_sends_the_token_of_its_environment_unless_the_url_has_one(
    remote: str, sent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "t0k")
    assert client_environment(remote) == {REMOTE_ENV: sent}
    monkeypatch.delenv(TOKEN_ENV)
    assert client_environment(remote) == {REMOTE_ENV: remote}


def test_the_job_started_ahead_takes_its_plan_on_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replicator verify` on a server starts the job's client before it plans (its
    PySpark import and session overlap the planning), then hands it the run."""
    client = (
        "import json, os, sys; print(sys.argv[1:], os.environ['SPARK_REMOTE']); "
        "asked = json.loads(sys.stdin.readline()); print(asked); sys.exit(asked[-1] != 'ok')"
    )
    monkeypatch.setattr(run_module, "client_command", lambda: [sys.executable, "-c", client])
    monkeypatch.setattr(run_module, "check_reachable", lambda remote: None)
    monkeypatch.setattr(run_module, "_job_arguments", lambda directory: ["--out", "ok"])

    with run_module.JobAhead("sc://verifier:15002/;token=s3cret") as job:
        job.run(tmp_path)
    assert (tmp_path / "spark.log").read_text().splitlines() == [
        "['--ahead'] sc://verifier:15002/;token=s3cret",
        "['--out', 'ok']",
    ]

    monkeypatch.setattr(run_module, "_job_arguments", lambda directory: ["--out", "bad"])
    with (
        pytest.raises(
            ReplicatorError, match=r"job \(on sc://verifier:15002\) exited with 1"
        ) as raised,
        run_module.JobAhead("sc://verifier:15002/;token=s3cret") as job,
    ):
        job.run(tmp_path)
    assert "s3cret" not in str(raised.value).split(":\n")[0]  # the message, before the log's tail


def test_a_run_on_an_absent_server_fails_before_it_is_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    planned = []
    monkeypatch.setattr(run_module, "start", lambda *a, **k: planned.append(a))
    with pytest.raises(ReplicatorError, match=f"--port {port}"):
        run_module.verify(None, None, master=f"sc://127.0.0.1:{port}")  # type: ignore[arg-type]
    assert planned == []
