"""A verification run with real Great Expectations Data Docs, without Spark: the
tables the Spark job (`replicator_spark.verify`) writes, as Parquet with its columns and
types, for two partitions of one topic where one partition lags beyond the
threshold, then `replicator.verification.run_suites` (the suites and Data Docs
of `replicator_expectations.report`, as `replicator verify` runs them), recorded in the
state store as `replicator verify` records it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from replicator.statestore import StateStore
from replicator.verification import run_suites


def _tables(topic: str) -> dict[str, pd.DataFrame]:
    remote = f"primary.{topic}"
    partitions = pd.Series([0, 1], dtype="int32")
    counts = pd.Series([1000, 1000], dtype="int64")
    zeros = pd.Series([0, 0], dtype="int64")
    parity = pd.DataFrame(
        {
            "topic": [topic, topic],
            "partition": partitions,
            "remote_topic": [remote, remote],
            "source_start": zeros,
            "source_end": counts,
            "in_flight": zeros,
            "source_records": counts,
            "copied": counts,
            "missing": zeros,
            "duplicated": zeros,
            "mismatched": zeros,
            "no_provenance": zeros,
        }
    )
    faults = pd.DataFrame(
        {
            "topic": pd.Series([], dtype="object"),
            "partition": pd.Series([], dtype="int32"),
            "first": pd.Series([], dtype="int64"),
            "last": pd.Series([], dtype="int64"),
            "count": pd.Series([], dtype="int64"),
            "kind": pd.Series([], dtype="object"),
            "side": pd.Series([], dtype="object"),
        }
    )
    mappings = pd.DataFrame(
        {
            "kind": ["offset_sync", "offset_sync"],
            "group": [None, None],
            "topic": [topic, topic],
            "partition": partitions,
            "remote_topic": [remote, remote],
            "upstream": counts - 1,
            "downstream": counts - 1,
            "claimed": counts - 1,
            "points_at_claimed": [True, True],
            "within_log": [True, True],
            "monotonic": [True, True],
            "in_window": [True, True],
        }
    )
    digests = pd.DataFrame(
        {
            "topic": [topic, topic],
            "partition": partitions,
            "remote_topic": [remote, remote],
            "bucket": zeros,
            "first": zeros,
            "end": counts,
            "records": counts,
            "digest": pd.Series([7, 9], dtype="int64"),
            "copies": counts,
            "copy_digest": pd.Series([7, 9], dtype="int64"),
            "target_first": zeros,
            "target_end": counts,
            "clean": [True, True],
        }
    )
    samples = pd.DataFrame(
        {
            "topic": [topic],
            "partition": pd.Series([0], dtype="int32"),
            "source_first": pd.Series([0], dtype="int64"),
            "source_end": pd.Series([500], dtype="int64"),
            "records": pd.Series([500], dtype="int64"),
            "found": pd.Series([500], dtype="int64"),
            "matches": [True],
        }
    )
    lag = pd.DataFrame(
        {
            "topic": [topic, topic],
            "partition": partitions,
            "lag_records": pd.Series([0, 5_000_000], dtype="int64"),
            "lag_seconds": [0.0, 86_400.0],
            "retention_ms": pd.Series([604_800_000, 604_800_000], dtype="int64"),
            "retention_margin_seconds": [float("nan"), float("nan")],
        }
    )
    return {
        "parity": parity,
        "faults": faults,
        "mappings": mappings,
        "digests": digests,
        "samples": samples,
        "lag": lag,
    }


def table_names() -> list[str]:
    """The tables the helper writes: one suite each, one row of Data Docs' index each."""
    return list(_tables("t"))


def write_tables(directory: Path, topic: str) -> None:
    """The Spark job's tables of `topic` under `directory` (one run's folder)."""
    for name, table in _tables(topic).items():
        (directory / name).mkdir(parents=True)
        table.to_parquet(directory / name / "part-0.parquet", index=False)


def verification_with_data_docs(store: StateStore, results: Path, flow: str, topic: str) -> str:
    """Run the suites over the tables of `topic` under `results`; the id of the
    recorded verification run ("failed": the lag suite fails on partition 1)."""
    run_id = store.runs.start("verification", flow, None, {"topics": [topic], "master": None})
    directory = results / f"run={run_id}"
    write_tables(directory, topic)
    summary = run_suites(directory)
    outcome = "succeeded" if summary["success"] else "failed"
    store.runs.finish(run_id, outcome, 0, None, {**summary, "results": str(directory)})
    return run_id
