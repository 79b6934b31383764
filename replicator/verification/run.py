"""`replicator verify`: plan, run the Spark job, run the suites, store the summary.

The Spark job (`spark/verify.py`) and the suites (`expectations/report.py`) run
as subprocesses, so `replicator` itself never imports Spark or GX. Each run's
plan, tables, summary and Data Docs are under `<results>/run=<run id>/`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError
from replicator.statestore import StateStore
from replicator.verification.plan import plan_verification
from replicator.verification.submit import SparkSubmit

#: The repository: `spark/`, `expectations/` and the resolved JVM jars live here.
ROOT = Path(__file__).resolve().parents[2]
CONNECTOR_JARS = ROOT / ".cache" / "jvm" / "spark-kafka"
DEFAULT_RESULTS = ROOT / ".data" / "verification"
_OUTPUT_TAIL = 4000


@dataclass(frozen=True)
class Verification:
    """One run's outcome: where its files are and what the suites said."""

    run_id: str
    directory: Path
    success: bool
    summary: dict[str, Any]


def verify(
    flow: FlowConfig,
    store: StateStore,
    *,
    topics: list[str] | None = None,
    master: str = "local[2]",
    results: Path = DEFAULT_RESULTS,
    thresholds: Path | None = None,
) -> Verification:
    """Verify `flow`'s copy (all its topics, or `topics`) and record the run."""
    plan = plan_verification(flow, topics)
    if not plan.windows:
        raise ReplicatorError(
            f"flow {flow.name} replicates none of {topics or 'its topics'}; "
            "check --topics against `replicator topics`"
        )
    run_id = store.start_run("verification", flow.name, None, {"topics": topics, "master": master})
    directory = results / f"run={run_id}"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        plan.write(directory / "plan.json")
        began = time.monotonic()
        _spark(flow, directory, master)
        spark_s = time.monotonic() - began
        summary = _suites(directory, thresholds)
        summary["seconds"] = {
            "spark": round(spark_s, 1),
            "suites": round(time.monotonic() - began - spark_s, 1),
        }
    except ReplicatorError as exc:
        store.finish_run(run_id, "failed", None, None, {"error": str(exc)})
        raise
    in_flight = sum(w.in_flight for w in plan.windows)
    outcome = "succeeded" if summary["success"] else "failed"
    store.finish_run(run_id, outcome, in_flight, None, {**summary, "results": str(directory)})
    return Verification(run_id, directory, bool(summary["success"]), summary)


def _spark(flow: FlowConfig, directory: Path, master: str) -> None:
    submit = SparkSubmit(
        ROOT / "spark" / "verify.py",
        ["--plan", str(directory / "plan.json"), "--out", str(directory)],
        master=master,
        jars=sorted(CONNECTOR_JARS.glob("*.jar")),
        conf={"spark.ui.enabled": "false"},
        name=f"verify {flow.name}",
    )
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    _run(submit.command(spark_submit), "the Spark verification job", directory / "spark.log")


def _suites(directory: Path, thresholds: Path | None) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "expectations.report",
        "--results",
        str(directory),
        "--gx-root",
        str(directory / "gx"),
    ]
    if thresholds is not None:
        command += ["--thresholds", str(thresholds)]
    _run(command, "the verification suites", directory / "suites.log", failing_ok=True)
    summary_file = directory / "summary.json"
    if not summary_file.exists():
        raise ReplicatorError(f"the verification suites wrote no summary; see {directory}")
    return json.loads(summary_file.read_text())


def _run(command: list[str], what: str, log: Path, failing_ok: bool = False) -> None:
    """Run `command` from the repository root with the venv's Python for Spark's
    workers; its output goes to `log`. Exit code 1 is the suites' "failed"."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    with log.open("wb") as out:
        code = subprocess.run(
            command, check=False, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    if code == 0 or (failing_ok and code == 1):
        return
    tail = log.read_text(errors="replace")[-_OUTPUT_TAIL:]
    raise ReplicatorError(f"{what} exited with {code}; its log is {log}:\n{tail}")
