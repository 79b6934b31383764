"""Is the copy right? Hourly: plan the run, Spark compares both clusters
(SparkSubmitOperator, connection `spark_local`: `local[2]` by default; on a
cluster such as `spark://...` the truststores and keystores are shipped with the
job), then the GX suites judge the tables; the run fails, with the failing rows,
when the copy is wrong. The verdict and the Data Docs link are in the DR history.
A wrong copy opens the flow's incident, told once through the connection
`dr_notifications` (README, Notifications); a later right copy resolves it."""

from __future__ import annotations

import sys
from pathlib import Path

from airflow.sdk import DAG, Param, task
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.verification import VerificationSubmitOperator, check, plan_run

with DAG(
    dag_id="verify_replication",
    schedule="@hourly",
    doc_md=__doc__,
    **DAG_DEFAULTS,
    render_template_as_native_obj=True,
    params={
        "flow": Param("primary->dr", type="string"),
        "topics": Param([], type="array", description="only these source topics (empty: all)"),
        "full": Param(
            False,
            type="boolean",
            description="verify every retained record again, not only what is new since "
            "the flow's last verification",
        ),
        "sample_period_days": Param(
            7,
            type="number",
            exclusiveMinimum=0,
            description="re-read what earlier runs verified so that all of it is "
            "re-checked within this many days",
        ),
    },
):

    @task
    def plan(params: dict | None = None) -> dict:
        return plan_run(params or {})

    @task
    def suites(planned: dict) -> dict:
        return check(planned)

    planned = plan()
    spark = VerificationSubmitOperator(
        task_id="spark",
        run_directory="{{ ti.xcom_pull(task_ids='plan')['run']['directory'] }}",
        application="{{ ti.xcom_pull(task_ids='plan')['application'] }}",
        application_args="{{ ti.xcom_pull(task_ids='plan')['arguments'] }}",
        jars="{{ ti.xcom_pull(task_ids='plan')['jars'] }}",
        py_files="{{ ti.xcom_pull(task_ids='plan')['py_files'] }}",
        files="{{ ti.xcom_pull(task_ids='plan')['files'] }}",
        conf={"spark.ui.enabled": "false"},
        spark_binary=str(Path(sys.executable).with_name("spark-submit")),
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
    )
    planned >> spark >> suites(planned)
