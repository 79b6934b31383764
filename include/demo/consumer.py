"""Demo consumer: processes the logical topic and its replicated copies on the active
cluster, keeping a ledger of every record processed, following fences and failovers.

    .venv/bin/python include/demo/consumer.py --config FILE --app NAME \\
        --topic demo.orders --ledger PATH [--state-url URL]

See include/demo/README.md.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from fenced_client import REFUSED, FencedClient, access_denied, main

from replicator.statestore import Route
from replicator.statestore.ledger import LedgerEntry

log = logging.getLogger("demo")

_BATCH = 500
_CONSUME_TIMEOUT_S = 0.5


def subscription_pattern(topic: str) -> str:
    """librdkafka regex for `topic` and its copies under MM2's DefaultReplicationPolicy
    (`primary.demo.orders`, `dr.primary.demo.orders`, ...). Kafka topic names hold
    only letters, digits, `.`, `_` and `-`, so escaping the dots is enough."""
    escaped = topic.replace(".", r"\.")
    return rf"^([^.]+\.)*{escaped}$"


class DemoConsumer(FencedClient):
    """Consumer group `--app`, manual commits: a batch is processed (ledger lines
    written and flushed) and then committed synchronously, partition by partition.

    A commit that fails rolls the partition's ledger lines back and rewinds to
    them, so the ledger holds only committed processing. The one at-least-once
    edge: a crash between writing the lines and the commit leaves them in the
    ledger while the records are delivered again, and `check_ledgers` reports
    them as processed twice.
    """

    role = "consumer"
    _consumer: Consumer | None = None
    _cluster = ""

    def connect(self, route: Route) -> None:
        # The cluster's own consumer settings carry its security configuration.
        settings = {
            **self.config.clusters[route.cluster].consumer,
            "group.id": self.application,
            "client.id": self.client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        self._consumer = Consumer(settings)
        self._consumer.subscribe([subscription_pattern(self.topic)])
        self._cluster = route.cluster

    def work(self) -> None:
        batches: dict[tuple[str, int], list[Message]] = defaultdict(list)
        for message in self._live().consume(num_messages=_BATCH, timeout=_CONSUME_TIMEOUT_S):
            error = message.error()
            if error is not None and error.code() in REFUSED:  # no retry helps: stop, say why
                resource = (
                    f"GROUP {self.application}"
                    if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                    else f"TOPIC {message.topic() or self.topic}"
                )
                raise access_denied(self, self._cluster, error, "READ", resource)
            if error is not None:
                log.warning("%s: %s", self.client_id, error)
            else:
                batches[message.topic(), message.partition()].append(message)
        for messages in batches.values():
            self._process(messages)

    def disconnect(self, timeout_s: float) -> None:
        # Every processed batch was committed before work() returned, so closing
        # (which leaves the group) is all that is left: nothing to wait for.
        self._live().close()
        self._consumer = None

    def _live(self) -> Consumer:
        assert self._consumer is not None, "FencedClient calls connect() first"
        return self._consumer

    def _process(self, messages: list[Message]) -> None:
        """Ledger, then commit, the records of one partition from one batch."""
        first = messages[0]
        mark = self.ledger.mark()
        for message in messages:
            record_id = _record_id(message)
            if record_id is None:
                log.warning(
                    "%s: %s[%d]@%d is not a demo record; skipped",
                    self.client_id,
                    message.topic(),
                    message.partition(),
                    message.offset(),
                )
                continue
            self.ledger.write(
                LedgerEntry(
                    record_id,
                    self._cluster,
                    message.topic(),
                    message.partition(),
                    message.offset(),
                )
            )
        self.ledger.flush()
        end = TopicPartition(first.topic(), first.partition(), messages[-1].offset() + 1)
        try:
            [committed] = self._live().commit(offsets=[end], asynchronous=False)
            if committed.error is not None:
                raise KafkaException(committed.error)
        except KafkaException as exc:
            self.ledger.rollback(mark)
            self._rewind(TopicPartition(first.topic(), first.partition(), first.offset()))
            log.warning(
                "%s: commit of %s[%d] failed (%s); %d records rolled back, to be redelivered",
                self.client_id,
                first.topic(),
                first.partition(),
                exc,
                len(messages),
            )

    def _rewind(self, position: TopicPartition) -> None:
        """Consume from `position` again; if the partition moved to another member
        meanwhile, that member resumes from the committed offset instead."""
        try:
            self._live().seek(position)
        except KafkaException as exc:
            log.info("%s: not rewinding %s: %s", self.client_id, position, exc)


def _record_id(message: Message) -> str | None:
    try:
        record_id = json.loads(message.value() or b"")["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return record_id if isinstance(record_id, str) else None


if __name__ == "__main__":
    raise SystemExit(main(DemoConsumer, "Demo consumer that follows DR fences and failovers."))
