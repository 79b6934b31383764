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
from replicator.__main__ import RUN, VALUED_ROOT_OPTIONS, command_name
from replicator.cli import command_line, main
from replicator.errors import ReplicatorError


def _bare_environment() -> dict[str, str]:
    """This process's environment without any allocator setting."""
    ours = ("LD_PRELOAD", "MALLOC_CONF", allocator.ENV)
    return {k: v for k, v in os.environ.items() if k not in ours}


def _python(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python *args` without our allocator settings but `env`'s."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**_bare_environment(), **env},
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
        env=_bare_environment(),
    )
    out, _ = process.communicate(timeout=60)
    pid, used = out.strip().split(" ", 1)
    assert int(pid) == process.pid
    assert used.startswith("jemalloc (/") and "libjemalloc.so" in used, used


#: Re-executes itself, then prints jemalloc's oversize_threshold as its public `mallctl`
#: reads it (the return code first: 0 when jemalloc answered).
_TUNING = (
    "import ctypes; from replicator import allocator; allocator.reexecute_with_preferred(); "
    "value, size = ctypes.c_size_t(), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t)); "
    "code = ctypes.CDLL(None).mallctl(b'opt.oversize_threshold', ctypes.byref(value), "
    "ctypes.byref(size), None, 0); print(code, value.value)"
)


def test_jemalloc_runs_with_the_products_tuning_unless_the_user_set_one() -> None:
    """`TUNING` reaches jemalloc itself (oversize_threshold 0: large buffers from the
    ordinary arenas); a `MALLOC_CONF` of the user's is used as given."""
    assert allocator.TUNING == "oversize_threshold:0"
    assert _python("-c", _TUNING).stdout.split() == ["0", "0"]
    users = _python("-c", _TUNING, MALLOC_CONF="oversize_threshold:16777216")
    assert users.stdout.split() == ["0", str(16 * 2**20)], users.stderr


def test_system_allocator_on_request() -> None:
    result = _python("-c", _REEXECUTE, REPLICATOR_ALLOCATOR="system")
    assert result.stdout.split(" ", 1)[1].strip() == "the C library's malloc", result.stdout


def _imports(stderr: str, module: str) -> int:
    """How many times `python -X importtime`'s report (`stderr`) imported `module`."""
    return sum(1 for line in stderr.splitlines() if line.endswith(f"| {module}"))


@pytest.mark.parametrize("command", [["run"], ["-v", "--log-format", "json", "run"]])
def test_replicator_run_reexecutes_before_it_imports_the_command_line(
    tmp_path: Path, command: list[str]
) -> None:
    """Once, and before the command line's modules are imported (`replicator.__main__`):
    re-executed from inside the command, the process imported them twice."""
    config = str(tmp_path / "absent")
    result = _python("-X", "importtime", "-m", "replicator", *command, "--config", config)
    assert _imports(result.stderr, "replicator.allocator") == 2  # before and after
    assert _imports(result.stderr, "replicator.cli") == 1
    assert result.returncode == 1 and "cannot read configuration file" in result.stderr


def test_other_commands_never_reexecute(tmp_path: Path) -> None:
    result = _python("-X", "importtime", "-m", "replicator", "flows", "list", "--config", "x")
    assert _imports(result.stderr, "replicator.allocator") == 1


def test_command_name_skips_the_root_options_and_their_values() -> None:
    assert command_name(["run", "--config", "x"]) == "run"
    assert command_name(["-v", "--log-format", "run", "status"]) == "status"
    assert command_name(["--log-format=json", "run"]) == "run"
    assert command_name(["--version"]) is None


def test_every_root_option_that_takes_a_value_is_known_to_the_entry_point() -> None:
    """`command_name` skips the values of exactly the root options that take one."""
    root = command_line()
    valued = {
        name
        for param in root.params
        if param.param_type_name == "option" and not getattr(param, "is_flag", False)
        for name in param.opts
        if name.startswith("--")
    }
    assert valued == set(VALUED_ROOT_OPTIONS)
    assert RUN in root.commands


def test_a_wrong_choice_names_the_variable_and_the_choices(tmp_path: Path) -> None:
    config = str(tmp_path / "absent")
    result = _python("-m", "replicator", "run", "--config", config, REPLICATOR_ALLOCATOR="x")
    assert result.returncode == 1
    assert "REPLICATOR_ALLOCATOR='x' is not an allocator" in result.stderr
    assert "auto (" in result.stderr and "system (" in result.stderr


def test_environment_adds_jemalloc_to_the_users_preloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so.2")
    env = allocator.environment({"LD_PRELOAD": "/opt/libother.so", "PATH": "/bin"})
    assert env == {
        "LD_PRELOAD": "/opt/libother.so libjemalloc.so.2",
        "MALLOC_CONF": allocator.TUNING,
        "PATH": "/bin",
    }
    env = allocator.environment({"MALLOC_CONF": "narenas:2"})
    assert env is not None and env["MALLOC_CONF"] == "narenas:2"
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
