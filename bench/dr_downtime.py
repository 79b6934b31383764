"""Failover and failback through the DAGs on a running `make run`: how long each
procedure takes, how long the applications are down, and where the time goes.

Triggers `failover` and then `failback` (skip_approval: nobody to ask, as `make run`'s
approval policy allows for planned failovers and failbacks) through
Airflow's REST API, as an operator would, `--runs` times, and prints per run each
task's start-up gap (from the end of the task before it: Airflow's scheduling)
and duration, then the procedure's figures from the state store's history (what
the DR status page and the `report` task show), with each phase of the cutover
(`replicator.procedures.phases`: seconds after the fence). The medians, the worst
downtime and the verdict on the goal (downtime under 3 s at the median and under 4 s
at worst, each procedure; exit status 3 when missed) go to
`bench/results/dr_downtime-<UTC time>.json`.

    make run                                         # in another terminal
    .venv/bin/python bench/dr_downtime.py --runs 3   # about 2 min
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replicator.statestore import StateStore
from replicator_lab.airflow import DEFAULT_HOME, DEFAULT_PORT, AirflowStandalone

RESULTS = Path(__file__).parent / "results"
PROCEDURES = {
    "failover": {"applications": ["demo"], "skip_approval": True},
    "failback": {"applications": ["demo"], "skip_approval": True},
}
_RUN_TIMEOUT_S = 300.0
#: The goal (issue 46): the applications' downtime, median and worst, per procedure.
GOAL_MEDIAN_S, GOAL_WORST_S = 3.0, 4.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="failover+failback pairs")
    parser.add_argument("--airflow-home", default=str(DEFAULT_HOME))
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--state-url", default=None, help="default: $REPLICATOR_STATE_URL")
    args = parser.parse_args(argv)

    store = StateStore(args.state_url)
    figures: dict[str, list[dict[str, float]]] = {kind: [] for kind in PROCEDURES}
    with AirflowStandalone(args.airflow_home, args.port).client() as api:
        for run in range(1, args.runs + 1):
            for kind, conf in PROCEDURES.items():
                run_id = api.trigger(kind, conf)
                state = api.wait_for_run(kind, run_id, _RUN_TIMEOUT_S)
                print(f"\n{kind} run {run}: {state}")
                _print_tasks(api.task_instances(kind, run_id))
                if state != "success":
                    print(api.failure_report(kind, run_id), file=sys.stderr)
                    return 1
                figures[kind].append(_figures(store, kind, run_id))
                print("  " + ", ".join(f"{k} {v:g}" for k, v in figures[kind][-1].items()))
    medians = {
        kind: {
            key: statistics.median(values)
            for key in runs[0]
            if (values := [f[key] for f in runs if key in f])
        }
        for kind, runs in figures.items()
    }
    worst = {kind: max(f["downtime_s"] for f in runs) for kind, runs in figures.items()}
    goal = {
        kind: medians[kind]["downtime_s"] < GOAL_MEDIAN_S and worst[kind] < GOAL_WORST_S
        for kind in figures
    }
    print("\nmedians:", json.dumps(medians, indent=1))
    for kind in figures:
        print(
            f"{kind}: downtime median {medians[kind]['downtime_s']:.2f} s, worst "
            f"{worst[kind]:.2f} s: goal (< {GOAL_MEDIAN_S:g} s, < {GOAL_WORST_S:g} s) "
            f"{'met' if goal[kind] else 'MISSED'}"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"dr_downtime-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    result = {"runs": figures, "medians": medians, "worst_downtime_s": worst, "goal_met": goal}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {out}")
    return 0 if all(goal.values()) else 3


def _print_tasks(tasks: list[dict[str, Any]]) -> None:
    """Each task that ran, in start order: its scheduling gap and its duration."""
    started = sorted((t for t in tasks if t["start_date"]), key=lambda t: t["start_date"])
    previous_end = None
    for task in started:
        start = datetime.fromisoformat(task["start_date"])
        gap = (start - previous_end).total_seconds() if previous_end else 0.0
        print(
            f"  {task['task_id']:<18} {task['state']:<8} "
            f"gap {gap:5.2f} s  took {task['duration'] or 0.0:5.2f} s"
        )
        if task["end_date"]:
            previous_end = datetime.fromisoformat(task["end_date"])


def _figures(store: StateStore, kind: str, run_id: str) -> dict[str, float]:
    """The history's figures of DAG run `run_id` (procedure id `<dag>/<run id>`)."""
    procedure_id = f"{kind}/{run_id}"
    [record] = [
        r for r in store.runs.recent(kind, limit=20) if r.params.get("procedure_id") == procedure_id
    ]
    phases = record.details.get("phases") or {}
    return {
        "procedure_s": record.duration_seconds or 0.0,
        "downtime_s": record.downtime_seconds or 0.0,
        "rto_s": record.rto_seconds or 0.0,
        "rpo_records": float(record.rpo_records or 0),
        **{f"{name}_s": seconds for name, seconds in phases.items() if seconds is not None},
    }


if __name__ == "__main__":
    sys.exit(main())
