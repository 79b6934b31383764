"""The local PostgreSQL server comes up on a loaded machine, says why when it does not,
and leaves nothing behind that breaks the next start (issue 26, point 9).

Each test runs a real server of its own (Debian's binaries) under the session's test
data folder, so the session's `postgres_server` is never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from replicator_lab.errors import StackError
from replicator_lab.postgres import SERVER_USER, LocalPostgres, PortTakenError

from helpers.kafka import free_port_pair
from helpers.postgres import start_test_server
from helpers.session import TEST_DATA_DIR

TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture
def root() -> Iterator[Path]:
    """A server folder of the test's own; its server is stopped and the folder deleted after."""
    folder = TEST_DATA_DIR.resolve() / f"pg-{uuid.uuid4().hex[:8]}"
    yield folder
    LocalPostgres(folder, 0).down(wipe=True)


def _answers(server: LocalPostgres) -> bool:
    engine = create_engine(server.url())
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


def _serves(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _as_server_user(*command: str) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *command] if os.geteuid() == 0 else list(command)


def test_a_port_taken_while_initdb_runs_is_named_and_another_port_is_used(root: Path) -> None:
    # initdb takes seconds (a minute on a loaded machine) between the choice of the
    # port and the server's bind; here another process takes the port meanwhile.
    chosen: list[int] = []
    squatter = socket.socket()

    def choose() -> int:
        chosen.append(free_port_pair())
        return chosen[-1]

    def take_the_first_port_once_initdb_runs() -> None:
        deadline = time.monotonic() + 60
        while not (root / "data").exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        squatter.bind(("127.0.0.1", chosen[0]))
        squatter.listen()

    taker = threading.Thread(target=take_the_first_port_once_initdb_runs)
    try:
        taker.start()
        server = start_test_server(root, timeout=120, choose_port=choose)
        taker.join()

        assert len(chosen) == 2, chosen
        assert server.port == chosen[1] != chosen[0]
        assert _answers(server)
    finally:
        taker.join()
        squatter.close()


def test_up_names_a_taken_port_so_that_a_caller_can_move(root: Path) -> None:
    server = LocalPostgres(root, free_port_pair(), durable=False)
    server.up(timeout=120)
    server.down()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", server.port))
        squatter.listen()

        with pytest.raises(PortTakenError, match=f"port {server.port} .* already in use"):
            server.up(timeout=120)

    assert not server.running()


def test_a_start_that_outlasts_its_timeout_leaves_no_server_and_shows_the_log(
    root: Path,
) -> None:
    # A start that takes longer than allowed (as on a starved machine): archive
    # recovery whose restore_command takes 6 s per file. pg_ctl stops waiting after
    # 2 s; the server would come up later, on a port its caller believes free.
    server = LocalPostgres(root, free_port_pair(), durable=False)
    server.up(timeout=120)
    server.down()
    with (server.data_dir / "postgresql.auto.conf").open("a") as conf:
        conf.write("restore_command = 'sleep 6; false'\n")
    subprocess.run(_as_server_user("touch", str(server.data_dir / "recovery.signal")), check=True)

    with pytest.raises(StackError) as error:
        server.up(timeout=2)

    message = str(error.value)
    assert "did not accept connections within 2s (still starting; stopped)" in message
    assert f"--- {server.log_file}" in message, "the server's log is in the error"
    assert "starting PostgreSQL" in message
    time.sleep(15)  # long enough for a server left behind to finish its recovery
    assert not server.running()
    assert not _serves(server.port), "no server was left behind on the port"


def test_a_stale_pid_file_is_not_taken_for_the_server_nor_its_process_stopped(
    root: Path,
) -> None:
    # A server killed with its machine (or SIGKILL) leaves postmaster.pid behind; its
    # number may since belong to another process of the server's user (here a sleep).
    server = LocalPostgres(root, free_port_pair(), durable=False)
    server.up(timeout=120)
    server.down()
    bystander = subprocess.Popen(_as_server_user("sleep", "120"))
    try:
        time.sleep(0.5)  # runuser has started the sleep
        pid = _child_or_self(bystander.pid)
        pid_file = server.data_dir / "postmaster.pid"
        pid_file.write_text(f"{pid}\n{server.data_dir}\n", encoding="utf-8")

        assert not server.running()
        server.up(timeout=120)  # the stale file does not stop the server starting
        assert _answers(server)
        server.down(wipe=True)

        assert bystander.poll() is None, "the process the stale file named was left alone"
    finally:
        bystander.kill()
        bystander.wait()


def _child_or_self(pid: int) -> int:
    """The process runuser started (runuser itself when not root)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = children.read_text().split() if children.exists() else []
    return int(found[0]) if found else pid


def test_a_session_killed_with_its_server_running_does_not_break_the_next_two(
    root: Path,
) -> None:
    # The first session is killed (SIGKILL: no teardown) with its server running and a
    # database in it; the next session starts on its own port, and so does a third.
    first = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; from pathlib import Path; from helpers.postgres import "
            "start_test_server; server = start_test_server(Path(sys.argv[1]), timeout=120); "
            "server.create_database('left_behind'); print(server.port, flush=True); "
            "os.kill(os.getpid(), 9)",
            str(root),
        ],
        cwd=TESTS.parent,
        env={**os.environ, "PYTHONPATH": str(TESTS)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert first.returncode == -9, first.stderr
    left_port = int(first.stdout.split()[0])
    assert _serves(left_port), "the killed session left its server running"

    second = start_test_server(root, timeout=120)
    assert _answers(second)
    assert not _serves(left_port), "the server left behind was stopped"
    second.down()  # an orderly end, then a third session
    third = start_test_server(root, timeout=120)
    assert _answers(third)


def test_a_server_that_went_away_is_named_with_its_log(root: Path) -> None:
    server = start_test_server(root, timeout=120)
    server.down()

    with pytest.raises(StackError) as error:
        server.create_database("after_stop")

    message = str(error.value)
    assert f"PostgreSQL under {root} (not running) does not accept connections" in message
    assert "database system is shut down" in message


def test_the_session_server_start_is_not_billed_to_the_test_that_asks_first(
    tmp_path: Path,
) -> None:
    # pytest-timeout's budget covers a test's fixtures: the test that first asks for the
    # session's server would pay for initdb and the start, minutes on a loaded machine,
    # and pytest replays that fixture's error to every later test. Scaled down here: a
    # 1 s budget, less than initdb takes even on an idle machine.
    tests = tmp_path / "test_first.py"
    tests.write_text(
        "def test_first(postgres_server):\n    assert postgres_server.running()\n\n"
        "def test_second(postgres_server):\n    assert postgres_server.running()\n",
        encoding="utf-8",
    )
    data_dir = TEST_DATA_DIR.resolve().parent / f"pg-session-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(TESTS), "REPLICATOR_TEST_DATA_DIR": str(data_dir)}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-p",
                "helpers.postgres",
                "--timeout=1",
                "--rootdir",
                str(tmp_path),
                "-q",
                str(tests),
            ],
            cwd=TESTS.parent,  # as make test runs: .data is below the working directory
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "2 passed" in done.stdout
    finally:
        for folder in data_dir.parent.glob(f"{data_dir.name}*"):
            LocalPostgres(folder / "postgres", 0).down(wipe=True)
            shutil.rmtree(folder, ignore_errors=True)
