"""The incident decision without a database or Airflow: a problem seen every minute
is told once when it opens, not again every minute, a reminder only after the
policy's interval, once when it resolves (only after it stayed away long enough),
and again as a new incident when it comes back; a notice that was not delivered is
told again. And what the notices say, for the supervisor, a verification and an
approval."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from replicator.operations.health import Problem
from replicator.operations.incident_messages import (
    approval_finding,
    duration,
    notice_subject,
    notice_text,
    problem_findings,
    verification_finding,
)
from replicator.operations.incidents import Finding, IncidentPolicy, Notice, decide
from replicator.statestore.records import Incident

T0 = datetime(2026, 11, 25, 2, 14, 7, tzinfo=UTC)
POLICY = IncidentPolicy(remind_every=timedelta(hours=4), resolve_after=timedelta(minutes=5))
LAG = Problem(
    "primary->dr",
    "lag",
    "topic orders partition 3",
    "5234 records behind on 'dr' (bound 1000)",
    "find out why the replicator falls behind: replicator diagnose --config FILE "
    "--flow primary->dr orders",
)


class Minutes:
    """The incidents table of one scope as the store would keep it, run after run,
    one supervisor run per minute."""

    def __init__(self, policy: IncidentPolicy = POLICY) -> None:
        self.policy = policy
        self.rows: dict[str, Incident] = {}
        self.minute = 0

    def run(self, findings: Sequence[Finding], at_minute: int | None = None) -> list[Notice]:
        self.minute = self.minute + 1 if at_minute is None else at_minute
        now = T0 + timedelta(minutes=self.minute)
        made = decide(list(self.rows.values()), findings, now, self.policy)
        self.rows.update({incident.key: incident for incident in made.incidents})
        return made.notices


def _changes(notices: list[Notice]) -> list[tuple[str, str]]:
    return [(n.change, n.incident.key) for n in notices]


def test_a_problem_seen_every_minute_is_told_once_then_resolved_once() -> None:
    minutes = Minutes()
    lag = problem_findings([LAG])

    first = minutes.run(lag)
    assert _changes(first) == [("opened", "supervisor/primary->dr/lag")]
    assert first[0].incident.opened_at == T0 + timedelta(minutes=1)
    for _ in range(59):  # an hour of the same lag: not a word
        assert minutes.run(lag) == []
    # Gone, but not for long enough yet: still open, nothing said.
    for _ in range(4):
        assert minutes.run([]) == []
    [resolved] = minutes.run([])
    assert resolved.change == "resolved"
    assert resolved.incident.resolved_at == T0 + timedelta(minutes=65)
    assert resolved.incident.opened_at == T0 + timedelta(minutes=1)
    assert resolved.incident.resolution == "not seen since 2026-11-25 03:14:07 UTC"
    for _ in range(10):  # resolved stays resolved, silently
        assert minutes.run([]) == []


def test_lag_hovering_around_its_bound_stays_one_incident() -> None:
    minutes = Minutes()
    lag = problem_findings([LAG])
    notices = [n for minute in range(30) for n in minutes.run(lag if minute % 2 == 0 else [])]
    assert _changes(notices) == [("opened", "supervisor/primary->dr/lag")]


def test_a_problem_back_after_its_resolution_is_a_new_incident() -> None:
    minutes = Minutes(IncidentPolicy(remind_every=None, resolve_after=timedelta(0)))
    lag = problem_findings([LAG])
    assert _changes(minutes.run(lag)) == [("opened", "supervisor/primary->dr/lag")]
    assert _changes(minutes.run([])) == [("resolved", "supervisor/primary->dr/lag")]
    [again] = minutes.run(lag)
    assert again.change == "opened"
    assert again.incident.opened_at == T0 + timedelta(minutes=3)
    assert again.incident.resolved_at is None and again.incident.resolution is None


def test_a_reminder_only_after_the_interval_and_none_when_off() -> None:
    minutes = Minutes()
    lag = problem_findings([LAG])
    minutes.run(lag, at_minute=0)
    assert minutes.run(lag, at_minute=239) == []
    [reminder] = minutes.run(lag, at_minute=240)
    assert reminder.change == "reminder"
    assert notice_subject(reminder).startswith("[Kafka DR] STILL OPEN for 4 h: ")
    assert minutes.run(lag, at_minute=300) == []
    assert _changes(minutes.run(lag, at_minute=480)) == [("reminder", "supervisor/primary->dr/lag")]

    quiet = Minutes(IncidentPolicy(remind_every=None))
    quiet.run(lag, at_minute=0)
    assert quiet.run(lag, at_minute=10_000) == []


def test_each_flow_and_check_is_an_incident_of_its_own() -> None:
    minutes = Minutes()
    stopped = Problem("primary->dr", "stopped", "topic orders partition 1", "stopped", "restart")
    other = Problem("backup->dr", "lag", "topic pay partition 0", "900 behind", "wait")
    assert sorted(_changes(minutes.run(problem_findings([LAG, stopped, other])))) == [
        ("opened", "supervisor/backup->dr/lag"),
        ("opened", "supervisor/primary->dr/lag"),
        ("opened", "supervisor/primary->dr/stopped"),
    ]
    # More partitions lagging on the same flow: the same incident, its lines updated.
    lag_7 = Problem("primary->dr", "lag", "topic orders partition 7", "2000 behind", "wait")
    assert minutes.run(problem_findings([LAG, lag_7, stopped, other])) == []
    assert len(minutes.rows["supervisor/primary->dr/lag"].lines) == 2
    minutes.run(problem_findings([LAG, other]), at_minute=20)
    assert minutes.rows["supervisor/primary->dr/stopped"].resolved_at is not None
    assert minutes.rows["supervisor/primary->dr/lag"].open


def test_a_notice_not_delivered_is_told_again_next_run() -> None:
    """`release` restores what was delivered before the claim: the next run sees it."""
    minutes = Minutes(IncidentPolicy(remind_every=None, resolve_after=timedelta(0)))
    lag = problem_findings([LAG])
    [opened] = minutes.run(lag)
    assert opened.previous == (None, None)
    key = opened.incident.key
    minutes.rows[key] = _released(opened)
    [again] = minutes.run(lag)
    assert again.change == "opened"
    assert again.incident.opened_at == opened.incident.opened_at  # the same incident
    assert minutes.run(lag) == []

    [resolved] = minutes.run([])
    minutes.rows[key] = _released(resolved)
    assert _changes(minutes.run([])) == [("resolved", key)]
    assert minutes.run([]) == []


def _released(notice: Notice) -> Incident:
    notified, notified_at = notice.previous
    return replace(notice.incident, notified=notified, notified_at=notified_at)


def test_the_supervisor_notice_says_what_where_since_when_and_the_fix() -> None:
    minutes = Minutes()
    [opened] = minutes.run(problem_findings([LAG]))
    assert notice_subject(opened) == (
        "[Kafka DR] PROBLEM: replication lag over its bound on flow primary->dr"
    )
    body = notice_text(opened, POLICY)
    assert "Open since 2026-11-25 02:15:07 UTC" in body
    assert "- topic orders partition 3: 5234 records behind on 'dr' (bound 1000)" in body
    assert "  fix: find out why the replicator falls behind" in body
    assert "check lag" in body and "flow primary->dr" in body
    assert "every 4 h while it stays open" in body and "not seen for 5 min" in body

    assert minutes.run(problem_findings([LAG]), at_minute=70) == []
    [resolved] = minutes.run([], at_minute=76)
    assert notice_subject(resolved) == (
        "[Kafka DR] RESOLVED after 1 h 15 min: replication lag over its bound on flow primary->dr"
    )
    assert "Resolved at 2026-11-25 03:30:07 UTC, open since 2026-11-25 02:15:07 UTC" in (
        notice_text(resolved, POLICY)
    )


def test_a_failed_verification_names_suites_rows_and_data_docs() -> None:
    summary = {
        "success": False,
        "suites": {
            "parity": {
                "success": False,
                "rows": 12,
                "failed": [
                    {
                        "expectation": "expect_column_values_to_be_between",
                        "column": "missing",
                        "rows": [{"topic": "orders", "partition": p} for p in range(5)],
                    }
                ],
            },
            "lag": {"success": True, "rows": 12, "failed": []},
        },
    }
    docs = "http://airflow:8080/dr-status/runs/verify-1/data-docs/index.html"
    finding = verification_finding("primary->dr", "verify-1", summary, docs)
    assert finding is not None and finding.key == "verification/primary->dr/copy"
    assert finding.title == "verification: the copy of flow primary->dr is wrong (parity)"
    assert finding.lines[0] == (
        "suite parity (12 rows checked): expect_column_values_to_be_between on column "
        "missing failed for 5 rows, e.g. topic orders, partition 0; topic orders, "
        "partition 1; topic orders, partition 2 and 2 more"
    )
    assert docs in finding.lines[1] and "replicator diagnose" in finding.lines[1]
    assert verification_finding("primary->dr", "verify-2", {"success": True}, None) is None


def test_an_approval_notice_asks_and_its_answer_ends_it() -> None:
    minutes = Minutes(IncidentPolicy(remind_every=None, resolve_after=timedelta(0)))
    asked = approval_finding(
        "failover/manual__1", "Fail ['demo'] over?", "Approve to fence", "2026-11-25 02:45 UTC"
    )
    [opened] = minutes.run([asked])
    assert notice_subject(opened) == (
        "[Kafka DR] APPROVAL NEEDED: Fail ['demo'] over? (failover/manual__1 waits for approval)"
    )
    assert "answer by 2026-11-25 02:45 UTC" in notice_text(opened, POLICY)
    made = decide(
        list(minutes.rows.values()), [], T0 + timedelta(minutes=9), POLICY, "approved by alice"
    )
    [answered] = made.notices
    assert notice_subject(answered).startswith(
        "[Kafka DR] ANSWERED after 8 min (approved by alice): Fail"
    )
    assert "approved by alice" in notice_text(answered, POLICY)
    timed_out = decide(
        list(minutes.rows.values()), [], T0 + timedelta(minutes=31), POLICY, "no answer"
    )
    assert notice_subject(timed_out.notices[0]).startswith("[Kafka DR] NO ANSWER after 30 min: ")


def test_durations_read_as_people_say_them() -> None:
    assert [duration(timedelta(seconds=s)) for s in (45, 720, 3600, 14_700, 86_400, 183_600)] == [
        "45 s",
        "12 min",
        "1 h",
        "4 h 5 min",
        "1 d",
        "2 d 3 h",
    ]
