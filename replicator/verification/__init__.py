"""Verification of a flow's copy: what to compare (`plan`, without Spark), how the Spark
job under `spark/` is submitted (`submit`) and a whole run (`run`: the plan, the Spark job
and the Great Expectations suites under `expectations/`, each in a process of its own,
and the summary in the state store). It may import `offsets`, `engine` and everything
below them, never Spark or Great Expectations themselves; `cli` and the Airflow plugins
import it, through the names below."""

from replicator.verification.kafka_options import connection_environment
from replicator.verification.run import (
    Verification,
    VerificationRun,
    finish,
    run_suites,
    shipped_links,
    spark_job,
    start,
    verify,
)

__all__ = [
    "Verification",
    "VerificationRun",
    "connection_environment",
    "finish",
    "run_suites",
    "shipped_links",
    "spark_job",
    "start",
    "verify",
]
