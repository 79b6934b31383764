"""The suite itself: both phases of `make test` collect every module.

pytest imports each folder's conftest.py under the one module name `conftest`, so a
test module that says `from conftest import X` gets whichever conftest was imported
first. In the solo phase that was tests/integration/deploy/conftest.py, and four modules
failed to import (CI of 2026-11-29). Shared values live in `helpers.session`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_no_module_imports_a_conftest() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(name.split(".")[-1] == "conftest" for name in names):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, f"import from helpers.session instead of conftest: {offenders}"


@pytest.mark.parametrize("marker", ["solo", "not solo"])
def test_each_phase_collects_without_errors(marker: str) -> None:
    """The collection `make test` does for each phase, in a fresh interpreter."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            marker,
        ],
        check=False,
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
