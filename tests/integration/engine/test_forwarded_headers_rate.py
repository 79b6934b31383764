"""Records that carry another flow's provenance move at the plain record's pace on the
compiled path (issue 42, point 1).

Active-active in one `replicator run` (both flows, the compiled data path, its
defaults): dr's `orders` is written at 2,000 records/s for 60 s; an application on
primary reads its replica `dr.orders` and writes each record to its own topic
`enriched`, forwarding the input's headers (`__dr_src = dr`, ...), as Kafka Streams
does. Every record of `enriched` is primary's own data and must reach dr exactly once,
keeping up: within 10 s of the application stopping, dr has all of them.

Before, the Mover handed every such record back to Python one at a time and fetched
its partition again after each: about 8.5 records/s, an unbounded lag."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from replicator.engine.headers import SOURCE_HEADER

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import (
    PacedProduction,
    end_offsets,
    start_replicator,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
RATE = 2_000
SECONDS = 60
RECORDS = RATE * SECONDS
CATCH_UP_S = 10.0


class _Application(threading.Thread):
    """Reads `source` on primary and writes every record to the same partition of
    `output`, transformed, with its headers as read, until `count` are forwarded."""

    def __init__(self, bootstrap: str, source: str, output: str, count: int) -> None:
        super().__init__(name="forwarding-app", daemon=True)
        self._args = (bootstrap, source, output, count)
        self.error: BaseException | None = None
        self.done_at: float | None = None

    def run(self) -> None:
        bootstrap, source, output, count = self._args
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"app-{uuid.uuid4().hex}"})
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        try:
            consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
            forwarded = 0
            while forwarded < count:
                for message in consumer.consume(1_000, 1.0):
                    assert message.error() is None, message.error()
                    headers = message.headers()
                    assert headers and dict(headers)[SOURCE_HEADER] == b"dr", headers
                    while True:
                        try:
                            producer.produce(
                                output, b"enriched:" + (message.value() or b"") + message.key(),
                                message.key(), message.partition(), headers=headers,
                            )  # fmt: skip
                            break
                        except BufferError:
                            producer.poll(0.1)
                    forwarded += 1
                producer.poll(0)
            assert producer.flush(60) == 0
            self.done_at = time.monotonic()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            consumer.close()


def test_forwarded_headers_keep_up_in_one_run_of_both_flows(
    tmp_path: Path, primary: str, dr: str
) -> None:
    orders, output = unique_topic("orders"), unique_topic("enriched")
    create_topic(dr, orders, partitions=PARTITIONS)
    create_topic(primary, output, partitions=PARTITIONS)
    config = write_config(
        tmp_path, primary, dr, output,
        extra=("dr->primary.enabled = true", f"dr->primary.topics = {orders}"),
    )  # fmt: skip
    log = tmp_path / "run.log"
    process = start_replicator(config, log)
    try:
        application = _Application(primary, f"dr.{orders}", output, RECORDS)
        with PacedProduction(dr, orders, RECORDS, PARTITIONS, RATE):
            wait_until(
                lambda: sum(end_offsets(primary, f"dr.{orders}", PARTITIONS) or [0]) > 0,
                60,
                f"dr.{orders} on primary",
            )
            application.start()
        application.join(SECONDS + 120)
        assert application.error is None, f"the application failed: {application.error!r}"
        assert application.done_at is not None, "the application did not forward everything"
        wanted = end_offsets(primary, output, PARTITIONS)
        assert wanted is not None and sum(wanted) == RECORDS

        def caught_up() -> bool:
            return end_offsets(dr, f"primary.{output}", PARTITIONS) == wanted

        wait_until(caught_up, CATCH_UP_S + 120, f"primary.{output} on dr")
        behind_s = time.monotonic() - application.done_at
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)

    copied = [r for p in range(PARTITIONS) for _, r in read_partition(dr, f"primary.{output}", p)]
    values = Counter(r.value for r in copied)
    assert len(copied) == RECORDS, f"{len(copied)} records on dr, {RECORDS} forwarded"
    assert max(values.values()) == 1, "a record reached dr twice"
    assert all(dict(r.headers)[SOURCE_HEADER] == b"primary" for r in copied[:100])
    # Caught up within 10 s of the application's last record (measured from when its
    # last record was acknowledged on primary).
    assert behind_s <= CATCH_UP_S, f"dr had every record {behind_s:.1f} s after the application"
    text = log.read_text(encoding="utf-8")
    assert "Traceback" not in text, text[-3000:]
