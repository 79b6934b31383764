"""Offset reset of one topic of a flow, as a procedure: replicate part of it again
(rewind) or leave part of it out (skip), without MirrorMaker 2's hand-written
tombstones in Connect's offsets topic.

Steps: check (the flow replicates the topic, the partitions exist, the offset
is inside the source log; what each partition would move from and to), stop
the flow through the state store (a running task keeps its position in
memory), write the reset requests (`replicator.procedures.reset_requests`),
start the flow again (unless it was stopped before the procedure: then it stays
stopped, and the reset applies when someone starts it). The tasks apply each request when they
next take the partition, and only while nothing was replicated for it since
the request, so a rewind is never applied twice.

Dry run: the check, and what the other steps would do, writing nothing. The
history records the records the reset leaves unreplicated (skipped) as RPO.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.resets import ResetRequest
from replicator.engine.status import live_workers
from replicator.procedures.flows import preview_stop_flow, start_flow, stop_flow
from replicator.procedures.reset_requests import ResetTarget, ResetTo, plan_reset, request_reset
from replicator.procedures.steps import Procedure, Step, StepReport
from replicator.statestore import StateStore
from replicator.statestore.flow_states import RUNNING, STOPPED


class OffsetReset(Procedure):
    """Reset `topic` of `flow` ("A->B") to `to` (all partitions, or `partitions`)."""

    kind = "offset_reset"
    recovery_step = "start_flow"

    #: Always set here (Procedure's default is None).
    timeout_s: float

    def __init__(
        self,
        config: ReplicatorConfig,
        flow: str,
        topic: str,
        to: ResetTarget,
        store: StateStore,
        *,
        partitions: Iterable[int] | None = None,
        dry_run: bool = False,
        timeout_s: float = 120.0,
    ) -> None:
        super().__init__(store, dry_run=dry_run)
        self.flow: FlowConfig = config.flow(flow)
        self.topic = topic
        self.to = ResetTo.parse(to)
        self.partitions = None if partitions is None else sorted(set(partitions))
        self.timeout_s = timeout_s

    # -- Procedure -----------------------------------------------------------------

    def steps(self) -> list[Step]:
        return [
            Step("check", self._check),
            Step("stop_flow", self._stop_flow, self._preview_stop_flow),
            Step("request", self._request, self._preview_request),
            Step("start_flow", self._start_flow, self._preview_start_flow),
        ]

    def params(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "topic": self.topic,
            "to": {"kind": self.to.kind, "value": self.to.value},
            "partitions": self.partitions,
        }

    def flow_name(self) -> str:
        return self.flow.name

    def mode(self) -> str:
        return self.to.kind

    def rpo(self) -> int | None:
        """Source records the reset leaves unreplicated (a skip), once requested."""
        report = self.reported("request")
        return None if report is None else int(report["skipped"])

    # -- steps ---------------------------------------------------------------------

    def _plan(self) -> list[ResetRequest]:
        return plan_reset(
            self.flow, self.topic, self.to, self.partitions, requested_by=self.procedure_id
        )

    def _check(self) -> StepReport:
        """Validate and preview against the tail as it is now (it still moves while
        the flow runs: the request step resolves again once the flow is stopped)."""
        state = self.store.flows.get(self.flow.name)
        return {
            "topic": self.topic,
            "to": str(self.to),
            "flow_state_before": RUNNING if state is None else state.state,
            "running_workers": [w.worker for w in live_workers(self.flow)],
            **_summary(self._plan()),
        }

    def _stop_flow(self) -> StepReport:
        return stop_flow(self.store.flows, self.flow, self.procedure_id, self.timeout_s)

    def _preview_stop_flow(self) -> StepReport:
        return preview_stop_flow(self.flow)

    def _request(self) -> StepReport:
        requests = request_reset(
            self.flow, self.topic, self.to, self.partitions, requested_by=self.procedure_id
        )
        return _summary(requests)

    def _preview_request(self) -> StepReport:
        return {"would_request": True, **_summary(self._plan())}

    def _left_stopped(self) -> bool:
        stopped: bool = self.report("check")["flow_state_before"] == STOPPED
        return stopped

    def _start_flow(self) -> StepReport:
        if self._left_stopped():
            return {
                "flow": self.flow.name,
                "state": STOPPED,
                "note": "the flow was stopped before the reset, so it stays stopped; the "
                "reset applies when it is started",
            }
        return start_flow(self.store.flows, self.flow.name, self.procedure_id)

    def _preview_start_flow(self) -> StepReport:
        stays = self._left_stopped()
        return {"flow": self.flow.name, "would_set": STOPPED if stays else RUNNING}


def _summary(requests: list[ResetRequest]) -> StepReport:
    copied_again = sum(r.copied_again for r in requests)
    skipped = sum(r.skipped for r in requests)
    notes = []
    if copied_again:
        notes.append(
            f"{copied_again} records will be copied again: the target will hold their "
            "source offsets twice"
        )
    if skipped:
        notes.append(f"{skipped} records will be skipped: they are never replicated")
    return {
        "partitions": [r.report() for r in requests],
        "copied_again": copied_again,
        "skipped": skipped,
        "summary": "; ".join(notes) or "no partition moves",
    }
