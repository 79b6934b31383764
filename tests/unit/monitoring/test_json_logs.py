"""`--log-format json`: one JSON object a line with timestamp, level, logger and event,
for our loggers and every library's, a worker's name and a traceback included."""

from __future__ import annotations

import faulthandler
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from replicator import logs


@pytest.fixture
def restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put the root logger back as it was after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.delenv(logs.ENV, raising=False)
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def _bare_root() -> None:
    """The root logger without handlers, as in a fresh `replicator` process (pytest's
    capture handlers of the test's call are its own to remove; they are gone already)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def test_json_lines_carry_timestamp_level_logger_event(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _bare_root()
    assert logs.configure(logging.INFO, "json", worker="primary->dr#1") == "json"
    logging.getLogger("replicator.engine.task").info("flow %s: replicating %d topics", "a->b", 3)
    logging.getLogger("some.library").debug("below the level")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("replicator.cli").exception("it failed")
    first, second = _lines(capsys)
    assert first["event"] == "flow a->b: replicating 3 topics"
    assert (first["level"], first["logger"], first["worker"]) == (
        "info", "replicator.engine.task", "primary->dr#1",
    )  # fmt: skip
    assert datetime.fromisoformat(str(first["timestamp"]).replace("Z", "+00:00")).tzinfo
    assert second["level"] == "error"
    assert "ValueError: boom" in str(second["exception"])


def test_the_format_reaches_worker_processes_through_the_environment(
    restore_logging: None,
) -> None:
    _bare_root()
    logs.pass_to_workers(logs.configure(logging.INFO, "json"))
    child = subprocess.run(
        [sys.executable, "-c",
         "import logging; from replicator import logs; logs.configure(logging.INFO, worker='w#0');"
         "logging.getLogger('x').warning('hello')"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    line = json.loads(child.stderr)
    assert (line["event"], line["worker"], line["level"]) == ("hello", "w#0", "warning")


def test_a_root_logger_configured_elsewhere_is_left_alone(restore_logging: None) -> None:
    _bare_root()
    root = logging.getLogger()
    theirs = logging.NullHandler()
    root.addHandler(theirs)
    logs.configure(logging.INFO, "json")
    assert root.handlers == [theirs]


def test_text_stays_the_default(restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    _bare_root()
    assert logs.configure(logging.INFO) == "text"
    logging.getLogger("replicator.x").info("plain")
    assert capsys.readouterr().err.strip().endswith("INFO replicator.x: plain")


def test_an_unknown_format_names_the_variable(
    restore_logging: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(logs.ENV, "xml")
    _bare_root()
    with pytest.raises(ValueError, match=r"REPLICATOR_LOG_FORMAT='xml'.*text, json"):
        logs.configure(logging.INFO)


def test_crash_stacks_leave_a_stderr_captured_in_memory_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`replicator run` called in a process that captured stderr in memory (a test's
    runner, an application) runs on: faulthandler needs a file descriptor, and
    enabling it there raised io.UnsupportedOperation before the run began."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    logs.crash_stacks()  # no descriptor: left as it is, no error


def test_crash_stacks_go_to_a_stderr_with_a_descriptor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    was_enabled = faulthandler.is_enabled()
    with (tmp_path / "stderr").open("w") as stderr:
        monkeypatch.setattr(sys, "stderr", stderr)
        faulthandler.disable()
        try:
            logs.crash_stacks()
            assert faulthandler.is_enabled()
        finally:
            faulthandler.disable()
            if was_enabled:
                faulthandler.enable(file=sys.__stderr__)
