"""`replicator run`'s memory allocator (replicator/allocator.py): jemalloc preloaded by
re-executing the process once, as `$REPLICATOR_ALLOCATOR` asks; `make setup` installs
libjemalloc2, so the real re-execution is checked here, not a fake of it."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replicator import allocator
from replicator.cli import main
from replicator.errors import ReplicatorError


def _python(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python *args` without our allocator settings but `env`'s."""
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.ENV)}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**environ, **env},
        timeout=60,
        check=False,
    )


#: Re-executes itself on the preferred allocator, then prints its pid and allocator.
_REEXECUTE = (
    "import os; from replicator import allocator; allocator.reexecute_with_preferred(); "
    "print(os.getpid(), allocator.in_use())"
)


def test_the_process_reexecutes_itself_once_on_jemalloc() -> None:
    """Same pid (the launchers' records stay true), same arguments, jemalloc mapped."""
    process = subprocess.Popen(
        [sys.executable, "-c", _REEXECUTE],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.ENV)},
    )
    out, _ = process.communicate(timeout=60)
    pid, used = out.strip().split(" ", 1)
    assert int(pid) == process.pid
    assert used.startswith("jemalloc (/") and "libjemalloc.so" in used, used


def test_system_allocator_on_request() -> None:
    result = _python("-c", _REEXECUTE, REPLICATOR_ALLOCATOR="system")
    assert result.stdout.split(" ", 1)[1].strip() == "the C library's malloc", result.stdout


def test_replicator_run_reexecutes_before_it_reads_its_configuration(tmp_path: Path) -> None:
    config = str(tmp_path / "absent")
    result = _python("-m", "replicator", "-v", "run", "--config", config)
    assert result.stderr.count("memory allocator: re-executing with LD_PRELOAD=") == 1
    assert result.returncode == 1 and "cannot read configuration file" in result.stderr


def test_a_wrong_choice_names_the_variable_and_the_choices(tmp_path: Path) -> None:
    config = str(tmp_path / "absent")
    result = _python("-m", "replicator", "run", "--config", config, REPLICATOR_ALLOCATOR="x")
    assert result.returncode == 1
    assert "REPLICATOR_ALLOCATOR='x' is not an allocator" in result.stderr
    assert "auto (" in result.stderr and "system (" in result.stderr


def test_environment_adds_jemalloc_to_the_users_preloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so.2")
    env = allocator.environment({"LD_PRELOAD": "/opt/libother.so", "PATH": "/bin"})
    assert env == {"LD_PRELOAD": "/opt/libother.so libjemalloc.so.2", "PATH": "/bin"}
    # Already preloaded (by us before the re-execution, or by the user): nothing to do,
    # so the re-executed process does not execute itself again.
    assert allocator.environment({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}) is None
    assert allocator.environment({allocator.ENV: "system"}) is None


def test_missing_jemalloc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert allocator.environment({}) is None  # auto: the C library's malloc, said in the log
    with pytest.raises(ReplicatorError, match="no libjemalloc: install libjemalloc2"):
        allocator.environment({allocator.ENV: "jemalloc"})


def test_in_process_calls_never_reexecute(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main([...])` from a test or a program is not this process's command line: the
    command runs on, whatever the allocator (the real re-execution would replace pytest)."""
    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail(f"re-executed: {a}"))
    assert main(["run", "--config", "/nonexistent/mm2.properties"]) == 1
