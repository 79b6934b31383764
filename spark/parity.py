"""Record parity of a flow's copy, per topic-partition: PySpark job.

    spark-submit --jars <spark-sql-kafka jars> spark/parity.py --plan PLAN.json --out DIR

The plan (`replicator.verification.plan`) fixes, per partition, the source
offsets to verify (up to what the replicator had acknowledged when the run
started, so records in flight are not missing) and the target offsets to read.
Both sides are read with the Spark Kafka connector (read_committed, headers,
explicit offset ranges: the work splits per topic-partition over executors).

A record's fingerprint is a SHA-256 over key, value, timestamp and its own
headers (the replicator's provenance headers left out), so a copy matches its
source record exactly when the fingerprints are equal.

Writes Parquet under DIR:
- `parity/`: one row per partition: source records in the window, copies
  found, missing, duplicated and mismatched source offsets, target records
  without provenance, in-flight records not counted;
- `faults/`: one row per fault (kind, topic, partition, first and last source
  offset or target offset, count), missing offsets as ranges.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from replicator.headers import OFFSET_HEADER, OURS, SOURCE_HEADER
from replicator.verification.plan import VerificationPlan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plan = VerificationPlan.read(args.plan)
    spark = SparkSession.builder.appName(f"parity {plan.flow}").getOrCreate()
    parity, faults = compare(spark, plan)
    parity.write.mode("overwrite").parquet(str(args.out / "parity"))
    faults.write.mode("overwrite").parquet(str(args.out / "faults"))
    spark.stop()


def compare(spark: SparkSession, plan: VerificationPlan) -> tuple[DataFrame, DataFrame]:
    """(per-partition parity, faults) of the plan's windows."""
    source_ranges = [(w.topic, w.partition, w.source_start, w.source_end) for w in plan.windows]
    target_ranges = [
        (w.remote_topic, w.partition, w.target_start, w.target_end) for w in plan.windows
    ]
    windows = spark.createDataFrame(
        [
            (w.topic, w.partition, w.remote_topic, w.source_start, w.source_end, w.in_flight)
            for w in plan.windows
        ],
        "topic string, partition int, remote_topic string, source_start long, "
        "source_end long, in_flight long",
    )
    source = (
        _fingerprinted(_read(spark, plan.source_bootstrap, source_ranges))
        .join(windows, ["topic", "partition"])
        .where("offset >= source_start AND offset < source_end")
        .select("topic", "partition", "offset", "fingerprint")
    )
    provenance = F.element_at(F.filter("headers", lambda h: h["key"] == SOURCE_HEADER), 1)
    offset_header = F.element_at(F.filter("headers", lambda h: h["key"] == OFFSET_HEADER), 1)
    target = (
        _fingerprinted(_read(spark, plan.target_bootstrap, target_ranges))
        .withColumnRenamed("topic", "remote_topic")
        .join(windows, ["remote_topic", "partition"])
        .withColumn(
            "from_source",
            F.coalesce(provenance["value"] == F.lit(plan.source_alias.encode()), F.lit(False)),
        )
        .withColumn("source_offset", F.conv(F.hex(offset_header["value"]), 16, 10).cast("long"))
    )
    copies = target.where(
        "from_source AND source_offset >= source_start AND source_offset < source_end"
    ).select(
        "topic",
        "partition",
        "source_offset",
        F.col("fingerprint").alias("copy_fingerprint"),
    )
    per_offset = (
        source.join(
            copies,
            (source["topic"] == copies["topic"])
            & (source["partition"] == copies["partition"])
            & (source["offset"] == copies["source_offset"]),
            "left",
        )
        .groupBy(source["topic"], source["partition"], source["offset"])
        .agg(
            F.count("source_offset").alias("copies"),
            F.sum(F.when(F.col("copy_fingerprint") != F.col("fingerprint"), 1).otherwise(0)).alias(
                "mismatched_copies"
            ),
        )
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
    return parity, faults


def _read(
    spark: SparkSession, bootstrap: str, ranges: list[tuple[str, int, int, int]]
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
        return spark.createDataFrame([], _KAFKA_SCHEMA)
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        .load()
    )


def _fingerprinted(records: DataFrame) -> DataFrame:
    """SHA-256 of key, value, timestamp (ms) and the record's own headers."""
    own = F.filter("headers", lambda h: ~h["key"].isin(*OURS))
    headers = F.array_join(
        F.transform(
            own,
            lambda h: F.concat(h["key"], F.lit("="), F.coalesce(F.base64(h["value"]), F.lit("-"))),
        ),
        ",",
    )
    return records.withColumn(
        "fingerprint",
        F.sha2(
            F.concat_ws(
                "|",
                F.coalesce(F.base64("key"), F.lit("-")),
                F.coalesce(F.base64("value"), F.lit("-")),
                F.unix_millis("timestamp").cast("string"),
                F.coalesce(headers, F.lit("")),
            ),
            256,
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


_KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)


if __name__ == "__main__":
    main()
