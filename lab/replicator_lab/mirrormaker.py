"""Apache Kafka's own MirrorMaker 2, run from the Maven jars, as a reference to compare with.

The project claims to be MM2-compatible where that helps users (checkpoint format,
topic names) and exact where MM2 is approximate (offset translation). Both claims are
checked against MM2 itself rather than against our reading of its sources. This
module runs it: `MirrorMaker` is MM2 in dedicated mode (what
`connect-mirror-maker.sh mm2.properties` runs), one JVM that is always stopped and
reaped, its log kept for inspection; `java_command` starts any Kafka JVM tool the
same way. What MM2 translates offsets to is asked in `mirrormaker_translation`.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from replicator_lab.errors import StackError
from replicator_lab.jvm import (
    archive_options,
    artifact_classpath,
    extra_jvm_options,
    find_java,
)

log = logging.getLogger(__name__)

MIRROR_MAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
#: The line MM2 logs once every herder (one per replication flow) has been started.
STARTED_LINE = "Kafka MirrorMaker started"
#: MM2's topics on clusters of one broker: every replication factor MM2 (and the
#: replicator, reading the same file) would ask of them, 1.
ONE_BROKER = {
    key: "1"
    for key in (
        "replication.factor",
        "heartbeats.topic.replication.factor",
        "checkpoints.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "config.storage.replication.factor",
        "status.storage.replication.factor",
    )
}
#: A JVM that ran its shutdown hooks after SIGTERM exits with 128 + 15.
JVM_SIGTERM_EXIT = 143
#: How much of a JVM's log an error message quotes.
LOG_TAIL_LINES = 25
#: How often a wait on MM2 looks again.
POLL_S = 0.5

LOG4J2_PROPERTIES = """\
# Written by lab/replicator_lab/mirrormaker.py: a Kafka JVM logs to one file only.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.tool.log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${sys:kafka.tool.log.level:-info}
rootLogger.appenderRef.file.ref = file
"""


def java_command(
    main_class: str,
    *,
    heap: str,
    log_file: Path,
    log_level: str = "info",
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """`java ... main_class` with the Kafka classpath, logging only to `log_file`.

    The log4j2 config is written next to the log file, so each process's folder
    holds everything needed to read what it did.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log4j = log_file.with_name("log4j2.properties")
    log4j.write_text(LOG4J2_PROPERTIES, encoding="utf-8")
    return [
        str(find_java()),
        f"-Xmx{heap}",
        *archive_options("kafka"),
        *extra_jvm_options(),
        *jvm_options,
        f"-Dlog4j2.configurationFile={log4j.resolve()}",
        f"-Dkafka.tool.log.file={log_file.resolve()}",
        f"-Dkafka.tool.log.level={log_level}",
        "-cp",
        artifact_classpath("kafka"),
        main_class,
    ]


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return f"(no {path})"
    tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail)


# -- the MM2 process ---------------------------------------------------------------------------


class MirrorMaker:
    """MM2 in dedicated mode, one JVM, started in its own session so that a Ctrl-C in
    the terminal reaches only the Python side, which then stops it like at the end.

    Use as a context manager: the JVM is stopped (SIGTERM, so MM2's shutdown hook
    stops the connectors; SIGKILL if it hangs) and reaped on any exit from the block.
    `workdir` keeps mm2.properties, the log (`mm2.log`) and the JVM's console output.
    """

    def __init__(
        self,
        properties: Mapping[str, str],
        workdir: Path,
        *,
        heap: str = "256m",
        jvm_options: Sequence[str] = (),
        stop_timeout_s: float = 60.0,
    ) -> None:
        # MM2's plugins all have ServiceLoader manifests (MM2 says so at start): found
        # without a reflective scan of every jar on the classpath, which took 7 to 14 s of
        # each start here (Kafka's default, hybrid_warn, does both). MM2 reads the
        # setting once at the top and once per target cluster's herder
        # (`<alias>.plugin.discovery`); a value given in `properties` wins.
        aliases = [a.strip() for a in properties.get("clusters", "").split(",") if a.strip()]
        keys = ["plugin.discovery", *(f"{alias}.plugin.discovery" for alias in aliases)]
        self.properties = {**dict.fromkeys(keys, "service_load"), **properties}
        self.workdir = workdir
        self.config_file = workdir / "mm2.properties"
        self.log_file = workdir / "mm2.log"
        self.console_file = workdir / "console.log"
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.stop_timeout_s = stop_timeout_s
        #: time.monotonic() just before the JVM was started.
        self.started_at = 0.0
        #: The JVM's exit code once stopped (JVM_SIGTERM_EXIT after a clean stop).
        self.exit_code: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._console: IO[bytes] | None = None

    def __enter__(self) -> MirrorMaker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Write mm2.properties and start the JVM; returns at once (see `wait_started`)."""
        if self._process is not None:
            raise StackError(f"MirrorMaker 2 in {self.workdir} was already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "".join(f"{key} = {value}\n" for key, value in self.properties.items()),
            encoding="utf-8",
        )
        command = [
            *java_command(
                MIRROR_MAKER_MAIN,
                heap=self.heap,
                log_file=self.log_file,
                jvm_options=self.jvm_options,
            ),
            str(self.config_file.resolve()),
        ]
        self._console = self.console_file.open("wb")
        self.started_at = time.monotonic()
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_started(self, timeout_s: float = 120.0) -> None:
        """Until MM2 has started its herders; StackError with the log tail if it exits
        or does not get there within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not any(STARTED_LINE in line for line in self.log_lines()):
            self.raise_if_exited()
            if time.monotonic() > deadline:
                raise StackError(
                    f"MirrorMaker 2 did not log {STARTED_LINE!r} within {timeout_s:.0f} s; "
                    f"see its log:\n{self.log_tail()}"
                )
            time.sleep(POLL_S)

    def stop(self) -> int | None:
        """Stop and reap the JVM; return its exit code (None if it never started)."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning(
                    "MirrorMaker 2 (pid %d) ignored SIGTERM for %.0f s; killing it",
                    process.pid,
                    self.stop_timeout_s,
                )
                process.kill()
                process.wait()
        if self._console is not None:
            self._console.close()
            self._console = None
        self.exit_code = process.returncode
        return self.exit_code

    def pids(self) -> list[int]:
        return [self._process.pid] if self._process is not None else []

    def failure(self) -> str | None:
        """Why the JVM is no longer running, or None while it is (or before start)."""
        code = self._process.poll() if self._process is not None else None
        return None if code is None else f"the JVM exited with code {code}; see {self.log_file}"

    def raise_if_exited(self) -> None:
        failure = self.failure()
        if failure is not None:
            raise StackError(f"MirrorMaker 2 stopped unexpectedly: {failure}\n{self.log_tail()}")

    def log_lines(self) -> list[str]:
        if not self.log_file.exists():
            return []
        return self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()

    def error_lines(self, expected: Sequence[str] = ()) -> list[str]:
        """ERROR lines of the log, less those containing one of `expected`."""
        return [
            line
            for line in self.log_lines()
            if "] ERROR " in line and not any(known in line for known in expected)
        ]

    def log_tail(self) -> str:
        """The end of MM2's log and console output, for error messages."""
        return f"{_tail(self.log_file)}\n{_tail(self.console_file)}"


def mirror_maker_pids(under: Path) -> list[int]:
    """MM2 JVMs whose mm2.properties lies under `under` and that still run (found by
    command line in /proc, so a JVM left by an interrupted earlier run is found too)."""
    marker = str(under.resolve())
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended while we looked
        text = [arg.decode(errors="replace") for arg in args]
        if MIRROR_MAKER_MAIN in text and any(marker in arg for arg in text):
            found.append(int(cmdline.parent.name))
    return found
