"""What Apache Kafka's MirrorMaker 2 translates a consumer group's offsets to, asked
of MM2 itself, to compare with the replicator's exact translation.

- `translate_offsets`: MM2's client library (`RemoteClusterUtils.translateOffsets`)
  reading the checkpoints on a cluster, through `include/jvm/interop/TranslateOffsets.java`;
- `mirror_maker_translation`: what MM2's checkpoint connector translates a group's
  committed offsets to, running MM2 (`mirrormaker.MirrorMaker`) on one topic and group
  until its checkpoints settle.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
import uuid
from collections.abc import Collection, Sequence
from pathlib import Path
from types import TracebackType
from typing import cast

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.engine.formats import Checkpoint
from replicator_lab.errors import StackError
from replicator_lab.jvm import artifact_classpath, find_java
from replicator_lab.mirrormaker import LOG_TAIL_LINES, ONE_BROKER, POLL_S, MirrorMaker

log = logging.getLogger(__name__)

TRANSLATE_OFFSETS_SOURCE = (
    Path(__file__).resolve().parents[2] / "include" / "jvm" / "interop" / "TranslateOffsets.java"
)
#: Cluster aliases of `mirror_maker_translation`: distinct from any the project's own
#: flows use, so MM2's topics (`mm2src.<topic>`, `mm2src.checkpoints.internal`,
#: `mm2-offset-syncs.mm2dst.internal`) never mix with the replicator's on shared clusters.
SOURCE_ALIAS = "mm2src"
TARGET_ALIAS = "mm2dst"


# -- MM2's client library: RemoteClusterUtils.translateOffsets -----------------------------------


def translate_offsets(
    bootstrap: str, source_alias: str, group: str, timeout_s: float = 30
) -> dict[tuple[str, int], int]:
    """What MM2's `RemoteClusterUtils.translateOffsets` returns for `group` from the
    checkpoints of `source_alias` on the cluster at `bootstrap`: (topic on that
    cluster, partition) -> offset. Empty if the group has no checkpoints there."""
    if not TRANSLATE_OFFSETS_SOURCE.is_file():
        raise StackError(
            f"{TRANSLATE_OFFSETS_SOURCE} not found; translate_offsets runs from a checkout "
            "of this project (include/jvm/interop/)"
        )
    command = [
        str(find_java()),
        "-Xmx256m",
        # A short-lived tool: the quick JIT tier alone starts and compiles faster.
        "-XX:TieredStopAtLevel=1",
        "-cp",
        artifact_classpath("kafka"),
        str(TRANSLATE_OFFSETS_SOURCE),
        "--bootstrap",
        bootstrap,
        "--source-alias",
        source_alias,
        "--group",
        group,
        "--timeout-ms",
        str(round(timeout_s * 1000)),
    ]
    # The JVM start and the in-memory compile of the source come on top of the timeout.
    wall_timeout = timeout_s + 60
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=wall_timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise StackError(
            f"TranslateOffsets.java for group {group!r} at {bootstrap} did not finish within "
            f"{wall_timeout:.0f} s"
        ) from exc
    if result.returncode != 0:
        stderr = "\n".join(result.stderr.strip().splitlines()[-LOG_TAIL_LINES:])
        raise StackError(
            f"TranslateOffsets.java for group {group!r}, source alias {source_alias!r} at "
            f"{bootstrap} exited with code {result.returncode}:\n{stderr}"
        )
    offsets: dict[tuple[str, int], int] = {}
    for line in result.stdout.splitlines():
        try:
            entry = json.loads(line)
            offsets[(entry["topic"], entry["partition"])] = entry["offset"]
        except (ValueError, KeyError, TypeError) as exc:
            raise StackError(
                f"TranslateOffsets.java printed {line!r}, not a JSON line with topic, "
                "partition and offset"
            ) from exc
    return offsets


# -- MM2's checkpoint connector: what it translates a group to -----------------------------------


def checkpoint_flow_properties(
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    group: str,
    run_id: str,
    *,
    source_alias: str = SOURCE_ALIAS,
    target_alias: str = TARGET_ALIAS,
) -> dict[str, str]:
    """mm2.properties replicating exactly `topic` and checkpointing exactly `group`.

    Translation is left at MM2's defaults (offset.lag.max = 100 and the 64-sync
    offset store), since the point is to record what MM2 really does; only the
    timers are short, so a checkpoint appears within seconds. Connect's state topics
    and worker group are named after the run, so no run resumes from another's state
    or waits for another's worker to leave.
    """
    flow = f"{source_alias}->{target_alias}"
    return {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source_bootstrap,
        f"{target_alias}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": re.escape(topic),
        f"{flow}.groups": re.escape(group),
        f"{target_alias}->{source_alias}.enabled": "false",
        # MM2's heartbeats go to the target's `heartbeats` topic, which the project's own
        # replicator writes too; they play no part in translation.
        "emit.heartbeats.enabled": "false",
        # Nor copy the source's `heartbeats` (MM2 copies them whatever `topics` says).
        "heartbeats.replication.enabled": "false",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "false",
        # The local clusters run without an authorizer.
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        **ONE_BROKER,
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        **connect_state_properties(target_alias, run_id),
    }


def connect_state_properties(target_alias: str, run_id: str) -> dict[str, str]:
    """Connect's state topics and worker group for one run of MM2 in dedicated mode.

    The worker of a flow takes its settings from its target cluster's (`<target>.`)
    properties; the state topics also from the unprefixed storage properties.
    """
    offsets, configs, status = connect_state_topics(run_id)
    return {
        "offset.storage.topic": offsets,
        "config.storage.topic": configs,
        "status.storage.topic": status,
        f"{target_alias}.group.id": f"mm2-{run_id}",
    }


def connect_state_topics(run_id: str) -> tuple[str, str, str]:
    """Connect's offset, config and status topics of one run, on the target cluster."""
    return (
        f"mm2-offsets.{run_id}.internal",
        f"mm2-configs.{run_id}.internal",
        f"mm2-status.{run_id}.internal",
    )


def mirror_maker_translation(
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    group: str,
    *,
    workdir: Path,
    partitions: Collection[int] | None = None,
    source_alias: str = SOURCE_ALIAS,
    target_alias: str = TARGET_ALIAS,
    timeout_s: float = 180.0,
    settle_s: float = 5.0,
    heap: str = "256m",
) -> dict[tuple[str, int], int]:
    """Run MM2 on `topic` and return its translation of `group`'s committed offsets:
    (remote topic on the target, partition) -> downstream offset, as its checkpoints
    say once they have settled.

    The group must have committed offsets for `topic` on the source. MM2 runs until
    the topic is copied, a checkpoint for each committed partition in `partitions`
    (default: all) carries the committed offset, and no newer checkpoint for the group
    came for `settle_s` (MM2 only ever raises a checkpoint's downstream offset, so the
    last is its best). MM2's log stays in `workdir`; its Connect state topics are
    deleted afterwards.

    MM2 never checkpoints an offset older than the oldest offset sync it kept, and it
    keeps only the latest sync of a partition whose syncs were written before its
    checkpoint task first read the syncs topic. Which of the two happens is a race
    between MM2's own tasks, so a partition committed at the start of the topic (offset
    0) may never get a checkpoint: leave such partitions out of `partitions`.
    """
    committed = _committed_offsets(source_bootstrap, group, topic)
    remote = f"{source_alias}.{topic}"
    wanted = {
        (remote, partition): offset
        for partition, offset in committed.items()
        if partitions is None or partition in partitions
    }
    run_id = f"{source_alias}-{uuid.uuid4().hex[:12]}"
    properties = checkpoint_flow_properties(
        source_bootstrap,
        target_bootstrap,
        topic,
        group,
        run_id,
        source_alias=source_alias,
        target_alias=target_alias,
    )
    deadline = time.monotonic() + timeout_s
    try:
        with MirrorMaker(properties, workdir, heap=heap) as mirror_maker:
            mirror_maker.wait_started(deadline - time.monotonic())
            _wait_copied(
                mirror_maker,
                source_bootstrap=source_bootstrap,
                target_bootstrap=target_bootstrap,
                topic=topic,
                remote=remote,
                deadline=deadline,
            )
            checkpoints_topic = f"{source_alias}.checkpoints.internal"
            with _CheckpointReader(target_bootstrap, checkpoints_topic) as reader:
                return _settled_checkpoints(
                    mirror_maker,
                    reader,
                    group=group,
                    wanted=wanted,
                    deadline=deadline,
                    settle_s=settle_s,
                )
    finally:
        _delete_topics(target_bootstrap, connect_state_topics(run_id))


def _committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        found = consumer.committed(
            [TopicPartition(topic, partition) for partition in partitions], timeout=10
        )
    finally:
        consumer.close()
    committed = {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    if not committed:
        raise StackError(
            f"group {group!r} has no committed offsets for topic {topic!r} at {bootstrap}; "
            "commit offsets for it before asking for MirrorMaker 2's translation"
        )
    return committed


def _end_offsets(admin: AdminClient, topic: str, partitions: Sequence[int]) -> list[int] | None:
    """High watermarks of `topic`, or None while it does not exist (yet)."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    try:
        futures = admin.list_offsets(request, request_timeout=5)
        return [futures[tp].result().offset for tp in request]
    except KafkaException:
        return None


def _wait_copied(
    mirror_maker: MirrorMaker,
    *,
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    remote: str,
    deadline: float,
) -> None:
    source_admin = AdminClient({"bootstrap.servers": source_bootstrap})
    partitions = sorted(source_admin.list_topics(topic, timeout=10).topics[topic].partitions)
    wanted = _end_offsets(source_admin, topic, partitions)
    target_admin = AdminClient({"bootstrap.servers": target_bootstrap})
    while (copied := _end_offsets(target_admin, remote, partitions)) != wanted:
        mirror_maker.raise_if_exited()
        if time.monotonic() > deadline:
            raise StackError(
                f"MirrorMaker 2 did not copy {topic} (end offsets {wanted}) to {remote} "
                f"(end offsets {copied}) in time; see its log:\n{mirror_maker.log_tail()}"
            )
        time.sleep(POLL_S)


class _CheckpointReader:
    """Reads a checkpoints topic from its start, picking up where the last read ended."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"checkpoint-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self._assigned = False

    def __enter__(self) -> _CheckpointReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._consumer.close()

    def read(self) -> list[Checkpoint]:
        """The checkpoints written since the last call; waits up to POLL_S for more
        (or, while MM2 has not created the topic yet, for it)."""
        if not self._assigned:
            metadata = self._consumer.list_topics(self.topic, timeout=10).topics[self.topic]
            if metadata.error is not None or not metadata.partitions:
                time.sleep(POLL_S)
                return []
            self._consumer.assign([TopicPartition(self.topic, 0, 0)])
            self._assigned = True
        checkpoints = []
        for message in self._consumer.consume(num_messages=10_000, timeout=POLL_S):
            if message.error() is not None:
                raise StackError(f"reading {self.topic}: {message.error()}")
            checkpoints.append(
                Checkpoint.decode(cast(bytes, message.key()), cast(bytes, message.value()))
            )
        return checkpoints


def _settled_checkpoints(
    mirror_maker: MirrorMaker,
    reader: _CheckpointReader,
    *,
    group: str,
    wanted: dict[tuple[str, int], int],
    deadline: float,
    settle_s: float,
) -> dict[tuple[str, int], int]:
    latest: dict[tuple[str, int], Checkpoint] = {}
    changed_at = time.monotonic()
    while True:
        for checkpoint in reader.read():
            key = (checkpoint.topic, checkpoint.partition)
            if checkpoint.group == group and latest.get(key) != checkpoint:
                latest[key] = checkpoint
                changed_at = time.monotonic()
        current = all(
            key in latest and latest[key].upstream == upstream for key, upstream in wanted.items()
        )
        if current and time.monotonic() - changed_at >= settle_s:
            return {key: checkpoint.downstream for key, checkpoint in latest.items()}
        mirror_maker.raise_if_exited()
        if time.monotonic() > deadline:
            seen = {key: (c.upstream, c.downstream) for key, c in latest.items()}
            raise StackError(
                f"MirrorMaker 2 wrote no settled checkpoint of group {group!r} for the committed "
                f"offsets {wanted} to {reader.topic} in time (seen (upstream, downstream): "
                f"{seen}); see its log:\n{mirror_maker.log_tail()}"
            )


def _delete_topics(bootstrap: str, topics: Sequence[str]) -> None:
    """Delete what exists of `topics`: MM2's Connect state is worthless after its run.

    A failure is only logged, so that it never hides the error that ended the run.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        existing = [t for t in topics if t in admin.list_topics(timeout=10).topics]
        if existing:
            for future in admin.delete_topics(existing, operation_timeout=30).values():
                future.result()
    except KafkaException as exc:
        log.warning(
            "could not delete MirrorMaker 2's state topics %s at %s: %s", topics, bootstrap, exc
        )
