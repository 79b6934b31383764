"""The C part of the replication loop is there, built from today's source, and in
use, unless REPLICATOR_PURE_PYTHON=1 says it is meant to be absent: a compiler
warning (setup.py builds with -Werror) or a missing compiler must not leave the
engine quietly running at half speed with every other test passing on the Python
loop."""

from __future__ import annotations

import hashlib
import importlib
import os
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
