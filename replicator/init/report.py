"""What `replicator init` found, step by step, and whether it all holds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Outcomes that leave the estate not ready: the command exits 1.
PROBLEMS = frozenset({"missing", "failed"})
OUTCOMES = ("ok", "done", "would", "unchecked", "missing", "failed")


@dataclass(frozen=True)
class Finding:
    """One observation: `step` (clusters, topics, permissions, state), the cluster it
    is about (None: the state store), an outcome of `OUTCOMES` and one line of text.

    ok: already as it should be; done: changed now; would: a dry run's change;
    unchecked: cannot be asked yet (the text says why); missing: a permission the
    principal lacks; failed: a step that could not be done (the text says the fix)."""

    step: str
    cluster: str | None
    outcome: str
    text: str

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is none of {OUTCOMES}")


@dataclass
class InitReport:
    dry_run: bool
    findings: list[Finding] = field(default_factory=list)

    def add(self, step: str, cluster: str | None, outcome: str, text: str) -> None:
        self.findings.append(Finding(step, cluster, outcome, text))

    @property
    def ready(self) -> bool:
        """No permission missing and no step failed."""
        return not any(f.outcome in PROBLEMS for f in self.findings)

    def counts(self) -> dict[str, int]:
        return {o: n for o in OUTCOMES if (n := sum(f.outcome == o for f in self.findings))}

    def summary(self) -> str:
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.counts().items())
        verdict = "ready" if self.ready else "NOT ready"
        mode = " (dry run: nothing was changed)" if self.dry_run else ""
        return f"{verdict}{mode}: {counts}"

    def as_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "findings": [asdict(f) for f in self.findings],
        }
