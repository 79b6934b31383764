"""Verification of a flow's copy, per topic-partition: the PySpark job.

    spark-submit --jars <spark-sql-kafka jars> spark/verify.py --plan PLAN.json --out DIR

The plan (`replicator.verification.plan`) fixes, per partition, the source
offsets to verify (up to what the replicator had acknowledged when the run
started, so records in flight are not missing) and the target offsets to read.
Both sides are read with the Spark Kafka connector (read_committed, headers,
explicit offset ranges: the work splits per topic-partition over executors).

A record's fingerprint is a 64-bit xxHash of key, value, timestamp and its own
headers (the replicator's provenance headers left out), so a copy matches its
source record exactly when the fingerprints are equal.

Writes Parquet tables under DIR:
- `parity/`: per partition, source records in the window, copies found,
  missing, duplicated and mismatched source offsets, target records without
  provenance, and the records in flight that were not counted;
- `faults/`: one row per fault range (kind, topic, partition, first and last
  offset, count, and which side's offsets they are);
- `lag/`: per partition, lag in records and seconds, the source's retention and
  the margin before it deletes records not replicated yet.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replicator.engine.formats import Checkpoint, OffsetSync
from replicator.engine.headers import OFFSET_HEADER, OURS, SOURCE_HEADER
from replicator.verification.kafka_options import cluster_options
from replicator.verification.plan import VerificationPlan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plan = VerificationPlan.read(args.plan)
    spark = SparkSession.builder.appName(f"verify {plan.flow}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # One shuffle partition per Kafka partition: the default 200 are mostly empty tasks.
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, len(plan.windows))))
    parity, faults, target = compare(spark, plan)
    tables = {
        "parity": parity,
        "faults": faults,
        "mappings": mappings(spark, plan, target),
        "lag": lag(spark, plan),
    }
    for name, table in tables.items():
        table.coalesce(1).write.mode("overwrite").parquet(str(args.out / name))
    spark.stop()


def mappings(spark: SparkSession, plan: VerificationPlan, target: DataFrame) -> DataFrame:
    """Every checkpoint of the flow's remote topics and every offset sync of its
    partitions: does the target offset hold the copy of the source offset it
    claims (or is it the end of the log), is it within the target's log, and did
    the group's checkpoints only move forwards (unless the group rewound)?

    Both topics are read up to their ends when the run was planned, which were
    taken before the windows: a mapping read never points past its window's end
    (the target records it is checked against), even while the flow runs on."""
    windows = _local(
        spark,
        [
            (w.topic, w.partition, w.remote_topic, w.target_start, w.target_end)
            for w in plan.windows
        ],
        "topic string, partition int, remote_topic string, target_start long, target_end long",
    )
    history = Window.partitionBy("group", "remote_topic", "partition").orderBy("record")
    checkpoints = (
        _read_whole(
            spark, plan, plan.target_bootstrap, plan.checkpoints_topic, plan.checkpoints_ends
        )
        .select(_decode_checkpoint("key", "value").alias("c"), F.col("offset").alias("record"))
        .select("c.*", "record")
        .withColumnRenamed("topic", "remote_topic")
        .withColumn("previous_up", F.lag("upstream").over(history))
        .withColumn("previous_down", F.lag("downstream").over(history))
        .withColumn(
            "forward",
            F.col("previous_down").isNull()
            | (F.col("downstream") >= F.col("previous_down"))
            | (F.col("upstream") < F.col("previous_up"))  # the group rewound
            # The same source position translated anew
            # (replicator.offsets.checkpoints.moves_forward).
            | (F.col("upstream") == F.col("previous_up")),
        )
        .groupBy("group", "remote_topic", "partition")
        .agg(
            F.max_by("upstream", "record").alias("upstream"),
            F.max_by("downstream", "record").alias("downstream"),
            F.bool_and("forward").alias("monotonic"),
        )
        .withColumn("kind", F.lit("checkpoint"))
        .join(windows, ["remote_topic", "partition"])
    )
    syncs = (
        _read_whole(
            spark,
            plan,
            plan.offset_syncs_bootstrap,
            plan.offset_syncs_topic,
            plan.offset_syncs_ends,
        )
        .select(_decode_offset_sync("key", "value").alias("s"))
        .select("s.*")
        .join(windows, ["topic", "partition"])
        .withColumn("group", F.lit(None).cast("string"))
        .withColumn("monotonic", F.lit(True))
        .withColumn("kind", F.lit("offset_sync"))
    )
    claims = target.where("from_source").select(
        "remote_topic",
        "partition",
        F.col("offset").alias("downstream"),
        F.col("source_offset").alias("claimed"),
    )
    columns = ["kind", "group", "topic", "partition", "remote_topic", "upstream", "downstream"]
    return (
        checkpoints.select(*columns, "monotonic", "target_start", "target_end")
        .unionByName(syncs.select(*columns, "monotonic", "target_start", "target_end"))
        .join(claims, ["remote_topic", "partition", "downstream"], "left")
        .withColumn(
            "points_at_claimed",
            (F.col("claimed") == F.col("upstream"))
            | (F.col("claimed").isNull() & (F.col("downstream") == F.col("target_end"))),
        )
        .withColumn(
            "within_log",
            F.col("downstream").between(F.col("target_start"), F.col("target_end")),
        )
        .fillna(False, ["points_at_claimed"])
        .select(*columns, "claimed", "points_at_claimed", "within_log", "monotonic")
    )


# StructTypes, not DDL strings: a UDF's type is parsed when it is defined, before
# any session exists.
_CHECKPOINT = T.StructType(
    [
        T.StructField("group", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("upstream", T.LongType()),
        T.StructField("downstream", T.LongType()),
    ]
)
_OFFSET_SYNC = T.StructType(_CHECKPOINT.fields[1:])


@F.udf(returnType=_CHECKPOINT, useArrow=False)
def _decode_checkpoint(key: bytes, value: bytes) -> tuple[str, str, int, int, int]:
    c = Checkpoint.decode(bytes(key), bytes(value))
    return c.group, c.topic, c.partition, c.upstream, c.downstream


@F.udf(returnType=_OFFSET_SYNC, useArrow=False)
def _decode_offset_sync(key: bytes, value: bytes) -> tuple[str, int, int, int]:
    s = OffsetSync.decode(bytes(key), bytes(value))
    return s.topic, s.partition, s.upstream, s.downstream


def _read_whole(
    spark: SparkSession, plan: VerificationPlan, bootstrap: str, topic: str | None, ends: list[int]
) -> DataFrame:
    """Every record of a small internal topic up to `ends` (its end offset per
    partition when the run was planned; None topic: it does not exist, empty)."""
    partitions = [p for p, end in enumerate(ends) if end > 0]
    if topic is None or not partitions:
        return _local(spark, [], _KAFKA_SCHEMA)
    earliest = -2  # the connector's "earliest" in a JSON offset map
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**cluster_options(plan.config_file, bootstrap, plan.ship_files))
        .option("assign", json.dumps({topic: partitions}))
        .option("startingOffsets", json.dumps({topic: {str(p): earliest for p in partitions}}))
        .option("endingOffsets", json.dumps({topic: {str(p): ends[p] for p in partitions}}))
        .load()
    )


def lag(spark: SparkSession, plan: VerificationPlan) -> DataFrame:
    """Lag and retention risk per partition, as measured when the run was planned."""
    return _local(
        spark,
        [
            (
                w.topic,
                w.partition,
                w.in_flight,
                float(w.lag_seconds),
                w.retention_ms,
                None if w.retention_margin_seconds is None else float(w.retention_margin_seconds),
            )
            for w in plan.windows
        ],
        "topic string, partition int, lag_records long, lag_seconds double, "
        "retention_ms long, retention_margin_seconds double",
    )


def compare(spark: SparkSession, plan: VerificationPlan) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(per-partition parity, faults, the target's records) of the plan's windows."""
    source_ranges = [(w.topic, w.partition, w.source_start, w.source_end) for w in plan.windows]
    target_ranges = [
        (w.remote_topic, w.partition, w.target_start, w.target_end) for w in plan.windows
    ]
    windows = _local(
        spark,
        [
            (w.topic, w.partition, w.remote_topic, w.source_start, w.source_end, w.in_flight)
            for w in plan.windows
        ],
        "topic string, partition int, remote_topic string, source_start long, "
        "source_end long, in_flight long",
    )
    source = (
        _fingerprinted(_read(spark, plan, plan.source_bootstrap, source_ranges))
        .join(windows, ["topic", "partition"])
        .where("offset >= source_start AND offset < source_end")
        .select("topic", "partition", "offset", "fingerprint")
    )
    provenance = F.element_at(F.filter("headers", lambda h: h["key"] == SOURCE_HEADER), 1)
    offset_header = F.element_at(F.filter("headers", lambda h: h["key"] == OFFSET_HEADER), 1)
    target = (
        _fingerprinted(_read(spark, plan, plan.target_bootstrap, target_ranges))
        .withColumnRenamed("topic", "remote_topic")
        .join(windows, ["remote_topic", "partition"])
        .withColumn(
            "from_source",
            F.coalesce(provenance["value"] == F.lit(plan.source_alias.encode()), F.lit(False)),
        )
        .withColumn("source_offset", F.conv(F.hex(offset_header["value"]), 16, 10).cast("long"))
        .select(
            "remote_topic",
            "topic",
            "partition",
            "offset",
            "fingerprint",
            "from_source",
            "source_offset",
            "source_start",
            "source_end",
        )
        .persist()
    )
    # One shuffle: each source record meets its copies in a group of its offset.
    copies = target.where(
        "from_source AND source_offset >= source_start AND source_offset < source_end"
    ).select("topic", "partition", F.col("source_offset").alias("offset"), "fingerprint")
    per_offset = (
        source.withColumn("copy", F.lit(0))
        .unionByName(copies.withColumn("copy", F.lit(1)))
        .groupBy("topic", "partition", "offset")
        .agg(
            F.sum(1 - F.col("copy")).alias("originals"),
            F.sum("copy").alias("copies"),
            (F.min("fingerprint") != F.max("fingerprint")).alias("differs"),
        )
        # A copy of a source offset that holds no record (a transaction marker,
        # compacted away) has nothing to be compared with.
        .where("originals > 0")
        .withColumn(
            "mismatched_copies", F.when(F.col("differs"), F.col("copies")).otherwise(F.lit(0))
        )
        .drop("originals", "differs")
        .persist()
    )
    local = target.where("NOT from_source OR source_offset IS NULL")
    faults = (
        _ranges(per_offset.where("copies = 0"), "missing")
        .unionByName(_ranges(per_offset.where("copies > 1"), "duplicated"))
        .unionByName(_ranges(per_offset.where("mismatched_copies > 0"), "mismatched"))
        .unionByName(_ranges(local, "no_provenance", side="target"))
    )
    counts = per_offset.groupBy("topic", "partition").agg(
        F.count("*").alias("source_records"),
        F.sum(F.least(F.col("copies"), F.lit(1))).alias("copied"),
        F.sum(F.when(F.col("copies") == 0, 1).otherwise(0)).alias("missing"),
        F.sum(F.when(F.col("copies") > 1, 1).otherwise(0)).alias("duplicated"),
        F.sum(F.when(F.col("mismatched_copies") > 0, 1).otherwise(0)).alias("mismatched"),
    )
    no_provenance = local.groupBy("topic", "partition").agg(F.count("*").alias("no_provenance"))
    measures = ["source_records", "copied", "missing", "duplicated", "mismatched"]
    parity = (
        windows.join(counts, ["topic", "partition"], "left")
        .join(no_provenance, ["topic", "partition"], "left")
        .fillna(0, [*measures, "no_provenance"])
    )
    return parity, faults, target


def _read(
    spark: SparkSession,
    plan: VerificationPlan,
    bootstrap: str,
    ranges: list[tuple[str, int, int, int]],
) -> DataFrame:
    """The records at offsets [start, end) of each (topic, partition, start, end)."""
    assign: dict[str, list[int]] = {}
    start: dict[str, dict[str, int]] = {}
    end: dict[str, dict[str, int]] = {}
    for topic, partition, first, stop in ranges:
        if stop <= first:
            continue  # nothing to read: the connector wants end > start
        assign.setdefault(topic, []).append(partition)
        start.setdefault(topic, {})[str(partition)] = first
        end.setdefault(topic, {})[str(partition)] = stop
    if not assign:
        return _local(spark, [], _KAFKA_SCHEMA)
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**cluster_options(plan.config_file, bootstrap, plan.ship_files))
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        # Large partitions are split into offset ranges, so every executor core gets work.
        .option("minPartitions", str(2 * spark.sparkContext.defaultParallelism))
        .load()
    )


def _fingerprinted(records: DataFrame) -> DataFrame:
    """A 64-bit xxHash of key, value, timestamp and the record's own headers: a copy
    whose content differs in any bit gets another fingerprint (chance 2**-64)."""
    own = F.filter("headers", lambda h: ~h["key"].isin(*OURS))
    return records.withColumn(
        "fingerprint",
        F.xxhash64(
            F.coalesce("key", F.lit(b"")),
            F.col("key").isNull(),
            F.coalesce("value", F.lit(b"")),
            F.col("value").isNull(),
            F.unix_millis("timestamp"),
            own,
        ),
    )


def _ranges(offsets: DataFrame, kind: str, side: str = "source") -> DataFrame:
    """Consecutive offsets as ranges: (topic, partition, first, last, count, kind, side)."""
    column = "offset"
    order = Window.partitionBy("topic", "partition").orderBy(column)
    return (
        offsets.withColumn("run", F.col(column) - F.row_number().over(order))
        .groupBy("topic", "partition", "run")
        .agg(
            F.min(column).alias("first"),
            F.max(column).alias("last"),
            F.count("*").alias("count"),
        )
        .drop("run")
        .withColumn("kind", F.lit(kind))
        .withColumn("side", F.lit(side))
    )


def _local(spark: SparkSession, rows: list[tuple[object, ...]], schema: str) -> DataFrame:
    """A small table of the driver's `rows` (the plan's windows), as a literal of the
    query: JSON that Spark parses into rows of `schema` (a DDL string) and unfolds.

    Not `createDataFrame(rows)`: that parallelizes the rows through Python worker
    processes, and every query that reads the table (three per run) ran them again,
    each waiting for a Python worker to start: tens of seconds of a run on two
    cores. A literal is planned as a local table and read in the JVM. Exact: longs
    and strings survive JSON unchanged, and a Python float's repr parses back to
    the same double."""
    struct = T.StructType.fromDDL(schema)
    if not isinstance(struct, T.StructType):
        raise TypeError(f"not the schema of a table: {schema}")
    text = json.dumps([dict(zip(struct.names, row, strict=True)) for row in rows])
    table = F.from_json(F.lit(text), T.ArrayType(struct), {"mode": "FAILFAST"})
    return spark.range(1).select(F.inline(table))


_KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)


if __name__ == "__main__":
    main()
