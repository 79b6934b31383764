"""The tasks of the verification DAG: plan the run (before), submit the Spark job
(`VerificationSubmitOperator`), run the suites and record the verdict (after). Each
calls one phase of `replicator.verification.run`; what passes between them is plain
data (XCom)."""

from __future__ import annotations

from contextlib import chdir
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context, get_current_context
from airflow.sdk.exceptions import AirflowFailException

from replicator.errors import ReplicatorError
from replicator.statestore import StateStore
from replicator.verification import (
    SAMPLE_PERIOD,
    VerificationRun,
    connection_environment,
    finish,
    is_remote,
    records_to_read,
    run_on_server,
    run_suites,
    shipped_links,
    spark_job,
    start,
)
from replicator_airflow.hooks import ReplicatorHook
from replicator_airflow.notifiers import notify_verification

#: The Spark connection of the verification: the plan reads its master, the Spark
#: task submits to it (`local[2]` by default, `spark://...` in docker-compose).
SPARK_CONN_ID = "spark_local"


def spark_master(conn_id: str = SPARK_CONN_ID) -> str:
    """The master SparkSubmitOperator passes to `--master` for the Spark connection
    `conn_id` (`yarn` when there is none), read from the provider's own hook so that
    the plan and the submit cannot disagree; the hook has no public accessor for it."""
    return str(SparkSubmitHook(conn_id=conn_id)._connection["master"])


def plan_run(
    params: dict[str, Any],
    conn_id: str = ReplicatorHook.default_conn_name,
    spark_conn_id: str = SPARK_CONN_ID,
) -> dict:
    """Start a run: its folder, plan and history entry; the Spark job's arguments.
    Unless the Spark connection's master is local, the configuration's truststores
    and keystores are shipped with the job (`files`): the executors may run where
    the configuration's paths do not exist."""
    settings = ReplicatorHook(conn_id).settings()
    master = spark_master(spark_conn_id)
    run = start(
        settings.load_config().flow(params["flow"]),
        StateStore(settings.state_url),
        topics=params.get("topics") or None,
        master=master,
        config_file=Path(settings.config),
        connection=settings.secrets,
        full=bool(params.get("full")),
        sample_period=_sample_period(params.get("sample_period_days")),
    )
    job = spark_job(run, master)
    return {
        "run": {**asdict(run), "directory": str(run.directory)},
        "application": str(job.application),
        "arguments": job.arguments,
        "jars": ",".join(str(jar) for jar in job.jars),
        "py_files": ",".join(str(path) for path in job.py_files),
        "files": ",".join(str(path) for path in job.files),
    }


def _sample_period(days: float | None) -> timedelta:
    """The DAG's `sample_period_days` (None: the default, `SAMPLE_PERIOD`)."""
    return SAMPLE_PERIOD if days is None else timedelta(days=float(days))


class VerificationSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for a run `plan_run` planned, on the Spark connection
    `conn_id` (the one the plan read the master from).

    The Kafka connector gives the driver and the executors one truststore path. The
    executors find the shipped files (`--files`) in their working directories by
    their names; in client mode the driver runs in spark-submit's working directory,
    where they are not. So spark-submit starts in the run's folder (`run_directory`),
    in which `shipped_links` names them so for the submit's length, as `replicator
    verify` does (`run_spark`): one way for both. Not `SparkFiles.get` in the job: it
    answers the driver's own path, which executors on other hosts do not have. The
    provider's hook sets no working directory, so this task's process (it runs this
    task only) moves into the folder while it submits. A plan with no record to read
    submits nothing (the suites take the plan's tables). A connection whose master is a
    verification server (host `sc://HOST`, its port) runs the job as the server's client
    (`run_on_server`, as `replicator verify --master sc://...` does), submitting nothing.

    Secrets of the replicator's connection that the configuration references reach
    the driver in spark-submit's environment (`connection_environment`), added here
    after rendering (Airflow stores a task's rendered fields), and only for masters
    whose driver is spark-submit's own process: on YARN and Kubernetes the provider
    copies `env_vars` onto the command line, so there they are refused."""

    template_fields = (*SparkSubmitOperator.template_fields, "run_directory")

    def __init__(
        self,
        *,
        run_directory: str,
        conn_id: str = SPARK_CONN_ID,
        replicator_conn_id: str = ReplicatorHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(conn_id=conn_id, **kwargs)
        self.run_directory = run_directory
        self.spark_conn_id = conn_id
        self.replicator_conn_id = replicator_conn_id

    def execute(self, context: Context) -> None:
        settings = ReplicatorHook(self.replicator_conn_id).settings()
        secrets = connection_environment(Path(settings.config), settings.secrets)
        master = spark_master(self.spark_conn_id)
        on_server = is_remote(master)
        if secrets and not (on_server or master.startswith(("local", "spark://"))):
            raise ReplicatorError(
                f"the configuration takes secrets from Airflow connection "
                f"{self.replicator_conn_id!r} (${{conn:...}}), which reach the Spark driver "
                f"only in spark-submit's environment, and for master {master} the Spark "
                "provider puts that on the command line: use ${file:...} for this cluster"
            )
        directory = Path(self.run_directory)
        if not records_to_read(directory / "plan.json"):
            # Nothing new since the last run and no sample due: the suites take the
            # plan's tables, as `replicator verify` does; no Spark application starts.
            self.log.info("nothing to read for %s: no Spark job", directory.name)
            return
        if on_server:  # the job as the verification server's client: nothing to submit
            run_on_server(directory, master, secrets)
            return
        self.env_vars = {**(self.env_vars or {}), **secrets}
        files = [Path(name) for name in self.files.split(",")] if self.files else []
        with shipped_links(directory, files), chdir(directory):
            super().execute(context)


def check(
    planned: dict,
    conn_id: str = ReplicatorHook.default_conn_name,
    spark_conn_id: str = SPARK_CONN_ID,
) -> dict:
    """Run the suites over the Spark job's tables and record the verdict; a wrong
    copy fails the task (and the DAG run) with the failing rows, and opens the
    flow's incident (told once; a later right copy resolves it: `notifiers`). On a
    verification server (the Spark connection's master), its warm suites run them."""
    run = VerificationRun(**{**planned["run"], "directory": Path(planned["run"]["directory"])})
    summary = run_suites(run.directory, master=spark_master(spark_conn_id))
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
    return {
        "run_id": run.run_id,
        "data_docs": summary["data_docs"],
        "suites": summary["suites"],
        "suites_ran": summary["suites_ran"],
        "verified": verification.summary["verified"],
    }
