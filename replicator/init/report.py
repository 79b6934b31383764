"""What `replicator init` found, step by step, and its verdict: ready, partial (every
cluster that answered is ready, some did not answer) or not ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Outcomes that leave the estate not ready: the command exits 1.
PROBLEMS = frozenset({"missing", "failed"})
#: A cluster that did not answer (no connection, no answer in time): the command did
#: what it could on the others and exits `EXIT_PARTIAL` (0 with --allow-unreachable).
UNREACHABLE = "unreachable"
OUTCOMES = ("ok", "done", "would", "unchecked", UNREACHABLE, "missing", "failed")

#: Exit statuses of `replicator init` (docs/own-clusters.md, "Exit statuses").
EXIT_READY, EXIT_NOT_READY, EXIT_PARTIAL = 0, 1, 3


@dataclass(frozen=True)
class Finding:
    """One observation: `step` (clusters, topics, permissions, state), the cluster it
    is about (None: the state store), an outcome of `OUTCOMES` and one line of text.

    ok: already as it should be; done: changed now; would: a dry run's change;
    unchecked: cannot be asked yet (the text says why); unreachable: a cluster that
    did not answer (an outage or a wrong address: the text says which, why and the
    fix); missing: a permission the principal lacks; failed: a step that could not be
    done (the text says the fix)."""

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
    def unreachable(self) -> list[str]:
        """The clusters that did not answer, by alias."""
        return sorted({f.cluster for f in self.findings if f.outcome == UNREACHABLE and f.cluster})

    @property
    def failed(self) -> bool:
        """A permission is missing or a step failed: a real problem, whatever answered."""
        return any(f.outcome in PROBLEMS for f in self.findings)

    @property
    def ready(self) -> bool:
        """Every cluster answered, no permission is missing and no step failed."""
        return not self.failed and not self.unreachable

    @property
    def partial(self) -> bool:
        """Nothing failed on what answered, but some clusters did not answer."""
        return not self.failed and bool(self.unreachable)

    @property
    def verdict(self) -> str:
        return "ready" if self.ready else "partial" if self.partial else "not ready"

    def exit_status(self, *, allow_unreachable: bool = False) -> int:
        """0 ready; 1 not ready (a real problem); 3 partial (0 with `allow_unreachable`)."""
        if self.failed:
            return EXIT_NOT_READY
        if self.unreachable and not allow_unreachable:
            return EXIT_PARTIAL
        return EXIT_READY

    def counts(self) -> dict[str, int]:
        return {o: n for o in OUTCOMES if (n := sum(f.outcome == o for f in self.findings))}

    def summary(self) -> str:
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.counts().items())
        mode = " (dry run: nothing was changed)" if self.dry_run else ""
        if self.partial:
            return (
                f"PARTIAL{mode}: {counts}; did not answer: {', '.join(self.unreachable)} "
                "(their topics and permissions are unchecked: run `replicator init` again "
                "when they answer)"
            )
        verdict = "ready" if self.ready else "NOT ready"
        return f"{verdict}{mode}: {counts}"

    def as_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "verdict": self.verdict,
            "unreachable": self.unreachable,
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "findings": [asdict(f) for f in self.findings],
        }
