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


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m replicator run` on a configuration that does not exist: it chooses its
    allocator, says which, and stops at the configuration."""
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.ENV)}
    return subprocess.run(
        [sys.executable, "-m", "replicator", "run", "--config", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        env={**environ, **env},
        timeout=60,
        check=False,
    )


def test_run_reexecutes_itself_on_jemalloc(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert "memory allocator: jemalloc (/" in result.stderr, result.stderr
    assert "libjemalloc.so" in result.stderr
    assert result.returncode == 1 and "cannot read configuration file" in result.stderr


def test_system_allocator_on_request(tmp_path: Path) -> None:
    result = _run(tmp_path, REPLICATOR_ALLOCATOR="system")
    assert "memory allocator: the C library's malloc" in result.stderr, result.stderr


def test_a_wrong_choice_names_the_variable_and_the_choices(tmp_path: Path) -> None:
    result = _run(tmp_path, REPLICATOR_ALLOCATOR="tcmalloc")
    assert result.returncode == 1
    assert "REPLICATOR_ALLOCATOR='tcmalloc' is not an allocator" in result.stderr
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
