"""A resume point outside the source log, and what the failure policies say to do.

Below the log start, retention deleted records before they were replicated
(`retention.gap.policy`); beyond the log end, the source topic was deleted and
recreated or truncated (`topic.reset.policy`). The consumer never jumps by itself
(`auto.offset.reset=error`): a silent jump would hide the loss, so the operator's
policy decides, and the message says what each choice means for this partition.
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.config.model import FlowConfig


@dataclass(frozen=True)
class OutsideLog:
    """The resume point is outside the source log; `setting` says what to do."""

    setting: str  # "retention.gap.policy" or "topic.reset.policy"
    skip: bool  # the policy is `skip`: go on at `new_position`; else stop the partition
    new_position: int  # the source log start
    #: Records deleted before they were replicated (a retention gap), else 0.
    lost: int
    #: The ERRORS metric's kind: "retention_gap" or "topic_reset".
    error: str
    problem: str
    fix: str

    @property
    def stop_message(self) -> str:
        return f"{self.problem}. The partition is stopped ({self.setting}=fail). {self.fix}"


def outside_log(
    flow: FlowConfig, topic: str, partition: int, remote: str, *, position: int, low: int, high: int
) -> OutsideLog | None:
    """Whether `position` of `topic[partition]` (replicated to `remote`) is outside the
    source log `low..high`, and what to do; None when it is inside."""
    where = f"{topic}[{partition}]"
    source = flow.source.alias
    if position < low:
        lost = low - position
        return OutsideLog(
            "retention.gap.policy",
            flow.retention_gap_policy == "skip",
            low,
            lost,
            "retention_gap",
            f"{where}: offsets {position}..{low - 1} ({lost} records) were deleted from "
            f"{source!r} before they were replicated",
            f"To accept the loss, set retention.gap.policy=skip and restart: replication "
            f"continues at offset {low}. Otherwise leave it stopped and find out why "
            f"retention on {source!r} outran the replicator",
        )
    if position > high:
        return OutsideLog(
            "topic.reset.policy",
            flow.topic_reset_policy == "skip",
            low,
            0,
            "topic_reset",
            f"{where}: resume offset {position} is beyond the source log end {high}; "
            "the source topic was deleted and recreated or truncated",
            f"To replicate the source partition from its start (offset {low}) after the "
            f"records already in {remote}, set topic.reset.policy=skip and restart; "
            f"to start {remote} afresh instead, delete it on {flow.target.alias!r} and restart",
        )
    return None
