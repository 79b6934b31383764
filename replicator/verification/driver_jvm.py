"""The JVM options and heap of a local verification job's driver (driver and executor
in one JVM), sized by the records the job reads.

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

from replicator.verification.jars import jvm_dir

log = logging.getLogger(__name__)

DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
DRIVER_MEMORY = "spark.driver.memory"
#: The driver JVM's class-data archive (AppCDS) in the JVM artifacts' folder, written by
#: `make setup` (`python -m replicator_lab.class_archive spark`: a small verification job
#: run once with `-XX:ArchiveClassesAtExit`). A local job maps the classes of Spark, its
#: Kafka connector and the JDK from it instead of loading and verifying them from the
#: jars. Measured on 1,000,000 records of 1 KB read twice (a kept copy, 2 cores), six
#: interleaved pairs: the job 25.4-32.5 s with it (median 31.2) against 29.2-35.2 s
#: without (median 34.8). An archive that does not match (another JDK or Spark) is
#: ignored by the JVM (`-Xshare:auto`, its default), which loads the classes from the jars.
CLASS_ARCHIVE = "spark-verify.jsa"

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


#: A large local run's heap (`spark.driver.memory`, Spark's default 1g), at most a
#: quarter of the memory the process may use (the JVM's own default share): in a 1g heap
#: the young generation fills with the connector's copies of every record many times a
#: second. Measured on 1,000,000 records of 1 KB read twice (`bench/verify_throughput.py`
#: shape, a kept copy, 2 cores), runs interleaved: the tasks' GC time 6.7-7.0 s with 1g,
#: 2.1-3.1 s with 4g; the job 36.9-38.0 s against 35.1-36.0 s. 8g measured as 4g.
HOT_DRIVER_MEMORY_MIB = 4096
_SPARK_DEFAULT_MEMORY_MIB = 1024


def driver_conf(
    master: str,
    records: int,
    environ: Mapping[str, str] = os.environ,
    memory_mib: int | None = None,
) -> dict[str, str]:
    """The `--conf` entries for a job on `master` that reads `records` records;
    `memory_mib`: what this machine (or container) may use, measured when None."""
    if not master.startswith("local"):
        return {}
    conf = {}
    hot = records >= QUICK_JIT_RECORDS
    if hot and spark_default(DRIVER_MEMORY, environ) is None:
        usable = available_memory_mib() if memory_mib is None else memory_mib
        heap = min(HOT_DRIVER_MEMORY_MIB, usable // 4)
        if heap > _SPARK_DEFAULT_MEMORY_MIB:
            conf[DRIVER_MEMORY] = f"{heap}m"
    ours = HOT_JIT_OPTIONS if hot else QUICK_JIT_OPTIONS
    archive = class_archive()
    if archive.is_file():
        ours = f"{ours} -XX:SharedArchiveFile={_quoted(archive)}"
    theirs = spark_default(DEFAULT_JAVA_OPTIONS, environ)
    if theirs:
        log.info(
            "the verification job's driver runs with %s, then spark-defaults.conf's %s (%s)",
            ours,
            DEFAULT_JAVA_OPTIONS,
            theirs,
        )
        return {**conf, DEFAULT_JAVA_OPTIONS: f"{ours} {theirs}"}
    return {**conf, DEFAULT_JAVA_OPTIONS: ours}


def class_archive() -> Path:
    """Where the driver's class-data archive is kept (`CLASS_ARCHIVE`)."""
    return jvm_dir() / CLASS_ARCHIVE


def _quoted(path: Path) -> str:
    """`path` as one word of Spark's Java options (which it splits as a shell does)."""
    text = str(path)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def available_memory_mib(cgroup: Path = Path("/sys/fs/cgroup/memory.max")) -> int:
    """The memory this process may use, in MiB: the machine's, or its cgroup's limit
    (a container's, cgroup v2's `memory.max`) when lower, as the JVM sizes its own
    default heap. Under cgroup v1 the machine's memory is taken."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = cgroup.read_text(encoding="ascii").strip()
    except OSError:
        limit = "max"
    usable = min(physical, int(limit)) if limit.isdigit() else physical
    return usable // (1 << 20)


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
