"""The suite's last-resort watchdog (helpers/watchdog.py) ends a test that hangs with
the GIL held, where pytest-timeout's thread cannot run, and leaves its stacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

HANGING_TEST = """
import ctypes

import pytest


@pytest.mark.timeout(1)
def test_holds_the_gil_in_a_c_call():
    # PyDLL keeps the GIL through the call: pytest-timeout's thread never runs.
    ctypes.PyDLL("libc.so.6").sleep(600)
"""


def test_a_hang_with_the_gil_held_is_ended_and_its_stack_kept(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(HANGING_TEST)
    hangs = tmp_path / "hangs"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "helpers.watchdog", "--timeout-method=thread", "test_hang.py"],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS), "REPLICATOR_TEST_HANGS": str(hangs),
             "REPLICATOR_TEST_WATCHDOG_GRACE_S": "2"},
        capture_output=True,
        text=True,
        timeout=300,  # the test's sleep is 600 s: ended by the watchdog, or not at all
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    stacks = "".join(path.read_text() for path in hangs.glob("*.txt"))
    assert "test_hang.py::test_holds_the_gil_in_a_c_call: no end 3 s after its start" in stacks
    assert 'File "' in stacks and 'test_hang.py", line 10 in test_holds_the_gil_in_a_c_call' in (
        stacks
    ), stacks
