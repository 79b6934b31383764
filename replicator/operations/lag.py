"""How far behind a flow's copy is, per partition, measured from the data.

The supervisor alerts on it, the lag sensor and trigger wait on it. Both need
the same number an operator would compute by hand: the source's end offset
minus the next source offset the target holds (the target tail is the truth,
see `replicator.procedures.positions`), not the figure a worker last
published: a dead worker publishes nothing, and its last report says "no lag"
for ever.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError
from replicator.procedures.positions import PartitionProgress, current_progress, worst


@dataclass(frozen=True)
class LagReport:
    """Every partition of a flow (or of some of its topics) with its lag in records."""

    flow: str
    partitions: list[PartitionProgress]

    @property
    def max_behind(self) -> int:
        return max((p.behind for p in self.partitions), default=0)

    @property
    def total_behind(self) -> int:
        return sum(p.behind for p in self.partitions)

    def over(self, max_lag: int) -> list[PartitionProgress]:
        """The partitions more than `max_lag` records behind."""
        return [p for p in self.partitions if p.behind > max_lag]

    def describe(self, max_lag: int) -> str:
        """One line for logs and errors: caught up, or the partitions furthest behind."""
        over = self.over(max_lag)
        if not over:
            return (
                f"flow {self.flow}: {len(self.partitions)} partitions, at most "
                f"{self.max_behind} records behind (bound {max_lag})"
            )
        return (
            f"flow {self.flow}: {len(over)} of {len(self.partitions)} partitions more than "
            f"{max_lag} records behind: {worst(over)}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "flow": self.flow,
            "max_behind": self.max_behind,
            "total_behind": self.total_behind,
            "partitions": [asdict(p) for p in self.partitions],
        }


def measure_lag(flow: FlowConfig, topics: list[str] | None = None) -> LagReport:
    """The lag of every partition of `flow`'s topics (or of `topics`, source names),
    heartbeats left out. Needs both clusters."""
    partitions = current_progress(flow)
    if topics:
        known = {p.topic for p in partitions}
        unknown = sorted(set(topics) - known)
        if unknown:
            raise ReplicatorError(
                f"flow {flow.name} does not replicate {', '.join(unknown)} (it replicates "
                f"{', '.join(sorted(known)) or 'nothing yet'}); check the topic names "
                "(as on the source cluster) and the flow's topics filter"
            )
        partitions = [p for p in partitions if p.topic in topics]
    return LagReport(flow.name, partitions)
