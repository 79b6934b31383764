"""When to try again something that keeps failing for a reason that passes (a
cluster that is away, a worker that failed): soon at first, then less and less
often up to a ceiling, for as long as it takes. Never blocks: the caller asks
`due()` from its own loop, which keeps doing its other work meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    """Exponential backoff without sleeping: `first_s`, then doubling to `max_s`."""

    first_s: float
    max_s: float
    delay_s: float = 0.0
    next_at: float = 0.0
    #: When the current run of failures began (None: the last attempt succeeded).
    since: float | None = None

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def failed(self, now: float) -> bool:
        """Note a failed attempt at `now`; True if it is the first of a run."""
        first = self.since is None
        if first:
            self.since = now
        self.delay_s = min(self.max_s, max(self.first_s, 2 * self.delay_s))
        self.next_at = now + self.delay_s
        return first

    def succeeded(self, now: float) -> float | None:
        """Note a success at `now`; how long the failures before it lasted, if any."""
        since, self.since, self.delay_s, self.next_at = self.since, None, 0.0, 0.0
        return None if since is None else now - since
