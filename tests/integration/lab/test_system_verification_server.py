"""`make run`'s verification server (`EmbeddedSystem` with a verification port): it
listens on loopback once the system has started, runs a query for a client holding the
token made for this start (in a 0600 file) and refuses one without it, keeps the
suites warm on the next port (the same token), and stops with the system (the clusters
it did not start keep running)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.verification.host import host_command
from replicator.verification.server import REMOTE_ENV, ServerProcess, check_reachable
from replicator.verification.warm_suites import WarmSuitesClient, find_warm_suites
from replicator_lab import LocalStack
from replicator_lab.system import EmbeddedSystem, SystemOptions

from helpers.data_docs import write_tables
from helpers.kafka import free_port_pair
from helpers.replication import wait_until

pytestmark = pytest.mark.integration


def test_the_system_starts_and_stops_its_verification_server(
    kafka_stack: LocalStack, tmp_path: Path
) -> None:
    port = free_port_pair()
    options = SystemOptions(
        state_url=f"sqlite:///{tmp_path}/state.db",
        work_dir=tmp_path,
        demo_rate=None,
        verification_port=port,
    )
    system = EmbeddedSystem(kafka_stack, options)
    try:
        system.start()
        url = system.verification_url
        assert url == f"sc://localhost:{port}"
        check_reachable(url)
        token_file = system.verification_token_file
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text()
        assert _count(f"{url}/;token={token}") == "5"
        assert "UNAUTHENTICATED" in _count(url)
        run = tmp_path / "results" / "run=1"
        write_tables(run, "orders")
        (run / "plan.json").write_text("{}")
        warm = find_warm_suites(f"{url}/;token={token}")
        assert isinstance(warm, WarmSuitesClient)
        assert warm.run(run)["suites"]["parity"]["success"] is True
        with pytest.raises(ReplicatorError, match="token does not match"):
            WarmSuitesClient("localhost", port + 1, None).run(run)
        assert token not in system.verification.log.read_text()
        assert token not in (run / "suites.log").read_text()
        assert system.problems() == []
    finally:
        report = system.stop()
    assert report.stopped_clusters == []  # the session's clusters were running already
    with pytest.raises(ReplicatorError, match=f"--port {port}"):
        check_reachable(url, timeout=2)
    assert find_warm_suites(url) is None  # the suites stopped with it


def _count(remote: str) -> str:
    """What a Spark Connect client at `remote` counts of five rows, or its error."""
    query = "from pyspark.sql import SparkSession as S; print(S.builder.create().range(5).count())"
    done = subprocess.run(
        [sys.executable, "-c", query],
        check=False,
        env={**os.environ, REMOTE_ENV: remote},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.strip() if done.returncode == 0 else done.stderr


def test_the_servers_processes_end_with_it_however_it_ends(tmp_path: Path) -> None:
    """`replicator verification-server` killed with SIGKILL (no handler runs): its JVM
    (told by the kernel) and its warm suites (their input closed) end too, not keep the
    port and the cores."""
    port = free_port_pair()
    server = ServerProcess(host_command(port), tmp_path / "server.log").start()
    try:
        server.wait_started()
        jvm = _processes(f"spark.connect.grpc.binding.port={port}")
        suites = _children(server.pid, "replicator_expectations.launch")
        assert len(jvm) == 1 and len(suites) == 2, (jvm, suites)
        os.kill(server.pid, signal.SIGKILL)
        wait_until(
            lambda: not any(Path(f"/proc/{pid}").exists() for pid in jvm + suites),
            60,
            "the JVM and the warm suites ended",
        )
    finally:
        server.stop()


def _processes(marker: str) -> list[int]:
    """The processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _children(parent: int | None, marker: str) -> list[int]:
    """The processes of `parent` whose command line holds `marker`."""
    children = []
    for pid in _processes(marker):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            children.append(pid)
    return children
