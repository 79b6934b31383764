"""An unplanned failover's RPO on a transactional topic whose records all reached the
target: the source partition ends with a commit marker, which is never copied.

Without the source, the unplanned failover counts what was not replicated from the
replicator's last status (`next_offset + lag`). The lag counted from the partition's
last record took the trailing marker for a record not replicated yet, so each such
partition reported one record lost (found by test_estate_failover.py); it now counts
from where the consumer stands, past the control records it never hands out.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.engine.status import PartitionStatus, read_status
from replicator.procedures import Failover
from replicator.statestore import StateStore
from replicator_lab import LocalStack

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import commit_offsets, runner
from helpers.replication import end_offsets, wait_until, write_config

pytestmark = pytest.mark.integration


def test_a_trailing_commit_marker_is_not_a_lost_record(
    tmp_path: Path, lone_primary: LocalStack, dr: str, store: StateStore
) -> None:
    primary = lone_primary.bootstrap("primary")
    topic = unique_topic("txn-rpo")
    create_topic(primary, topic, partitions=1)
    producer = Producer({"bootstrap.servers": primary, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    for start in range(0, 20, 5):
        producer.begin_transaction()
        for i in range(start, start + 5):
            producer.produce(topic, value=b"t%d" % i, partition=0)
        producer.commit_transaction(30)
    config = load_config(write_config(tmp_path, primary, dr, topic))
    flow = config.flow("primary->dr")
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    commit_offsets(flow.source, app, {(topic, 0): 24})  # after the last commit marker

    def reported() -> bool:
        rows = [r for r in read_status(flow.target, flow.name) if isinstance(r, PartitionStatus)]
        return any(r.topic == topic and r.lag is not None for r in rows)

    with runner([flow], store):
        wait_until(lambda: end_offsets(dr, f"primary.{topic}", 1) == [20], 90, "copied")
        wait_until(reported, 60, "the partition's status")
        lone_primary.down(["primary"])
        report = Failover(config, "primary->dr", [app], store, mode="unplanned").run()

    assert report.ok, report.error
    assert report.rpo_records == 0
