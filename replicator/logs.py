"""How the `replicator` command and its worker processes write their logs: text lines
for people (the default), or JSON lines for log pipelines (`--log-format json`, or
`REPLICATOR_LOG_FORMAT=json` in the environment).

A JSON line is one object with at least `timestamp` (ISO 8601, UTC), `level`,
`logger` and `event` (the message); a worker process adds `worker` (`flow#index`),
and an exception its traceback as `exception`. Rendering goes through structlog's
`ProcessorFormatter`, so every stdlib logger (ours, librdkafka's routed lines, the
libraries') comes out the same way. The messages are the ones the text format
prints, so what keeps secrets out of them (redacted configs, no credentials in
errors) holds for both.

The CLI puts the chosen format in the environment (`pass_to_workers`), so worker
processes started with `spawn` log the same way as their runner.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys

import structlog

#: The environment variable that carries the format to worker processes.
ENV = "REPLICATOR_LOG_FORMAT"
FORMATS = ("text", "json")


def chosen_format(given: str | None = None) -> str:
    """`given`, else `$REPLICATOR_LOG_FORMAT`, else text; ValueError naming the
    variable when it holds something else."""
    value = given or os.environ.get(ENV) or "text"
    if value not in FORMATS:
        source = "--log-format" if given else ENV
        raise ValueError(f"{source}={value!r}: the log format is one of {', '.join(FORMATS)}")
    return value


def configure(level: int, log_format: str | None = None, *, worker: str | None = None) -> str:
    """Send the root logger's records to stderr at `level` in `log_format` (see
    `chosen_format`); `worker` names a worker process in every line. Replaces the
    handler a previous call installed; like `logging.basicConfig`, leaves alone a root
    logger that something else configured (a host application, a test harness).
    Returns the format chosen."""
    chosen = chosen_format(log_format)
    root = logging.getLogger()
    if any(not isinstance(handler, _Handler) for handler in root.handlers):
        return chosen
    handler = _Handler()
    if chosen == "json":
        handler.setFormatter(_json_formatter(worker))
    else:
        prefix = f"[{worker}] " if worker else ""
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s")
        )
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return chosen


def pass_to_workers(log_format: str) -> None:
    """Worker processes (started with `spawn`) log in `log_format` too: it goes in the
    environment they inherit."""
    os.environ[ENV] = log_format


class _Handler(logging.StreamHandler):
    """The stderr handler `configure` installs (and replaces on a second call)."""


def _json_formatter(worker: str | None) -> logging.Formatter:
    def add_worker(
        _logger: object, _name: str, event: structlog.typing.EventDict
    ) -> structlog.typing.EventDict:
        event["worker"] = worker
        return event

    pre_chain: list[structlog.typing.Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]
    if worker:
        pre_chain.append(add_worker)
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # An exception's traceback as text under `exception` (one JSON string).
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
    )


def crash_stacks() -> None:
    """Have a crash inside C code (librdkafka, the compiled data plane) print every
    thread's Python stack on stderr before the process dies (`faulthandler`), when
    stderr is a file the process owns; a host that captured stderr (a test runner,
    an application embedding the engine) keeps its own arrangement."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # captured in memory: no descriptor
        return
    faulthandler.enable()
