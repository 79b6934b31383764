"""Run the verification suites over one run's tables and build Data Docs.

    python -m expectations.report --results DIR [--thresholds FILE] --gx-root DIR

Reads the Parquet tables the Spark job wrote under DIR (`parity`, `faults`,
`mappings`, `digests`, `samples`, `lag`; when the run had no record to read and started
no job, the tables its plan gives: every partition at zero, its lag as planned, nothing
else), validates each with its suite (GX Core, a context held in memory), builds the Data
Docs under `--gx-root` (`gx/uncommitted/data_docs/local_site`, where a file context
puts them) with each validation's result beside them (`validations/<table>.json`),
and writes `DIR/summary.json`: per suite whether it passed and every failing row,
named by topic, partition and offsets. Thresholds (lag, retention margin) come from
a JSON file, not code. Exit code 0 when every suite passed.

Lives outside `replicator` (which never imports GX); `replicator verify` runs it
as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
)

DEFAULT_THRESHOLDS = Path(__file__).with_name("thresholds.json")
#: A fault is named by these columns in the results and the Data Docs.
_FAULT_INDEX = ["topic", "partition", "kind", "side", "first", "last", "count"]
_PARTITION_INDEX = ["topic", "partition"]
_SAMPLE_INDEX = ["topic", "partition", "source_first", "source_end", "records", "found"]
_RANGE_INDEX = ["topic", "partition", "first", "end", "records", "copies"]
_MAPPING_INDEX = ["kind", "group", "remote_topic", "partition", "upstream", "downstream", "claimed"]


@dataclass(frozen=True)
class Suite:
    """One table, its expectations, and the columns that name a failing row."""

    table: str
    expectations: list[gxe.Expectation]
    index: list[str]


def suites(thresholds: dict[str, float]) -> list[Suite]:
    zero = {"min_value": 0, "max_value": 0}
    return [
        Suite(
            "parity",
            [
                gxe.ExpectColumnPairValuesToBeEqual(column_A="source_records", column_B="copied"),
                gxe.ExpectColumnValuesToBeBetween(column="missing", **zero),
                gxe.ExpectColumnValuesToBeBetween(column="duplicated", **zero),
                gxe.ExpectColumnValuesToBeBetween(column="mismatched", **zero),
                gxe.ExpectColumnValuesToBeBetween(column="no_provenance", **zero),
            ],
            _PARTITION_INDEX,
        ),
        Suite(
            "faults",
            [
                gxe.ExpectColumnValuesToNotBeInSet(
                    column="kind",
                    value_set=["missing", "duplicated", "mismatched", "no_provenance"],
                )
            ],
            _FAULT_INDEX,
        ),
        Suite(
            "mappings",
            [
                gxe.ExpectColumnValuesToBeInSet(column=column, value_set=[True])
                for column in ("points_at_claimed", "within_log", "monotonic")
            ],
            _MAPPING_INDEX,
        ),
        Suite(
            "digests",
            # Each range's copies summed up as its source records did (a range that
            # differs is compared record by record: `faults` names its offsets).
            [gxe.ExpectColumnValuesToBeInSet(column="clean", value_set=[True])],
            _RANGE_INDEX,
        ),
        Suite(
            "samples",
            # Each range earlier runs proved and this run re-read still holds what
            # they proved (one that differs is compared record by record: `faults`).
            [gxe.ExpectColumnValuesToBeInSet(column="matches", value_set=[True])],
            _SAMPLE_INDEX,
        ),
        Suite(
            "lag",
            [
                gxe.ExpectColumnValuesToBeBetween(
                    column="lag_records", min_value=0, max_value=thresholds["max_lag_records"]
                ),
                gxe.ExpectColumnValuesToBeBetween(
                    column="lag_seconds", min_value=0, max_value=thresholds["max_lag_seconds"]
                ),
                # Nulls (nothing at risk, or unlimited retention) pass.
                gxe.ExpectColumnValuesToBeBetween(
                    column="retention_margin_seconds",
                    min_value=thresholds["min_retention_margin_seconds"],
                ),
            ],
            _PARTITION_INDEX,
        ),
    ]


def run(results: Path, thresholds: dict[str, float], gx_root: Path) -> dict[str, Any]:
    """Validate every table; the summary that `replicator verify` stores and prints."""
    site = gx_root / "gx" / "uncommitted" / "data_docs" / "local_site"
    context = gx.get_context(mode="ephemeral", project_config=_project(site))
    source = context.data_sources.add_or_update_pandas("verification")
    summary: dict[str, Any] = {"success": True, "suites": {}}
    kept = gx_root / "validations"
    kept.mkdir(parents=True, exist_ok=True)
    for suite in suites(thresholds):
        frame = _table(results, suite.table)
        outcome, result = _validate(context, source, suite, frame)
        (kept / f"{suite.table}.json").write_text(json.dumps(result, indent=2, default=str))
        summary["suites"][suite.table] = outcome
        summary["success"] = summary["success"] and outcome["success"]
    # Once for every suite: a checkpoint's UpdateDataDocsAction rebuilt the whole site
    # (its templates compiled anew) per suite, 6 of a run's 11 s.
    context.build_data_docs()
    summary["data_docs"] = str(site / "index.html")
    return summary


def _project(site: Path) -> DataContextConfig:
    """A context whose suites, definitions and results live in memory, with one Data
    Docs site on disk: a file context wrote each of them as a file and read its YAML
    configuration back on every look-up (241 parses a run, a third of its 0.65 s); the
    run's record is `summary.json`, each validation's result, and the site."""
    return DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites={
            "local_site": {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(site),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                # The validation pages only: each lists its suite's expectations with
                # what was found. A page per suite besides (and an empty profiling
                # section) was 0.2 of the 0.75 s the suites take in a run with nothing
                # new.
                "site_section_builders": {"expectations": "0", "profiling": "0"},
            }
        },
    )


def _table(results: Path, name: str) -> pd.DataFrame:
    """The job's table `name`, or, when no job ran (nothing to read), the plan's."""
    if (results / name).exists():
        return pd.read_parquet(results / name)
    windows = json.loads((results / "plan.json").read_text())["windows"]
    partitions = [{"topic": w["topic"], "partition": w["partition"]} for w in windows]
    if name == "parity":
        zero = dict.fromkeys(
            ("source_records", "copied", "missing", "duplicated", "mismatched", "no_provenance"),
            0,
        )
        return pd.DataFrame(
            [
                {**p, "in_flight": w["in_flight"], **zero}
                for p, w in zip(partitions, windows, strict=True)
            ]
        )
    if name == "lag":
        return pd.DataFrame(
            [
                {
                    **p,
                    "lag_records": w["in_flight"],
                    "lag_seconds": float(w["lag_seconds"]),
                    "retention_ms": w["retention_ms"],
                    "retention_margin_seconds": w["retention_margin_seconds"],
                }
                for p, w in zip(partitions, windows, strict=True)
            ]
        )
    return pd.DataFrame({column: [] for column in _EMPTY[name]})


#: The columns of the tables that are empty when no job ran.
_EMPTY = {
    "faults": _FAULT_INDEX,
    "digests": [*_RANGE_INDEX, "clean"],
    "samples": [*_SAMPLE_INDEX, "matches"],
    "mappings": [*_MAPPING_INDEX, "points_at_claimed", "within_log", "monotonic"],
}


def _validate(
    context: Any, source: Any, suite: Suite, frame: pd.DataFrame
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The suite's outcome for the summary, and GX's result as JSON."""
    asset = _asset(source, suite.table)
    batch = _batch_definition(asset, suite.table)
    gx_suite = context.suites.add_or_update(
        gx.ExpectationSuite(name=f"verification.{suite.table}", expectations=suite.expectations)
    )
    definition = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=f"verification.{suite.table}", data=batch, suite=gx_suite)
    )
    checkpoint = context.checkpoints.add_or_update(
        gx.Checkpoint(
            name=f"verification.{suite.table}",
            validation_definitions=[definition],
            result_format={
                "result_format": "COMPLETE",
                "unexpected_index_column_names": suite.index,
            },
        )
    )
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    failed = []
    for run_result in result.run_results.values():
        for expectation in run_result.results:
            if not expectation.success:
                failed.append(
                    {
                        "expectation": expectation.expectation_config.type,
                        "column": expectation.expectation_config.kwargs.get("column"),
                        "rows": _plain(expectation.result.get("unexpected_index_list") or []),
                    }
                )
    outcome = {"success": bool(result.success), "rows": len(frame), "failed": failed}
    return outcome, {"results": [r.to_json_dict() for r in result.run_results.values()]}


def _asset(source: Any, name: str) -> Any:
    try:
        return source.get_asset(name)
    except LookupError:
        return source.add_dataframe_asset(name)


def _batch_definition(asset: Any, name: str) -> Any:
    try:
        return asset.get_batch_definition(name)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(name)


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """numpy scalars to plain Python, for JSON."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description="verification suites and Data Docs")
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--thresholds", type=Path, default=DEFAULT_THRESHOLDS)
    parser.add_argument("--gx-root", type=Path, required=True)
    args = parser.parse_args()
    thresholds = json.loads(args.thresholds.read_text())
    summary = run(args.results, thresholds, args.gx_root)
    (args.results / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0 if summary["success"] else 1


if __name__ == "__main__":
    sys.exit(main())
