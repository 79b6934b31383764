"""The checks on each partition: the workers of the flow, the engine's own report on
the partition in the status topic, where replication resumes (the target's tail)
against the source log, and how far behind it is."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import KafkaException

from replicator.config.model import FlowConfig, shell_safe
from replicator.engine.internal_topics import STATUS_TOPIC
from replicator.engine.status import PartitionStatus, WorkerStatus, read_status
from replicator.engine.tail import TailReader
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer
from replicator.kafka.range_reads import range_reader
from replicator.kafka.watermarks import watermarks
from replicator.operations.diagnose.findings import (
    TIMEOUT_S,
    Finding,
    Findings,
    Subject,
    Unverifiable,
    unverifiable,
)

#: Workers publish their status every 10 s; one silent for longer than this is gone.
_WORKER_SILENT_S = 60.0
#: A stopped partition's status error is "<problem>. The partition is stopped (...). <fix>".
_STOPPED_ERROR = re.compile(
    r"(?P<problem>.*?The partition is stopped[^(]*\([^)]*\)\.)\s*(?P<fix>.+)"
)


def check_partitions(
    subject: Subject, findings: Findings, source_partitions: int, remote_partitions: int
) -> int:
    """Check each partition; return how many replicate with nothing wrong."""
    flow = subject.flow
    try:
        rows = read_status(flow.target, flow.name)
    except KafkaException as exc:
        raise unverifiable(
            exc,
            flow.target.alias,
            f"read {STATUS_TOPIC}",
            "READ",
            f"topic {STATUS_TOPIC}",
        ) from exc
    except ReplicatorError as exc:
        raise Unverifiable(
            Finding(
                "status",
                "problem",
                str(exc),
                f"make sure the principal may READ {STATUS_TOPIC} on "
                f"{flow.target.alias!r}, and that {flow.target.alias!r} is up",
            )
        ) from exc
    _workers(subject, findings, [r for r in rows if isinstance(r, WorkerStatus)])
    statuses = {
        r.partition: r for r in rows if isinstance(r, PartitionStatus) and r.topic == subject.topic
    }
    covered = 0
    with _offset_readers(flow) as (consumer, tail):
        for partition in range(source_partitions):
            try:
                # The tail first: the source's end only grows after it.
                replicated = (
                    tail.position(subject.remote, partition).next_source_offset
                    if partition < remote_partitions
                    else None
                )
                low, high = watermarks(consumer, subject.topic, partition, TIMEOUT_S)
            except ReplicatorError as exc:
                raise Unverifiable(
                    Finding(
                        "offsets",
                        "problem",
                        str(exc),
                        f"make sure the principal may DESCRIBE {subject.topic} on "
                        f"{flow.source.alias!r} and READ {subject.remote} on "
                        f"{flow.target.alias!r}, and that both clusters are up",
                        partition,
                    )
                ) from exc
            status = statuses.get(partition)
            # Where replication resumes: the tail, else where the worker stopped.
            position = replicated
            if position is None and status is not None:
                position = status.next_offset
            reported = _status(subject, findings, partition, status, replicated)
            if _offsets(subject, findings, partition, position, range(low, high)):
                _lag(subject, findings, partition, low if position is None else position, high)
                covered += reported
    return covered


def _workers(subject: Subject, findings: Findings, workers: list[WorkerStatus]) -> None:
    name = subject.flow.name
    running = [w for w in workers if w.is_live(_WORKER_SILENT_S)]
    if running:
        findings.add("workers", "ok", f"{len(running)} worker(s) of flow {name} running")
        return
    last = max(workers, key=lambda w: w.updated_ms, default=None)
    seen = (
        f"; last seen: worker {last.worker} {last.state}{': ' + last.error if last.error else ''}"
        if last
        else ""
    )
    findings.add(
        "workers",
        "warning",
        f"no worker of flow {name} reported running in the last {_WORKER_SILENT_S:.0f} s" + seen,
        f"start it: replicator run --config FILE --flow {shell_safe(name)}",
    )


def _status(
    subject: Subject,
    findings: Findings,
    partition: int,
    status: PartitionStatus | None,
    replicated: int | None,
) -> bool:
    """The engine's own report on the partition (a worker reports a partition
    every 10 s, a stop at once); True unless it is stopped or never replicated."""
    where = f"{subject.topic}[{partition}]"
    if status is None and replicated is not None:
        findings.add(
            "status",
            "ok",
            f"{where}: no status reported (yet), but {subject.remote} holds its records up "
            f"to source offset {replicated - 1}",
            partition=partition,
        )
        return True
    if status is None:
        findings.add(
            "status",
            "warning",
            f"{where}: never replicated (no replicator of flow {subject.flow.name} has "
            "reported on it)",
            f"start the replicator for flow {subject.flow.name}; it reports every partition "
            "it is assigned",
            partition,
        )
        return False
    if status.state == "stopped":
        detail, fix = _split_error(str(status.error), subject.flow.name)
        findings.add("status", "problem", detail, fix, partition)
        return False
    figures = (
        f"{where}: {status.state}, next offset {status.next_offset}, "
        f"{status.replicated} replicated since its worker took it"
    )
    losses = []
    if status.lost:
        losses.append(f"{status.lost} lost to retention (retention.gap.policy=skip)")
    if status.skipped:
        losses.append(f"{status.skipped} oversized (oversized.record.policy=skip)")
    if losses:
        detail = f"{figures}; records not replicated: {', '.join(losses)}"
        findings.add("status", "warning", detail, None, partition)
    else:
        findings.add("status", "ok", figures, None, partition)
    return True


def _offsets(
    subject: Subject, findings: Findings, partition: int, position: int | None, log: range
) -> bool:
    """Where replication resumes must lie within the source log (its offsets `log`)."""
    low, high = log.start, log.stop
    where = f"{subject.topic}[{partition}]"
    source, target = subject.flow.source.alias, subject.flow.target.alias
    if position is None:
        findings.add(
            "offsets",
            "ok",
            f"{where}: nothing replicated yet; replication starts at the log start {low}",
            partition=partition,
        )
        return True
    if position > high:
        findings.add(
            "offsets",
            "problem",
            f"{where}: resume offset {position} is beyond the source log end {high} on "
            f"{source!r}: {subject.topic} was deleted and recreated, or truncated",
            f"to replicate the new {subject.topic} from its start (offset {low}) after what "
            f"{subject.remote} holds, set topic.reset.policy=skip and restart; to start "
            f"{subject.remote} afresh, delete it on {target!r} and restart",
            partition,
        )
        return False
    if position < low:
        findings.add(
            "offsets",
            "problem",
            f"{where}: resume offset {position} is before the source log start {low} on "
            f"{source!r}: offsets {position}..{low - 1} ({low - position} records) were "
            "deleted by retention before they were replicated",
            f"to accept the loss, set retention.gap.policy=skip and restart (replication "
            f"continues at offset {low}); to avoid it, raise retention.ms of {subject.topic} "
            f"on {source!r} or keep the replicator from falling behind",
            partition,
        )
        return False
    findings.add(
        "offsets",
        "ok",
        f"{where}: resume offset {position} is within the source log (start {low}, end {high})",
        partition=partition,
    )
    return True


def _lag(subject: Subject, findings: Findings, partition: int, position: int, high: int) -> None:
    where = f"{subject.topic}[{partition}]"
    lag = max(0, high - position)
    if lag > subject.lag_threshold:
        findings.add(
            "lag",
            "warning",
            f"{where}: {lag} records behind (next to replicate {position}, source end "
            f"{high}), more than {subject.lag_threshold}",
            f"check that the replicator of flow {subject.flow.name} runs (replicator status); "
            "if it does, it is slower than the producers: raise tasks.max or start more "
            "workers",
            partition,
        )
    else:
        findings.add("lag", "ok", f"{where}: {lag} records behind", partition=partition)


@contextmanager
def _offset_readers(flow: FlowConfig) -> Iterator[tuple[Consumer, TailReader]]:
    """A consumer for source watermarks and a reader of the target's tails."""
    consumer = range_reader(flow.source.consumer, "diagnose", flow.source.alias)
    try:
        tail = TailReader(flow.target.consumer, flow.source.alias)
        try:
            yield consumer, tail
        finally:
            tail.close()
    finally:
        consumer.close()


def _split_error(error: str, flow: str) -> tuple[str, str]:
    """(problem, fix) of a stopped partition's status error, which holds both."""
    match = _STOPPED_ERROR.fullmatch(error)
    if match is None:
        return error, f"remove the cause named here, then restart the replicator of flow {flow}"
    return match["problem"], match["fix"]
