"""The source topics a task replicates, with their partition counts, and their remote
topics kept in step through `TopicSync`: loaded at start, refreshed while running
(new matching topics, partition increases), their configs synced on a timer of
their own, and remote topics made for partitions assigned before the task knew
their topic.

This part owns the topic map. Each sync returns the remote topics' max.message.bytes
for the caller to hand on (the target writer's size limits); a cluster that does not
answer a refresh or a config sync only puts it off until the next one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from confluent_kafka import KafkaException

from replicator.config.model import FlowConfig
from replicator.engine.kafka_errors import reason
from replicator.engine.partition import PartitionTracker
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ConfigError, ReplicatorError

log = logging.getLogger(__name__)


class ReplicatedTopics:
    """The topic map of one task (source topic -> partition count)."""

    def __init__(self, flow: FlowConfig, topic_sync: TopicSync | None = None) -> None:
        self.flow = flow
        self.topic_sync = topic_sync or TopicSync(flow)
        self._topics: dict[str, int] = {}

    @property
    def topics(self) -> dict[str, int]:
        """Source topic -> partition count (read only: change it through this part)."""
        return self._topics

    def names(self) -> list[str]:
        return sorted(self._topics)

    def load(self) -> dict[str, int]:
        """The replicated topics, their remote topics made or synced (configs too);
        returns the remote topics' max.message.bytes."""
        self.find()
        return self.make_remotes()

    def find(self) -> list[str]:
        """List the replicated topics on the source (their remote topics not looked at
        yet); their names."""
        self._topics = self.topic_sync.replicated_topics()
        return self.names()

    def make_remotes(self) -> dict[str, int]:
        """Make or sync the remote topics of those `find` listed (configs too); their
        max.message.bytes."""
        return self.topic_sync.sync(self._topics).max_message_bytes

    def refresh(self, sync_configs: bool) -> tuple[dict[str, int] | None, bool]:
        """Pick up new matching topics and partition increases without a restart.
        Returns the remote topics' max.message.bytes (None: the clusters did not
        answer, nothing changed) and whether the topic set changed (subscribe again)."""
        try:
            current = self.topic_sync.replicated_topics()
            report = self.topic_sync.sync(current, sync_configs=sync_configs)
        except ConfigError:
            raise
        except (KafkaException, ReplicatorError) as exc:
            log.warning(
                "flow %s: topics not refreshed this time (%s); next try in %d s",
                self.flow.name, reason(exc), self.flow.refresh_topics_interval_seconds,
            )  # fmt: skip
            return None, False
        changed = {t: n for t, n in current.items() if self._topics.get(t) != n}
        if changed:
            log.info("flow %s: topics changed: %s", self.flow.name, changed)
            self._topics = current
        return report.max_message_bytes, bool(changed)

    def sync_configs(self) -> dict[str, int] | None:
        """Sync the configs of the replicated topics' remote topics (on
        `sync.topic.configs.interval.seconds`, whatever the topic refresh does);
        their max.message.bytes, or None when a cluster did not answer."""
        try:
            report = self.topic_sync.sync_configs(self._topics)
        except ConfigError:
            raise
        except (KafkaException, ReplicatorError) as exc:
            log.warning(
                "flow %s: topic configs not synced this time (%s); next try in %d s",
                self.flow.name, reason(exc), self.flow.sync_topic_configs_interval_seconds,
            )  # fmt: skip
            return None
        return report.max_message_bytes

    def add_missing(self, trackers: Iterable[PartitionTracker]) -> dict[str, int] | None:
        """Make the remote topics (or partitions) of assigned partitions this task did
        not know yet; their max.message.bytes, or None when none was missing."""
        missing = {
            topic: count
            for topic, count in self.counts(trackers).items()
            if count > self._topics.get(topic, 0)
        }
        if not missing:
            return None
        limits = self.topic_sync.sync(missing).max_message_bytes
        self._topics.update(missing)
        return limits

    def counts(self, trackers: Iterable[PartitionTracker]) -> dict[str, int]:
        """The partition counts of the topics of `trackers`: the known count, or more
        when a tracker's partition lies beyond it (a partition added to the source
        topic and assigned before the refresh saw it), whatever the trackers' order."""
        counts: dict[str, int] = {}
        for t in trackers:
            known = counts.get(t.topic, self._topics.get(t.topic, 0))
            counts[t.topic] = max(known, t.partition + 1)
        return counts

    def sync(self, topics: dict[str, int]) -> dict[str, int]:
        """Sync the remote topics of `topics` (configs too); their max.message.bytes."""
        return self.topic_sync.sync(topics).max_message_bytes
