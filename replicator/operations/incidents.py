"""Incidents: one notice when a problem appears, not one every minute.

The supervisor runs every minute and verification every hour, and each run finds
its problems afresh. Telling someone on every run would page an SRE sixty times
an hour for one lag; telling them only the first time would hide that it went
away. So problems are grouped into incidents, one per source, scope and kind
("lag over its bound on flow primary->dr", "the copy of flow primary->dr is
wrong", "failover X waits for approval"), and each incident gives:

- one notice when it opens;
- a reminder every `IncidentPolicy.remind_every` while it stays open (None: never);
- one notice when it is resolved: its problem was not seen for
  `IncidentPolicy.resolve_after` (so lag hovering around its bound stays one
  incident instead of opening and closing every minute);
- a new incident, and a new notice, when the problem comes back after that.

The incidents live in the DR state store, shared by every scheduler and kept
across restarts. `decide` is the decision, pure (no database, no clock);
`track` runs it inside one store transaction, which claims the notices it
returns, so two runs never both send one. A notice that could not be delivered
is `release`d: the next run claims it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from replicator.statestore.incidents import IncidentStore
from replicator.statestore.records import Incident

Source = Literal["supervisor", "verification", "approval"]
Change = Literal["opened", "reminder", "resolved"]


@dataclass(frozen=True)
class IncidentPolicy:
    """How often an open incident is told again, and how long its problem must stay
    away before it is resolved."""

    remind_every: timedelta | None = timedelta(hours=4)
    resolve_after: timedelta = timedelta(minutes=5)


@dataclass(frozen=True)
class Finding:
    """One problem seen now: what an incident is opened for, or kept open by."""

    source: Source
    #: The flow (the supervisor's "-" for a worker of no known flow), or the
    #: procedure id of an approval.
    scope: str
    #: The check ("lag", "stopped", ..., "copy", "approval").
    kind: str
    #: What, in a few words, naming the scope: the notice's subject.
    title: str
    #: Each problem on its own line: where, what, and the fix.
    lines: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.source}/{self.scope}/{self.kind}"


@dataclass(frozen=True)
class Notice:
    """Something to tell people about `incident` (as stored after the change)."""

    change: Change
    incident: Incident
    #: What had been delivered before this notice was claimed, restored by `release`.
    previous: tuple[str | None, datetime | None]

    @property
    def claimed_at(self) -> datetime:
        assert self.incident.notified_at is not None  # a notice is claimed when made
        return self.incident.notified_at


@dataclass(frozen=True)
class Decision:
    """The incidents to write, and the notices claimed by writing them."""

    incidents: list[Incident]
    notices: list[Notice]


def decide(
    current: Sequence[Incident],
    findings: Iterable[Finding],
    now: datetime,
    policy: IncidentPolicy,
    resolution: str | None = None,
) -> Decision:
    """What changes, given the incidents of the scope a run looked at (`current`)
    and what it found there now (`findings`): open, keep open (maybe remind),
    resolve; a notice for each change worth telling, or left undelivered before.
    `resolution` says how a resolved incident ended (default: when its problem was
    last seen)."""
    known = {incident.key: incident for incident in current}
    seen = {finding.key: finding for finding in findings}
    incidents: list[Incident] = []
    notices: list[Notice] = []

    def change(incident: Incident, notice: Change | None) -> None:
        if notice is not None:
            previous = (incident.notified, incident.notified_at)
            incident = replace(incident, notified=notice, notified_at=now)
            notices.append(Notice(notice, incident, previous))
        incidents.append(incident)

    for key, finding in seen.items():
        incident = known.get(key)
        if incident is None or not incident.open:
            change(_opened(finding, now), "opened")
            continue
        kept = replace(incident, title=finding.title, lines=finding.lines, last_seen_at=now)
        change(kept, _still_open_notice(incident, now, policy))
    for key, incident in known.items():
        if key in seen:
            continue
        if incident.open and now - incident.last_seen_at >= policy.resolve_after:
            why = resolution or f"not seen since {incident.last_seen_at:%Y-%m-%d %H:%M:%S} UTC"
            change(replace(incident, resolved_at=now, resolution=why), "resolved")
        elif not incident.open and incident.notified != "resolved":
            change(incident, "resolved")  # its resolution was not delivered: again
    return Decision(incidents, notices)


def _opened(finding: Finding, now: datetime) -> Incident:
    return Incident(
        key=finding.key,
        source=finding.source,
        scope=finding.scope,
        kind=finding.kind,
        title=finding.title,
        lines=finding.lines,
        opened_at=now,
        last_seen_at=now,
        resolved_at=None,
        resolution=None,
        notified=None,
        notified_at=None,
    )


def _still_open_notice(incident: Incident, now: datetime, policy: IncidentPolicy) -> Change | None:
    """An open incident seen again: its opening again if that was never delivered,
    a reminder when one is due, else nothing."""
    if incident.notified is None or incident.notified_at is None:
        return "opened"
    if policy.remind_every is not None and now - incident.notified_at >= policy.remind_every:
        return "reminder"
    return None


def track(
    store: IncidentStore,
    source: Source,
    scope: str | None,
    findings: Sequence[Finding],
    *,
    policy: IncidentPolicy,
    resolution: str | None = None,
) -> list[Notice]:
    """Record what a run of `source` found in `scope` (None: everything `source`
    checks) and claim the notices due; deliver them, or `release` those that
    could not be."""
    foreign = [f.key for f in findings if f.source != source or scope not in (None, f.scope)]
    if foreign:
        raise ValueError(f"findings {foreign} are not of {source} in scope {scope!r}")
    now = datetime.now(UTC)

    def decision(current: list[Incident]) -> tuple[list[Incident], list[Notice]]:
        made = decide(current, findings, now, policy, resolution)
        return made.incidents, made.notices

    return store.update(source, scope, decision)


def release(store: IncidentStore, notice: Notice) -> None:
    """Hand back a notice that could not be delivered: the next run claims it again."""
    notified, notified_at = notice.previous
    store.release_notice(notice.incident.key, notice.claimed_at, notified, notified_at)
