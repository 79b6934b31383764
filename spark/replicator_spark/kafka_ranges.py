"""Small offset ranges of many partitions, read by the job's driver with one consumer.

The Spark Kafka connector reads each topic-partition with a consumer of its own (its
consumer pool is keyed by partition). For a large range the consumer's start is lost
in its records; a wide flow, thousands of partitions with a few new records each, paid
that start (connections, metadata, a fetch session) once per partition and side: 2,000
partitions took over eleven minutes on `local[2]`. The driver reads such ranges instead,
all at once with one consumer per cluster (`replicator.kafka.partition_scans`, the
engine's batched reader: every partition assigned together, each fetch carrying all of
a broker's partitions), and hands them to Spark as an Arrow table in the connector's
schema: the executors fingerprint and sum them as they do the connector's records, and
need nothing installed for it (the table travels in the JVM). What follows in the job
cannot tell which reader read a record; headers are null when a record has none, as the
connector gives them.

Only ranges of fewer than `SMALL_RANGE_OFFSETS` offsets are read so, up to
`DRIVER_OFFSETS` offsets per cluster (the driver holds them in memory); larger ranges,
and small ones past that budget, go to the connector.

read_committed, like the connector: a range ends at its end offset or at the
partition's last stable offset, whichever comes first. A range whose first offsets
were deleted since the run was planned (retention) fails the job naming the partition,
as the connector's `failOnDataLoss` does.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message
from pyspark.sql import DataFrame, SparkSession

from replicator.acls.plan import VERIFIER_GROUP_PREFIX
from replicator.kafka.partition_scans import Scan, scan_partitions

#: The connector's schema (`format("kafka")` with `includeHeaders`).
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)
_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)
#: The connector's timestamp types: 0 create time, 1 log append time (-1: none).
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}

#: A range of fewer offsets than this is read by the driver: one consumer with its
#: neighbours costs less than a connector consumer of its own.
SMALL_RANGE_OFFSETS = 10_000
#: The most offsets the driver reads per cluster (held in its memory).
DRIVER_OFFSETS = 500_000

Range = tuple[str, int, int, int]  # topic, partition, first offset, end offset


def split(ranges: list[Range]) -> tuple[list[Range], list[Range]]:
    """(for the driver, for the connector): the small ranges, smallest first, up to
    `DRIVER_OFFSETS` offsets in all; the rest. Empty ranges are left out."""
    small, large = [], []
    budget = DRIVER_OFFSETS
    for topic, partition, first, end in sorted(ranges, key=lambda r: r[3] - r[2]):
        size = end - first
        if size <= 0:
            continue
        if size < SMALL_RANGE_OFFSETS and size <= budget:
            small.append((topic, partition, first, end))
            budget -= size
        else:
            large.append((topic, partition, first, end))
    return small, large


def read_ranges(
    spark: SparkSession, cluster: str, settings: Mapping[str, object], ranges: list[Range]
) -> DataFrame:
    """The records of each (topic, partition, first, end) of `ranges`, read here with
    the librdkafka consumer `settings` of the cluster whose alias is `cluster`."""
    columns = _Columns()
    scans = {(t, p): _Collect(columns, first, end) for t, p, first, end in ranges}
    scan_partitions(
        settings,
        "verify",
        cluster,
        scans,
        **{
            "isolation.level": "read_committed",
            "group.id": f"{VERIFIER_GROUP_PREFIX}driver",
            # A first offset deleted since the plan: an error, not a silent jump.
            "auto.offset.reset": "error",
        },
    )
    return spark.createDataFrame(columns.table(), schema=KAFKA_SCHEMA)


class _Columns:
    """The records read so far, column by column."""

    def __init__(self) -> None:
        self.values: list[list[object]] = [[] for _ in _ARROW_SCHEMA]

    def add(self, message: Message) -> None:
        kind, timestamp = message.timestamp()
        headers = message.headers()
        row = (
            message.key(),
            message.value(),
            message.topic(),
            message.partition(),
            message.offset(),
            timestamp * 1000,
            _TIMESTAMP_TYPES.get(kind, -1),
            [{"key": k, "value": v} for k, v in headers] if headers else None,
        )
        for column, value in zip(self.values, row, strict=True):
            column.append(value)

    def table(self) -> pa.Table:
        arrays = [
            pa.array(column, type=field.type)
            for column, field in zip(self.values, _ARROW_SCHEMA, strict=True)
        ]
        return pa.Table.from_arrays(arrays, schema=_ARROW_SCHEMA)


class _Collect(Scan):
    """The records of one partition at offsets [first, end), into `columns`."""

    def __init__(self, columns: _Columns, first: int, end: int) -> None:
        self._columns = columns
        self._first = first
        self._end = end

    def start(self) -> int:
        return self._first

    def record(self, message: Message) -> int | None:
        offset = message.offset()
        if offset < self._end:
            self._columns.add(message)
        self.done = offset + 1 >= self._end
        return None

    def end(self) -> None:
        pass  # the partition's last stable offset: nothing more to read now
