"""The C part of the replication loop is there, built from today's source, and in
use, unless REPLICATOR_PURE_PYTHON=1 says it is meant to be absent: a compiler
warning (setup.py builds with -Werror) or a missing compiler must not leave the
engine quietly running at half speed with every other test passing on the Python
loop."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from replicator.engine import spans

_ENGINE = Path(spans.__file__).parent
_PURE = os.environ.get("REPLICATOR_PURE_PYTHON") == "1"


@pytest.mark.skipif(_PURE, reason="REPLICATOR_PURE_PYTHON=1: the C part is meant to be absent")
def test_the_c_part_is_built_from_this_source_and_used(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        native = importlib.import_module("replicator.engine._native_spans")
    except ImportError as exc:
        error_file = _ENGINE / "native_spans.build-error.txt"
        said = error_file.read_text() if error_file.exists() else "(no build error recorded)"
        pytest.fail(
            f"the C part of the replication loop is not built ({exc}); the build said: "
            f"{said}\nFix it and run `make setup`, or set REPLICATOR_PURE_PYTHON=1 if the "
            "engine is meant to run in Python alone"
        )
    source = hashlib.sha256((_ENGINE / "native_spans.c").read_bytes()).hexdigest()
    assert source == native.SOURCE_SHA256, (
        "the C part was built from another version of native_spans.c: run `make setup`"
    )
    spans._native.cache_clear()
    monkeypatch.setattr(spans._Refusal, "reason", None)  # checked afresh, as a new process
    try:
        assert spans.span_producer("primary") is not None, spans.python_reason()
    finally:
        spans._native.cache_clear()


@pytest.mark.skipif(_PURE, reason="REPLICATOR_PURE_PYTHON=1: the C part is meant to be absent")
def test_a_compiler_warning_fails_the_build_loudly_and_leaves_no_stale_module(
    tmp_path: Path,
) -> None:
    """setup.py compiles with -Werror: a warning (here an unused variable) fails the
    optional build. The install goes on, but says so in a banner, records it for the
    test above, and removes a module built from an earlier source."""
    root = _ENGINE.parents[1]
    engine = tmp_path / "replicator" / "engine"
    engine.mkdir(parents=True)
    shutil.copy(root / "setup.py", tmp_path)
    source = (_ENGINE / "native_spans.c").read_text() + "\nstatic int unused_here;\n"
    (engine / "native_spans.c").write_text(source)
    stale = engine / f"_native_spans{sysconfig.get_config_var('EXT_SUFFIX')}"
    stale.write_bytes(b"an earlier build")
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert "unused_here" in build.stderr, build.stderr  # the compiler's own words
    assert "replicator.engine._native_spans (replicator/engine/native_spans.c) was NOT built" in (
        build.stderr
    )
    assert "was NOT built" in (engine / "native_spans.build-error.txt").read_text()
    assert not stale.exists(), "a module built from an earlier source was left to be imported"
