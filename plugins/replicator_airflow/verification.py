"""The tasks of the verification DAG around its SparkSubmitOperator: plan the run
(before), run the suites and record the verdict (after). Each calls one phase of
`replicator.verification.run`; what passes between them is plain data (XCom)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow.sdk import get_current_context
from airflow.sdk.exceptions import AirflowFailException

from replicator.config import load_config
from replicator.statestore import StateStore
from replicator.verification import (
    VerificationRun,
    finish,
    run_suites,
    spark_job,
    start,
)
from replicator_airflow.hooks import ReplicatorHook
from replicator_airflow.notifiers import notify_verification


def plan_run(params: dict[str, Any], conn_id: str = ReplicatorHook.default_conn_name) -> dict:
    """Start a run: its folder, plan and history entry; the Spark job's arguments."""
    settings = ReplicatorHook(conn_id).settings()
    flow = load_config(Path(settings.config)).flow(params["flow"])
    run = start(
        flow,
        StateStore(settings.state_url),
        topics=params.get("topics") or None,
        config_file=Path(settings.config),
    )
    job = spark_job(run)
    return {
        "run": {**asdict(run), "directory": str(run.directory)},
        "application": str(job.application),
        "arguments": job.arguments,
        "jars": ",".join(str(jar) for jar in job.jars),
        "py_files": ",".join(str(path) for path in job.py_files),
    }


def check(planned: dict, conn_id: str = ReplicatorHook.default_conn_name) -> dict:
    """Run the suites over the Spark job's tables and record the verdict; a wrong
    copy fails the task (and the DAG run) with the failing rows, and opens the
    flow's incident (told once; a later right copy resolves it: `notifiers`)."""
    run = VerificationRun(**{**planned["run"], "directory": Path(planned["run"]["directory"])})
    summary = run_suites(run.directory)
    store = StateStore(ReplicatorHook(conn_id).settings().state_url)
    verification = finish(store, run, summary)
    wrong = None
    if not verification.success:
        failed = {
            name: suite["failed"] for name, suite in summary["suites"].items() if suite["failed"]
        }
        wrong = AirflowFailException(
            f"the copy is wrong ({run.run_id}): {failed}; Data Docs: {summary['data_docs']}"
        )
    notify_verification(get_current_context(), store, run.flow, run.run_id, summary, failing=wrong)
    if wrong is not None:
        raise wrong
    return {"run_id": run.run_id, "data_docs": summary["data_docs"], "suites": summary["suites"]}
