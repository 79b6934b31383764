"""One failover, failback or drill as a document for auditors.

Everything comes from the state store's history, so a report can be made at any
time after the run, by anyone who can read the store, without the clusters or
the configuration: the run (params, outcome, RPO, RTO, the procedure's duration
and the applications' downtime), who started it (recorded with its params) and
who answered its approval question (recorded by the orchestrator), each step
with its start, end and outcome (`replicator.procedures.steps.step_times`), a
non-disruptive drill's per-partition checks, a full drill's two halves, and the
first verification of the flow that started after the run ended (the suites'
verdict on what the procedure left behind).

`render` makes one self-contained HTML file of it (inline CSS, no script, no
external asset; a print stylesheet for PDF from a browser). The report is made
from the history whenever asked, so it is kept as long as the run is, and a
verification that ran after an earlier download shows in the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from replicator import __version__
from replicator.errors import ReplicatorError
from replicator.procedures.phases import describe as describe_phases
from replicator.procedures.steps import StepTime, decision_of, history_run, step_times
from replicator.statestore import NotFoundError, RunRecord, StateStore
from replicator.statestore.runs import RunStore

#: The kinds of run a report is made for (a verification has its Data Docs).
PROCEDURES = ("failover", "failback", "drill")
#: Rows of the drill's per-partition checks in the document; the history has them all.
MAX_CHECKS = 5000
#: How many verification runs are searched for the one that followed.
_VERIFICATIONS_SEARCHED = 500


@dataclass(frozen=True)
class Decision:
    """The answer to the approval question: "approved", "rejected" or "no answer"."""

    decision: str
    by: str | None
    at: str | None


@dataclass(frozen=True)
class RunReport:
    """What a report shows about one procedure run (`halves`: a full drill's
    failover and failback, each a report of its own)."""

    run: RunRecord
    procedure_id: str | None
    started_by: str | None
    decision: Decision | None
    steps: list[StepTime]
    #: The applications moved, or the consumer groups a non-disruptive drill checked.
    subjects: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    check_counts: dict[str, int] = field(default_factory=dict)
    halves: list[RunReport] = field(default_factory=list)
    verification: RunRecord | None = None
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def title(self) -> str:
        mode = f" ({self.run.mode})" if self.run.mode else ""
        return f"{self.run.kind.capitalize()}{mode} of {self.run.flow}"


def find_run(runs: RunStore, run_or_procedure_id: str) -> RunRecord:
    """The history run with this id, or the run of this procedure id (the Airflow
    form `<dag id>/<dag run id>` included). NotFoundError names both tries."""
    try:
        return runs.get(run_or_procedure_id)
    except NotFoundError:
        run = history_run(runs, run_or_procedure_id)
        if run is None:
            raise NotFoundError(
                f"no run and no procedure {run_or_procedure_id!r} in the state store {runs}; "
                "`replicator history` lists the runs with their ids"
            ) from None
        return run


def build_report(store: StateStore, run_or_procedure_id: str) -> RunReport:
    """The report of one failover, failback or drill; ReplicatorError for another
    kind of run (a verification's report is its Data Docs)."""
    run = find_run(store.runs, run_or_procedure_id)
    if run.kind not in PROCEDURES:
        raise ReplicatorError(
            f"run {run.run_id} is a {run.kind}; reports are made for "
            f"{', '.join(PROCEDURES)} runs (a verification's report is its Data Docs)"
        )
    return replace(_procedure_report(store, run), verification=_verification_after(store.runs, run))


def _procedure_report(store: StateStore, run: RunRecord) -> RunReport:
    procedure_id = run.params.get("procedure_id") or run.details.get("procedure_id")
    named = run.params.get("applications") or run.params.get("groups") or []
    if procedure_id is None:
        return RunReport(run, None, run.params.get("started_by"), None, [], subjects=named)
    answer = decision_of(store.runs, procedure_id)
    check = store.runs.step(procedure_id, "check")
    checks = check.result.get("partitions", []) if check and run.kind == "drill" else []
    return RunReport(
        run=run,
        procedure_id=procedure_id,
        started_by=run.params.get("started_by"),
        decision=None if answer is None else Decision(**answer),
        steps=step_times(store.runs, procedure_id),
        subjects=named or _found_groups(store.runs, procedure_id),
        checks=sorted(checks, key=_check_order),
        check_counts=check.result.get("counts", {}) if checks and check else {},
        halves=[_procedure_report(store, half) for half in _halves(store.runs, run, procedure_id)],
    )


def _found_groups(store: RunStore, procedure_id: str) -> list[str]:
    """A drill that names no group checks every group of the flow; its preflight
    recorded which, so the report names what was drilled."""
    preflight = store.step(procedure_id, "preflight")
    return list(preflight.result.get("groups", [])) if preflight else []


def _check_order(check: dict[str, Any]) -> tuple[str, str, int]:
    """Group, topic, partition: the drill records its checks in the order they finished."""
    return (
        str(check.get("group", "")),
        str(check.get("topic", "")),
        int(check.get("partition", -1)),
    )


def _halves(runs: RunStore, run: RunRecord, procedure_id: str) -> list[RunRecord]:
    """A full drill's failover and failback runs (run under `<drill id>.<half>`)."""
    if run.kind != "drill" or run.mode != "full":
        return []
    found = [history_run(runs, f"{procedure_id}.{half}") for half in ("failover", "failback")]
    return [half for half in found if half is not None]


def _verification_after(store: RunStore, run: RunRecord) -> RunRecord | None:
    """The first verification of the run's flow (or of its reverse) that started
    after the run ended: the suites' verdict on what the procedure left."""
    if run.finished_at is None or run.flow is None:
        return None
    source, _, target = run.flow.partition("->")
    flows = {run.flow, f"{target}->{source}"}
    after = [
        v
        for v in store.recent("verification", limit=_VERIFICATIONS_SEARCHED)
        if v.flow in flows and v.started_at >= run.finished_at
    ]
    return min(after, key=lambda v: v.started_at) if after else None


def render(report: RunReport) -> str:
    """The report as one HTML document with nothing to fetch (inline CSS, no script)."""
    return (
        _environment()
        .get_template("run_report.html.j2")
        .render(report=report, max_checks=MAX_CHECKS, version=__version__)
    )


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("replicator.reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["time"] = _time
    env.filters["figure"] = _figure
    env.filters["brief"] = _brief
    env.filters["phases"] = lambda details: describe_phases(details.get("phases") or {})
    return env


def _time(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _figure(value: float | None, unit: str = "") -> str:
    if value is None:
        return "not measured"
    return f"{value:g}{unit}"


def _brief(value: Any, limit: int = 12) -> str:
    """A step's report in a line or a few: lists longer than `limit`, and lists of
    records (a drill's positions: the checks table and the history have them), counted,
    not listed."""
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_brief(v, limit)}" for k, v in value.items()) or "—"
    if isinstance(value, list):
        if len(value) > limit or any(isinstance(v, dict) for v in value):
            return f"{len(value)} entries"
        return "[" + ", ".join(_brief(v, limit) for v in value) + "]"
    return "—" if value is None else str(value)
