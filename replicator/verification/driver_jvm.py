"""The JVM options of a local verification job's driver (driver and executor in one
JVM), sized by the records the job reads.

They are given as the driver's *default* Java options (`spark.driver.defaultJavaOptions`,
which Spark puts before `spark.driver.extraJavaOptions`), so an operator's own
`spark.driver.extraJavaOptions` (spark-defaults.conf, Airflow's `conf`) still applies
and wins where it sets the same flag (the JVM takes the last of two). An administrator's
own `spark.driver.defaultJavaOptions` in spark-defaults.conf is kept too, after ours.
Jobs on a cluster run as the cluster is deployed: nothing is set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"

#: A local run of a plan with fewer records than this (source and target windows
#: together) compiles with the JVM's quick compiler only (`-XX:TieredStopAtLevel=1`): on
#: such a plan its optimizing compiler (C2) costs more CPU than it saves. Measured on
#: 204,000 records, 2 cores: the job took 101 s and 117 CPU-seconds with C2, 52 s and 63
#: CPU-seconds without, the same tables. This bound is set conservatively and was not
#: measured at the bound itself.
QUICK_JIT_RECORDS = 1_000_000
QUICK_JIT_OPTIONS = "-XX:TieredStopAtLevel=1"
#: A larger local run keeps C2 for what is truly hot (the record loops: without C2 they
#: took 2.7x the task CPU) and not for the thousands of methods of Spark's planning that
#: run a few thousand times each: C2 compiles a method invoked ten times as often as the
#: JVM's default asks (`Tier4*` thresholds). The JVM's throughput collector replaces G1
#: (one short-lived process: pauses do not matter, its barriers' CPU does). Measured on
#: 2,000,000 records read twice, 2 cores (`bench/verify_throughput.py` shape), runs of
#: each interleaved: C2's threads 16.9 and 19.7 CPU-seconds with the defaults, 10.3 and
#: 8.6 with these, the JVM's whole CPU 58.8 and 66.7 against 57.3 and 49.8; the job's
#: time (40.3 and 45.5 s against 42.2 and 38.1 s) is within this machine's spread.
HOT_JIT_OPTIONS = (
    "-XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)


def driver_conf(
    master: str, records: int, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The `--conf` entries for a job on `master` that reads `records` records."""
    if not master.startswith("local"):
        return {}
    ours = QUICK_JIT_OPTIONS if records < QUICK_JIT_RECORDS else HOT_JIT_OPTIONS
    theirs = spark_default(DEFAULT_JAVA_OPTIONS, environ)
    if theirs:
        log.info(
            "the verification job's driver runs with %s, then spark-defaults.conf's %s (%s)",
            ours,
            DEFAULT_JAVA_OPTIONS,
            theirs,
        )
        return {DEFAULT_JAVA_OPTIONS: f"{ours} {theirs}"}
    return {DEFAULT_JAVA_OPTIONS: ours}


def spark_default(key: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """`key` as spark-submit reads it from spark-defaults.conf (`$SPARK_CONF_DIR`, else
    `$SPARK_HOME/conf`): a Java properties file, `key value` or `key=value` a line."""
    directory = environ.get("SPARK_CONF_DIR") or (
        str(Path(environ["SPARK_HOME"]) / "conf") if environ.get("SPARK_HOME") else None
    )
    if directory is None:
        return None
    path = Path(directory) / "spark-defaults.conf"
    if not path.is_file():
        return None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        end = next((i for i, c in enumerate(line) if c in " \t=:"), len(line))
        if line[:end] == key:
            value = line[end:].lstrip()
            value = value[1:] if value[:1] in ("=", ":") else value
            return value.strip() or None
    return None
