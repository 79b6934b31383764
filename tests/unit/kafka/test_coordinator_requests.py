"""Coordinator-bound admin requests are never given a timeout that can expire while the
process lives (`replicator.kafka.coordinator.UNEXPIRED_S`), and `replicator run`'s own
packages send none.

librdkafka 2.16 aborts the process when such a request times out before its group's
coordinator answers and the answer comes after (issue #4605): `replicator run` died so
at 5,000 partitions, and `tests/integration/offsets/test_group_offsets_coordinator.py`
reproduces it. A new call with a short `request_timeout` would bring it back; this reads
the source with `ast` and names the call.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: The admin client's requests that go to a group's coordinator.
COORDINATOR_BOUND = frozenset(
    {
        "describe_consumer_groups",
        "delete_consumer_groups",
        "list_consumer_group_offsets",
        "alter_consumer_group_offsets",
    }
)
#: What `replicator run` runs: a process that lives for months sends none of them.
LONG_LIVED = ("replicator/engine", "replicator/offsets", "replicator/operations")


def _calls() -> list[tuple[Path, ast.Call]]:
    found = []
    for path in sorted((ROOT / "replicator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in COORDINATOR_BOUND
            ):
                found.append((path.relative_to(ROOT), node))
    return found


def _where(path: Path, call: ast.Call) -> str:
    return f"{path}:{call.lineno} {call.func.attr}"  # type: ignore[attr-defined]


def test_every_coordinator_bound_request_has_a_timeout_that_does_not_expire() -> None:
    calls = _calls()
    assert calls, "the scan found no call: has the admin client's API changed?"
    short = [
        _where(path, call)
        for path, call in calls
        if not any(
            keyword.arg == "request_timeout"
            and isinstance(keyword.value, ast.Name)
            and keyword.value.id == "UNEXPIRED_S"
            for keyword in call.keywords
        )
    ]
    assert not short, f"give these request_timeout=UNEXPIRED_S and a wait of their own: {short}"


def test_the_replicating_process_sends_no_coordinator_bound_request() -> None:
    sent = [_where(path, call) for path, call in _calls() if str(path).startswith(LONG_LIVED)]
    assert not sent, (
        f"read group states with ListGroups and locate coordinators with a consumer: {sent}"
    )
