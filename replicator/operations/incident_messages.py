"""What people are told about incidents: the findings of each source, and the
subject and text of a notice, written for an SRE woken at 3 a.m.: what is wrong,
where (flow, topic, partition), since when, why and how to fix it. The links (the
DR status page, the Airflow run) are the orchestrator's to add: it knows its URLs.

Nothing here reads secrets: a finding is built from what the supervisor, the
verification suites and the approval question already say, and those never hold
one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from replicator.config.model import shell_safe
from replicator.listing import first_of
from replicator.operations.health import Check, Problem
from replicator.operations.incidents import Finding, IncidentPolicy, Notice

#: What each supervisor check found, in a few words (the flow is added).
_CHECK_TITLES: dict[Check, str] = {
    "workers": "no live replicator worker",
    "stopped": "partitions stopped by their failure policy",
    "lag": "replication lag over its bound",
    "retention": "records lost to retention before they were replicated",
    "checkpoints": "consumer-group checkpoints stalled",
    "heartbeats": "heartbeats stalled: nothing gets through end to end",
    "unreadable": "the flow cannot be checked",
    "left stopped": "flow left stopped by a procedure that did not succeed",
}
#: How many failing rows of a verification suite a notice shows (the Data Docs have all).
_EXAMPLE_ROWS = 3


def problem_findings(problems: Sequence[Problem]) -> list[Finding]:
    """The supervisor's problems as findings: one per flow and check, listing every
    partition (or worker) it concerns with its fix."""
    grouped: dict[tuple[str, str], list[Problem]] = {}
    for problem in problems:
        grouped.setdefault((problem.flow, problem.check), []).append(problem)
    findings = []
    for (flow, check), found in grouped.items():
        title = _CHECK_TITLES.get(check, check)  # type: ignore[call-overload]
        where = "" if flow == "-" else f" on flow {flow}"
        count = f" ({len(found)} places)" if len(found) > 1 else ""
        findings.append(
            Finding(
                source="supervisor",
                scope=flow,
                kind=check,
                title=f"{title}{where}{count}",
                lines=tuple(f"{p.where}: {p.detail}\n  fix: {p.fix}" for p in found),
            )
        )
    return findings


def verification_finding(
    flow: str, run_id: str, summary: Mapping[str, Any], data_docs: str | None
) -> Finding | None:
    """A verification that found the copy wrong, suite by suite with a few of the
    failing rows (topic, partition, offsets); None when it passed."""
    if summary.get("success"):
        return None
    failed = {name: suite for name, suite in summary["suites"].items() if not suite["success"]}
    lines = [_suite_line(name, suite) for name, suite in failed.items()]
    lines.append(
        f"verification run {run_id}; every failing row: "
        f"{data_docs or 'the Data Docs of the run (DR status page)'}\n"
        f"  fix: find the cause with `replicator diagnose --config FILE --flow "
        f"{shell_safe(flow)} TOPIC` "
        "for a topic named above; a copy that lags behind (suite lag) catches up by itself "
        "once the replicator keeps up; verify again after the fix (DAG verify_replication)"
    )
    return Finding(
        source="verification",
        scope=flow,
        kind="copy",
        title=f"verification: the copy of flow {flow} is wrong "
        f"({', '.join(failed) or 'no suite passed'})",
        lines=tuple(lines),
    )


def _suite_line(name: str, suite: Mapping[str, Any]) -> str:
    parts = []
    for failure in suite["failed"]:
        rows = failure.get("rows") or []
        examples = first_of([_row(row) for row in rows], _EXAMPLE_ROWS, sep="; ")
        column = f" on column {failure['column']}" if failure.get("column") else ""
        shown = f", e.g. {examples}" if examples else ""
        parts.append(f"{failure['expectation']}{column} failed for {len(rows)} rows{shown}")
    return f"suite {name} ({suite.get('rows', '?')} rows checked): " + " | ".join(parts)


def _row(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in row.items())


def approval_finding(procedure_id: str, question: str, body: str, deadline: str) -> Finding:
    """A procedure that waits for a person's answer to `question`."""
    return Finding(
        source="approval",
        scope=procedure_id,
        kind="approval",
        title=f"{question} ({procedure_id} waits for approval)",
        lines=(f"answer by {deadline}; no answer by then counts as Reject", body.strip()),
    )


def notice_subject(notice: Notice) -> str:
    """One line: what changed, and what the incident is."""
    incident = notice.incident
    if notice.change == "opened":
        what = "APPROVAL NEEDED" if incident.source == "approval" else "PROBLEM"
    elif notice.change == "reminder":
        what = f"STILL OPEN for {duration(incident.last_seen_at - incident.opened_at)}"
    else:
        assert incident.resolved_at is not None  # a "resolved" notice is of a resolved incident
        after = f"after {duration(incident.resolved_at - incident.opened_at)}"
        if incident.source != "approval":
            what = f"RESOLVED {after}"
        elif (incident.resolution or "").startswith("no answer"):
            what = f"NO ANSWER {after}"
        else:
            what = f"ANSWERED {after} ({incident.resolution})"
    return f"[Kafka DR] {what}: {incident.title}"


def notice_text(notice: Notice, policy: IncidentPolicy) -> str:
    """The body as plain text: since when, each problem with its fix, and when
    people hear about the incident again."""
    incident = notice.incident
    since = timestamp(incident.opened_at)
    if notice.change == "resolved":
        assert incident.resolved_at is not None
        head = [
            f"Resolved at {timestamp(incident.resolved_at)}, open since {since}: "
            f"{incident.resolution}.",
            "What it was:",
        ]
    else:
        head = [f"Open since {since} (last seen {incident.last_seen_at:%H:%M:%S} UTC)."]
    scope = "run" if incident.source == "approval" else "flow"
    where = f"Source: {incident.source}, {scope} {incident.scope}, check {incident.kind}."
    lines = [f"- {line}" for line in incident.lines]
    return "\n".join([*head, *lines, "", where, cadence(incident.source, policy)])


def cadence(source: str, policy: IncidentPolicy) -> str:
    """When people hear about an incident: said in every notice, so nobody waits
    for a mail that will not come."""
    remind = (
        f", again every {duration(policy.remind_every)} while it stays open"
        if policy.remind_every
        else ""
    )
    if source == "approval":
        return f"Sent once when the question is asked{remind}, and once when it is answered."
    return (
        f"Sent once when the incident opens{remind}, and once when it is resolved "
        f"(its problem not seen for {duration(policy.resolve_after)})."
    )


def duration(span: timedelta) -> str:
    """A span as people say it: 45 s, 12 min, 4 h 5 min, 2 d 3 h."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        rest = minutes - hours * 60
        return f"{hours} h" + (f" {rest} min" if rest else "")
    rest = hours - days * 24
    return f"{days} d" + (f" {rest} h" if rest else "")


def timestamp(moment: datetime) -> str:
    """A moment as every notice shows it: UTC, to the second."""
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"
