"""The job decodes MM2's checkpoint and offset-sync records with Spark's built-in
functions (no Python worker): the same fields as `replicator.engine.formats`, and a
record in another format fails the job naming it. Real Spark, local."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from replicator_spark.verify import _decode_checkpoint, _decode_offset_sync

from replicator.engine.formats import Checkpoint, OffsetSync

pytestmark = pytest.mark.integration

RECORD = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
    ]
)
CHECKPOINTS = [
    Checkpoint("orders-app", "primary.orders", 3, 1_000, 990),
    Checkpoint("g", "t", 0, 0, 0, metadata="committed by the app"),
    Checkpoint("группа", "primary.заказы", 2_147_483_647, 2**62, 2**62 - 5),
    Checkpoint("", "x", 1, 5, 5),
]
SYNCS = [
    OffsetSync("orders", 0, 0, 0),
    OffsetSync("orders.eu-west", 11, 123_456_789_012, 123_456_700_000),
    OffsetSync("заказы", 7, 2**63 - 1, 2**40),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[1]")
        .appName("mapping-records-test")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def _records(spark: SparkSession, pairs: list[tuple[bytes, bytes]]) -> DataFrame:
    rows = [("mm2-offset-syncs.dr.internal", 0, n, k, v) for n, (k, v) in enumerate(pairs)]
    return spark.createDataFrame(rows, RECORD)


def test_checkpoints_and_offset_syncs_decode_as_the_replicator_decodes_them(
    spark: SparkSession,
) -> None:
    checkpoints = _records(spark, [(c.key(), c.value()) for c in CHECKPOINTS])
    decoded = checkpoints.select(_decode_checkpoint("key", "value").alias("c")).select("c.*")
    assert [tuple(r) for r in decoded.orderBy("partition").collect()] == sorted(
        [(c.group, c.topic, c.partition, c.upstream, c.downstream) for c in CHECKPOINTS],
        key=lambda row: row[2],
    )
    syncs = _records(spark, [(s.key(), s.value()) for s in SYNCS])
    decoded = syncs.select(_decode_offset_sync("key", "value").alias("s")).select("s.*")
    assert sorted(tuple(r) for r in decoded.collect()) == sorted(
        (s.topic, s.partition, s.upstream, s.downstream) for s in SYNCS
    )


@pytest.mark.parametrize(
    ("decode", "key", "value"),
    [
        (_decode_offset_sync, SYNCS[1].key()[:-1], SYNCS[1].value()),  # key cut short
        (_decode_offset_sync, SYNCS[1].key(), SYNCS[1].value() + b"\x00"),  # value too long
        (_decode_checkpoint, CHECKPOINTS[0].key(), b"\x00\x01" + CHECKPOINTS[0].value()[2:]),
        (_decode_checkpoint, b"not a key", b"nor a value"),
    ],
    ids=["sync key cut short", "sync value too long", "checkpoint version 1", "text"],
)
def test_a_record_in_another_format_fails_the_job_naming_it(
    spark: SparkSession, decode: object, key: bytes, value: bytes
) -> None:
    good = (SYNCS[0].key(), SYNCS[0].value())
    if decode is _decode_checkpoint:
        good = (CHECKPOINTS[0].key(), CHECKPOINTS[0].value())
    records = _records(spark, [good, (key, value)])
    with pytest.raises(PySparkException) as failed:
        records.select(decode("key", "value")).collect()  # type: ignore[operator]
    assert "record at offset 1 of partition 0 of mm2-offset-syncs.dr.internal" in str(failed.value)
    assert "MirrorMaker 2's format" in str(failed.value)
