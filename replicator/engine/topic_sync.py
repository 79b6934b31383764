"""Which source topics a flow replicates, and keeping their remote topics in shape.

Remote topics are created with the source's partition count and the flow's
`replication.factor`, grow when the source grows, and carry the source's
non-default topic configs minus `config.properties.exclude`. `max.message.bytes`
is always set high enough on the target that every record the source admitted
fits, with our two headers added. Discovery (`replicated_topics`, with `sync`) runs
on `refresh.topics.interval.seconds`; the config sync of the topics already
replicated (`sync_configs`) on `sync.topic.configs.interval.seconds`, a timer of
its own, as in MM2. Admin requests wait at most `admin.timeout.ms`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from replicator.config.model import FlowConfig
from replicator.errors import ConfigError, ReplicatorError
from replicator.kafka.clients import AdminClient, admin_for
from replicator.kafka.coordinator import ask_coordinator
from replicator.kafka.errors import error_text, kafka_error
from replicator.kafka.topic_metadata import unserved
from replicator.listing import counted, first_of

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = "max.message.bytes"
#: What our headers (and a longer cluster alias) may add to a record batch.
HEADER_HEADROOM_BYTES = 1024


@dataclass(frozen=True)
class TopicDecision:
    """Whether a source topic is replicated, and why not if it is not."""

    source_topic: str
    remote_topic: str
    partitions: int
    replicate: bool
    reason: str


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, int] = field(default_factory=dict)
    configs_changed: dict[str, list[str]] = field(default_factory=dict)
    #: remote topic -> its max.message.bytes on the target after the sync
    max_message_bytes: dict[str, int] = field(default_factory=dict)


def why_not_replicated(flow: FlowConfig, topic: str) -> str | None:
    """None if `flow` replicates the source topic `topic` (MM2's shouldReplicateTopic),
    else why not; ACL sync asks it of the topic each ACL names."""
    policy, target = flow.policy, flow.target.alias
    if policy.is_internal_topic(topic):
        return "internal topic (Kafka, Connect or MirrorMaker 2)"
    if policy.is_cycle(topic, target):
        return f"came from {target!r}: replicating it back would loop"
    if policy.is_heartbeats_topic(topic):
        if not flow.heartbeats_replication_enabled:
            return "heartbeats topic, and heartbeats.replication.enabled = false"
        return None  # heartbeats flow whatever the filter says, as in MM2
    reason = flow.topics.why_not(topic)
    return f"topics filter: {reason}" if reason else None


class TopicSync:
    """Discovery and remote-topic maintenance for one flow."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self.policy = flow.policy
        self.source_admin = admin_for(flow.source)
        self.target_admin = admin_for(flow.target)
        #: `admin.timeout.ms`, the bound of every admin request here.
        self.timeout_s = flow.admin_timeout_ms / 1000

    # -- discovery -------------------------------------------------------------------

    def decisions(self) -> list[TopicDecision]:
        """Every source topic with the decision and its reason (`replicator topics`)."""
        metadata = self.source_admin.list_topics(timeout=self.timeout_s)
        decisions = []
        for name in sorted(metadata.topics):
            partitions = len(metadata.topics[name].partitions)
            remote = self.policy.format_remote_topic(self.flow.source.alias, name)
            reason = self._why_not(name)
            decisions.append(
                TopicDecision(name, remote, partitions, reason is None, reason or "replicated")
            )
        return decisions

    def replicated_topics(self) -> dict[str, int]:
        """Source topics this flow replicates, with their partition counts."""
        return {d.source_topic: d.partitions for d in self.decisions() if d.replicate}

    def _why_not(self, topic: str) -> str | None:
        return why_not_replicated(self.flow, topic)

    # -- remote topics -------------------------------------------------------------------

    def sync(self, topics: dict[str, int], sync_configs: bool = True) -> SyncReport:
        """Create missing remote topics, grow partition counts, and (if enabled
        for the flow and asked for now) propagate topic configs. Idempotent."""
        report = SyncReport()
        existing = self.target_admin.list_topics(timeout=self.timeout_s).topics
        alias = self.flow.source.alias
        # Configs are read for the topics created now, and for all when they are synced.
        wanted = [
            t
            for t in topics
            if sync_configs or self.policy.format_remote_topic(alias, t) not in existing
        ]
        desired = self._desired_configs(wanted) if wanted else {}
        to_create = []
        for source_topic, partitions in topics.items():
            remote = self.policy.format_remote_topic(self.flow.source.alias, source_topic)
            if remote not in existing:
                to_create.append(
                    NewTopic(
                        remote,
                        num_partitions=partitions,
                        replication_factor=self.flow.replication_factor,
                        config=desired.get(source_topic, {}),
                    )
                )
                continue
            have = len(existing[remote].partitions)
            if have < partitions:
                self._grow(remote, partitions)
                report.grown[remote] = partitions
            elif have > partitions:
                log.warning(
                    "remote topic %s has %d partitions, source %s only %d: was the source "
                    "topic recreated? Partitions beyond %d receive nothing",
                    remote, have, source_topic, partitions, partitions,
                )  # fmt: skip
            if self.flow.sync_topic_configs_enabled and sync_configs:
                changed = self._apply_configs(remote, desired.get(source_topic, {}))
                if changed:
                    report.configs_changed[remote] = changed
        created = self._create(to_create)
        report.created = [t.topic for t in to_create]
        # A topic created here with max.message.bytes has exactly that: only the others
        # are described (1,250 topics just created took 1.1 s to describe again).
        known = {}
        for new in to_create:
            limit = (new.config or {}).get(MAX_MESSAGE_BYTES)
            if new.topic in created and limit is not None:
                known[new.topic] = int(limit)
        remotes = [self.policy.format_remote_topic(self.flow.source.alias, t) for t in topics]
        report.max_message_bytes = known | self._max_message_bytes(
            [r for r in remotes if r not in known]
        )
        return report

    def sync_configs(self, topics: dict[str, int]) -> SyncReport:
        """Propagate the topic configs of `topics` (already replicated) to their remote
        topics, and report the remote topics' max.message.bytes; no discovery, no
        creation (that is `sync`, on the topic refresh). Idempotent."""
        report = SyncReport()
        if not topics:
            return report
        existing = self.target_admin.list_topics(timeout=self.timeout_s).topics
        desired = self._desired_configs(list(topics))
        remotes = []
        for source_topic in topics:
            remote = self.policy.format_remote_topic(self.flow.source.alias, source_topic)
            if remote not in existing:
                continue  # created by the next refresh
            remotes.append(remote)
            changed = self._apply_configs(remote, desired.get(source_topic, {}))
            if changed:
                report.configs_changed[remote] = changed
        report.max_message_bytes = self._max_message_bytes(remotes)
        return report

    def _create(self, topics: list[NewTopic]) -> set[str]:
        """Create `topics`; the names of those this call created (not those another
        worker created meanwhile)."""
        if not topics:
            return set()
        if sum(t.num_partitions for t in topics) >= COORDINATORS_FIRST_PARTITIONS:
            self._coordinators_first()
        created = set()
        for batch in _batches(topics):
            created |= self._create_batch(batch)
        self._wait_until_served([t.topic for t in topics])
        return created

    def _create_batch(self, topics: list[NewTopic]) -> set[str]:
        """Create `topics` in one request; the names of those created. One log line
        tells what was created, even when a refusal ends the batch."""
        futures = self.target_admin.create_topics(topics, operation_timeout=self.timeout_s)
        created: set[str] = set()
        try:
            for name, future in futures.items():
                self._created(name, future, created)
        finally:
            if created:
                partitions = sum(t.num_partitions for t in topics if t.topic in created)
                log.info(
                    "created %s (%s) on %s: %s",
                    counted(len(created), "remote topic"),
                    counted(partitions, "partition"),
                    self.flow.target.alias,
                    first_of(sorted(created), noun="topics"),
                )
        return created

    def _created(self, name: str, future: Future[None], created: set[str]) -> None:
        """Add `name` to `created` once its creation's `future` answers; an existing
        topic is not created, and any other refusal says what to fix."""
        try:
            future.result(timeout=self.timeout_s)
            created.add(name)
        except KafkaException as exc:
            error = kafka_error(exc)
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if error.code() == KafkaError.INVALID_REPLICATION_FACTOR:
                raise ConfigError(
                    f"replication.factor={self.flow.replication_factor} for flow "
                    f"{self.flow.name}: cluster {self.flow.target.alias!r} cannot create "
                    f"{name} ({error.str()}); lower replication.factor"
                ) from exc
            raise ReplicatorError(
                f"cannot create remote topic {name} on {self.flow.target.alias!r}: {error.str()}"
            ) from exc

    def _coordinators_first(self) -> None:
        """Before creating thousands of partitions, have the target locate a group
        coordinator: on a cluster that has none yet it creates its offsets topic now,
        ahead of them. Created after them, it waited behind them (a broker applies
        created partitions in order): at 5,000 partitions the checkpoint round after
        the copy found the target's coordinators not loaded and synced no group.

        The answer itself is not needed, only its place in the queue: once the
        offsets topic is in the target's metadata, its creation is ahead of ours. That
        is looked for every `COORDINATORS_LOOK_S`, for `COORDINATORS_WAIT_S` at most
        (waiting for the answer itself took the whole second on a fresh target, a
        tenth of the time its broker then took to create 1,000 partitions), while a
        thread asks (`ask_coordinator`, a consumer of the engine group; not
        DescribeConsumerGroups, which, given this second as its timeout, took the
        process down when the coordinator answered after it: see `UNEXPIRED_S`)."""
        threading.Thread(
            target=self._ask_coordinator, name="coordinator-first", daemon=True
        ).start()
        deadline = time.monotonic() + COORDINATORS_WAIT_S
        while True:
            try:
                topics = self.target_admin.list_topics(timeout=COORDINATORS_WAIT_S).topics
            except KafkaException as exc:  # the creation that follows says what is wrong
                log.debug("flow %s: the target's metadata: %s", self.flow.name, error_text(exc))
                return
            if OFFSETS_TOPIC in topics:
                return
            if time.monotonic() > deadline:
                log.info(
                    "flow %s: the target %r has no group coordinator yet (no %s after "
                    "%gs); creating the remote topics after asking for one",
                    self.flow.name, self.flow.target.alias, OFFSETS_TOPIC,
                    COORDINATORS_WAIT_S,
                )  # fmt: skip
                return
            time.sleep(COORDINATORS_LOOK_S)

    def _ask_coordinator(self) -> None:
        """The question of `_coordinators_first`; what it gets is not needed (the
        checkpoint loop asks again and reports what fails)."""
        try:
            ask_coordinator(self.flow.target, self.flow.engine_group, COORDINATORS_ANSWER_S)
        except KafkaException as exc:
            log.debug(
                "flow %s: the target's group coordinator: %s", self.flow.name, error_text(exc)
            )

    def _wait_until_served(self, topics: list[str]) -> None:
        """A created topic is not described or produced to until every partition
        has a leader in the metadata; wait for that instead of failing later. A
        broker given thousands of partitions at once takes minutes to lead them all
        (2,500 topics x 4 partitions: over 60 s on this machine's one broker), so the
        wait grows with the topics, and so does the pause between two looks at the
        cluster's metadata (each describes every topic)."""
        wait_s = self.timeout_s + SERVED_S_PER_TOPIC * len(topics)
        deadline = time.monotonic() + wait_s
        pause_s = 0.1 if len(topics) < 100 else 1.0
        while True:
            metadata = self.target_admin.list_topics(timeout=self.timeout_s).topics
            pending = unserved(metadata, topics)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ReplicatorError(
                    f"remote topics {pending} on {self.flow.target.alias!r} have no leader "
                    f"{wait_s:.0f}s after creation; check the target cluster's health"
                )
            time.sleep(pause_s)

    def _grow(self, remote: str, partitions: int) -> None:
        futures = self.target_admin.create_partitions(
            [NewPartitions(remote, partitions)], operation_timeout=self.timeout_s
        )
        try:
            futures[remote].result(timeout=self.timeout_s)
        except KafkaException as exc:
            raise ReplicatorError(
                f"cannot grow remote topic {remote} to {partitions} partitions on "
                f"{self.flow.target.alias!r}: {error_text(exc)}"
            ) from exc
        self._wait_until_served([remote])
        log.info("grew remote topic %s to %d partitions", remote, partitions)

    # -- configs ---------------------------------------------------------------------------

    def _describe(self, admin: AdminClient, topics: list[str]) -> dict[str, dict[str, ConfigEntry]]:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        described = {}
        futures = admin.describe_configs(resources, request_timeout=self.timeout_s)
        for resource, future in futures.items():
            described[resource.name] = future.result(timeout=self.timeout_s)
        return described

    def _desired_configs(self, source_topics: list[str]) -> dict[str, dict[str, str]]:
        """Per source topic, the configs its remote topic should have."""
        desired: dict[str, dict[str, str]] = {}
        for topic, entries in self._describe(self.source_admin, source_topics).items():
            configs: dict[str, str] = {}
            if self.flow.sync_topic_configs_enabled:
                configs = {
                    name: entry.value
                    for name, entry in entries.items()
                    # confluent-kafka's stubs say ConfigSource; the value is its int.
                    if cast(int, entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                    and entry.value is not None
                    and not self._excluded(name)
                }
                source_limit = int(cast(str, entries[MAX_MESSAGE_BYTES].value))
                configs[MAX_MESSAGE_BYTES] = str(source_limit + HEADER_HEADROOM_BYTES)
            desired[topic] = configs
        return desired

    def _excluded(self, name: str) -> bool:
        return any(p.fullmatch(name) for p in self.flow.config_properties_exclude)

    def _apply_configs(self, remote: str, desired: dict[str, str]) -> list[str]:
        """Make the remote topic's dynamic configs equal `desired` (excluded
        properties set locally on the target are left alone)."""
        current = {
            name: entry.value
            for name, entry in self._describe(self.target_admin, [remote])[remote].items()
            if cast(int, entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
        changes = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in desired.items()
            if current.get(name) != value
        ]
        changes += [
            ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
            for name in current
            if name not in desired and not self._excluded(name)
        ]
        if not changes:
            return []
        resource = ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=changes)
        for future in self.target_admin.incremental_alter_configs([resource]).values():
            future.result(timeout=self.timeout_s)
        changed = sorted(entry.name for entry in changes)
        log.info("synced configs of %s: %s", remote, ", ".join(changed))
        return changed

    def _max_message_bytes(self, remotes: list[str]) -> dict[str, int]:
        if not remotes:
            return {}
        return {
            topic: int(cast(str, entries[MAX_MESSAGE_BYTES].value))
            for topic, entries in self._describe(self.target_admin, remotes).items()
        }


#: Creating this many partitions at once first has the target locate a group
#: coordinator (`TopicSync._coordinators_first`), and waits this long at most for it.
COORDINATORS_FIRST_PARTITIONS = 1_000
COORDINATORS_WAIT_S = 1.0
#: How long the question of `_coordinators_first` may wait for its answer, in its thread.
COORDINATORS_ANSWER_S = 60.0
COORDINATORS_LOOK_S = 0.05
#: The topic a cluster's group coordinators keep their groups in, created at the
#: first request that looks for a coordinator.
OFFSETS_TOPIC = "__consumer_offsets"

#: How much longer `_wait_until_served` waits for each topic created at once.
SERVED_S_PER_TOPIC = 0.05

#: Records one CreateTopics request has the controller write at most. A KRaft controller
#: refuses a request of more than 10,000 records (`max.records.per.user.op`) as a whole:
#: "PolicyViolationException: Unable to perform excessively large batch operation"
#: (MirrorMaker 2 retries such a batch forever: at 2,500 topics x 4 partitions it
#: never created a remote topic). A topic is a record, and so is each of its partitions
#: and each config entry it is created with (`_records`): 4,000 topics of one partition
#: and three configs each are 20,000.
CREATE_RECORDS_PER_REQUEST = 9_000

#: Partitions one CreateTopics request asks for at most, below the records' bound: a
#: fresh broker given 5,000 partitions led them all after 8.9 and 17.2 s in requests of
#: 4,000, and after 27.8 s in one request (`bench/partition_leadership.py`,
#: docs/benchmarks.md).
CREATE_PARTITIONS_PER_REQUEST = 4_000


def _records(topic: NewTopic) -> int:
    """The records the controller writes to create `topic`."""
    return 1 + topic.num_partitions + len(topic.config or {})


def _batches(topics: list[NewTopic]) -> list[list[NewTopic]]:
    """`topics` in requests of at most `CREATE_PARTITIONS_PER_REQUEST` partitions and
    `CREATE_RECORDS_PER_REQUEST` records (a topic larger than that alone in its own)."""
    batches: list[list[NewTopic]] = []
    partitions = records = 0
    for topic in topics:
        if (
            not batches
            or partitions + topic.num_partitions > CREATE_PARTITIONS_PER_REQUEST
            or records + _records(topic) > CREATE_RECORDS_PER_REQUEST
        ):
            batches.append([])
            partitions = records = 0
        batches[-1].append(topic)
        partitions += topic.num_partitions
        records += _records(topic)
    return batches
