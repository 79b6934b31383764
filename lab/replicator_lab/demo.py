"""Demo traffic for the local stack: a steady stream into a few realistic topics.

It gives the replicator, the dashboards and the failover procedures something
to move when a person runs `make run`. Records carry keys (some null), headers
and timestamps, like the traffic of a real estate.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.kafka.errors import error_code
from replicator.kafka.topic_metadata import unserved
from replicator_lab.errors import StackError

log = logging.getLogger(__name__)

#: Demo topics and their partition counts.
DEMO_TOPICS: dict[str, int] = {"demo.orders": 6, "demo.payments": 3, "demo.pageviews": 12}
_TICK_S = 0.1


@dataclass
class DemoCounts:
    produced: int = 0
    failed: int = 0
    last_error: str | None = None


def ensure_topics(
    bootstrap: str, topics: dict[str, int], client: Mapping[str, str] | None = None
) -> None:
    """Create the topics that do not exist yet (existing ones are left as they are)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    existing = admin.list_topics(timeout=10).topics
    missing = [
        NewTopic(name, num_partitions=partitions, replication_factor=1)
        for name, partitions in topics.items()
        if name not in existing
    ]
    if not missing:
        return
    for future in admin.create_topics(missing, operation_timeout=30).values():
        try:
            future.result()
        except KafkaException as exc:
            if error_code(exc) != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _wait_served(admin, [t.topic for t in missing])


def _wait_served(admin: AdminClient, topics: list[str], timeout_s: float = 30.0) -> None:
    """Wait until the cluster's metadata shows `topics` with a leader for every
    partition. A consumer that subscribes by pattern before then matches nothing
    and looks again only after `topic.metadata.refresh.interval.ms` (5 minutes): a
    CI run's demo consumer, started a moment after its topic was created on a busy
    machine, read nothing for the test's two minutes."""
    deadline = time.monotonic() + timeout_s
    while True:
        pending = unserved(admin.list_topics(timeout=10).topics, topics)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise StackError(
                f"demo topics {pending} have no leader {timeout_s:.0f} s after their creation; "
                "check the local cluster's log"
            )
        time.sleep(0.1)


def _demo_record(topic: str, sequence: int) -> tuple[bytes | None, bytes]:
    customer = random.randrange(1000)  # noqa: S311 - demo data, not security
    body: dict[str, object]
    if topic == "demo.orders":
        body = {"order": sequence, "customer": customer, "amount": round(random.random() * 500, 2)}  # noqa: S311
        return f"customer-{customer}".encode(), json.dumps(body).encode()
    if topic == "demo.payments":
        body = {"payment": sequence, "customer": customer, "status": "captured"}
        return f"customer-{customer}".encode(), json.dumps(body).encode()
    # Page views are anonymous: null keys, spread round-robin by the producer.
    body = {"view": sequence, "path": f"/product/{customer}"}
    return None, json.dumps(body).encode()


class DemoTraffic:
    """Produces `rate` records per second, spread over the demo topics, until stopped.

    `skip` leaves out topics a DR-aware demo application writes itself (its
    records must carry the ids its ledgers check). `client`: more client settings
    (the demo principal's credentials on a secured stack)."""

    def __init__(
        self,
        bootstrap: str,
        rate: int = 50,
        skip: frozenset[str] = frozenset(),
        client: Mapping[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.client = dict(client or {})
        self.rate = rate
        self.topics = [topic for topic in DEMO_TOPICS if topic not in skip]
        self.counts = DemoCounts()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 20,
                "logger": log,
                **self.client,
            }
        )

    def start(self) -> None:
        ensure_topics(self.bootstrap, DEMO_TOPICS, self.client)
        self._thread.start()

    def stop(self, flush_timeout: float = 10.0) -> DemoCounts:
        self._stop.set()
        self._thread.join()
        self._producer.flush(flush_timeout)
        self._producer.close()
        return self.counts

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.counts.produced += 1
            return
        self.counts.failed += 1
        self.counts.last_error = f"{message.topic()}: {error.str()}"
        log.error("demo record to %s not delivered: %s", message.topic(), error.str())

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, str | bytes | None]],
    ) -> None:
        # While a cluster is down the local queue fills up; wait for room rather
        # than drop the record, so the demo resumes by itself when it returns.
        while not self._stop.is_set():
            try:
                self._producer.produce(
                    topic, value=value, key=key, headers=headers, on_delivery=self._on_delivery
                )
                return
            except BufferError:
                self._producer.poll(0.5)

    def _run(self) -> None:
        topics = self.topics
        per_tick = max(1, round(self.rate * _TICK_S))
        sequence = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(per_tick):
                topic = topics[sequence % len(topics)]
                key, value = _demo_record(topic, sequence)
                headers: list[tuple[str, str | bytes | None]] = [
                    ("app", b"demo"),
                    ("trace-id", uuid.uuid4().hex.encode()),
                ]
                self._produce(topic, key, value, headers)
                sequence += 1
            self._producer.poll(0)
            self._stop.wait(max(0.0, _TICK_S - (time.monotonic() - started)))
