"""The DR-aware demo application of `make run`: include/demo's producer and consumer
as processes, following the state store through failovers and failbacks.

Their ledgers (under the data folder) prove at any time that no acknowledged record
was lost and none was processed twice: `replicator stack run` prints the check when
it stops, and a person can run `check_ledgers` on them after a failover.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from replicator.statestore import LedgerCheck, check_ledgers

DEMO_DIR = Path(__file__).resolve().parents[2] / "include" / "demo"
_STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class DemoApplication:
    """One application: its name in the state store (= consumer group) and topic."""

    name: str
    topic: str
    config: Path
    state_url: str = field(repr=False)  # may hold the store's password
    data_dir: Path
    rate: float = 20.0

    @property
    def produced_ledger(self) -> Path:
        return self.data_dir / f"{self.name}.produced.jsonl"

    @property
    def consumed_ledger(self) -> Path:
        return self.data_dir / f"{self.name}.consumed.jsonl"


class DemoApplicationProcesses:
    """Its producer and consumer, started and stopped together."""

    def __init__(self, app: DemoApplication) -> None:
        self.app = app
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        self.app.data_dir.mkdir(parents=True, exist_ok=True)
        rate = ("--rate", str(self.app.rate))
        self._start("producer", self.app.produced_ledger, rate)
        self._start("consumer", self.app.consumed_ledger, ())

    def exited(self) -> dict[str, int]:
        """The exit code of each role whose process has ended."""
        return {
            role: code
            for role, process in self._processes.items()
            if (code := process.poll()) is not None
        }

    def stop(self, drain_timeout_s: float = 60.0) -> LedgerCheck:
        """Stop the producer (it flushes), give the consumer `drain_timeout_s` to
        process everything acknowledged, stop it; then what the ledgers say."""
        self._terminate("producer")
        deadline = time.monotonic() + drain_timeout_s
        while "consumer" in self._processes and time.monotonic() < deadline:
            if not self._check().missing or self._processes["consumer"].poll() is not None:
                break
            time.sleep(0.5)
        self._terminate("consumer")
        return self._check()

    def _check(self) -> LedgerCheck:
        return check_ledgers([self.app.produced_ledger], [self.app.consumed_ledger])

    def _terminate(self, role: str) -> None:
        """SIGTERM (the producer flushes; the consumer has committed what it processed)."""
        process = self._processes.pop(role, None)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _start(self, role: str, ledger: Path, extra: tuple[str, ...]) -> None:
        app = self.app
        command = [
            sys.executable, str(DEMO_DIR / f"{role}.py"),
            "--config", str(app.config), "--app", app.name, "--topic", app.topic,
            "--state-url", app.state_url, "--ledger", str(ledger), *extra,
        ]  # fmt: skip
        with (app.data_dir / f"{app.name}.{role}.log").open("ab") as log:
            self._processes[role] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
