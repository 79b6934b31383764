"""A target that refuses writes (a missing ACL) stops the flow once (issue 14 item 2):
one line naming the principal, the operation, the resource and the fix, in the
log and in the worker's status, and the worker is not started again and again
(each attempt used to log the same line and a `_GAPLESS_GUARANTEE` traceback)."""

from __future__ import annotations

import logging
import re
import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.acls.plan import replicator_rules
from replicator.config import load_config
from replicator.engine import task
from replicator.engine.status import WorkerStatus, read_status
from replicator.operations import runner
from replicator.statestore import StateStore
from replicator.statestore.flow_states import FlowStateStore

from helpers.kafka import create_topic, make_records, produce_records
from helpers.replication import wait_until
from helpers.secured import SecuredPair, only_topic


class _CountingFlows(FlowStateStore):
    """The flows part of the test's state store, counting the runner's reads of the
    flows' states: one per round of supervision, so a test can wait for rounds to pass."""

    reads = 0

    def all(self):  # type: ignore[no-untyped-def]
        type(self).reads += 1
        return super().all()


class _CountingStore(StateStore):
    """The test's state store, its flows part counting (`_CountingFlows`)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.flows = _CountingFlows(self.db)


def test_a_target_refusing_writes_stops_the_flow_once_with_one_line(
    secured_pair: SecuredPair,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pair = secured_pair
    user = f"nowrite-{uuid.uuid4().hex[:6]}"
    # Three topics: the batch of one is refused while the others' records are being
    # produced (a produce on the failed producer once escaped as "_FATAL: Unable to
    # produce message"). These only: the pair's other tests leave demo topics this
    # user may not write either.
    prefix = f"demo.nowrite-{uuid.uuid4().hex[:8]}"
    topics = [f"{prefix}-{i}" for i in range(3)]
    config = pair.config_as(
        user,
        tmp_path / "mm2.properties",
        "dr->primary.enabled = false",
        only_topic("primary->dr", *topics),
    )
    flow = load_config(config).flow("primary->dr")
    # Every ACL the replicator needs but WRITE on the remote topics.
    pair.grant(
        [
            rule
            for rule in replicator_rules(load_config(config))
            if not (
                rule.cluster == "dr"
                and rule.operation == "WRITE"
                and rule.name.startswith("primary.demo.")
            )
        ]
    )
    for topic in topics:
        create_topic(pair.primary, topic, 1, client=pair.admin("primary"))
        produce_records(pair.primary, topic, make_records(10), client=pair.admin("primary"))
    # Records keep coming in turn, so the engine is producing when a refusal arrives.
    writing = threading.Event()
    writer = threading.Thread(target=_write_until, args=(pair, topics, writing), daemon=True)
    writer.start()

    # A restart, were there one, would come at once and rounds pass quickly.
    monkeypatch.setattr(runner, "_RESTART_FIRST_S", 0.0)
    monkeypatch.setattr(runner, "_SUPERVISE_EVERY_S", 0.01)
    monkeypatch.setattr(runner, "_DESIRED_EVERY_S", 0.0)
    # Status every round, through the target producer: the round whose reports say
    # the batch was refused writes status to a producer failed fatally by then (as a
    # slow machine's rounds did: the task once stopped on "_FATAL: Unable to produce
    # message", restarted, and said so again and again).
    monkeypatch.setattr(task, "_STATUS_EVERY_S", 0.0)
    store = _CountingStore(f"sqlite:///{tmp_path / 'state.db'}")
    stop = threading.Event()
    thread = threading.Thread(target=runner.run_flows, args=([flow], stop, store), daemon=True)
    expected = re.compile(
        f"User:{user} lacks ALLOW WRITE on TOPIC primary.{re.escape(prefix)}-[0-2] on cluster 'dr'"
    )
    with caplog.at_level(logging.INFO):
        thread.start()
        try:
            wait_until(
                lambda: expected.search(caplog.text), 120, f"a line saying {expected.pattern!r}"
            )
            failed_at = _CountingFlows.reads
            wait_until(
                lambda: _CountingFlows.reads > failed_at + 300, 60, "300 rounds of supervision"
            )
        finally:
            stop.set()
            writing.set()
            thread.join(120)
            writer.join(30)
    assert not thread.is_alive()

    ours = [
        r
        for r in caplog.records
        if r.name.startswith("replicator.") and r.name != "replicator.librdkafka"
    ]
    errors = [r.getMessage() for r in ours if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    [line] = errors
    assert expected.search(line) and "replicator acls apply" in line, line
    assert "stays stopped" in line
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    assert not [r for r in ours if "GAPLESS" in r.getMessage()]
    started = [r for r in ours if r.getMessage() == "started primary->dr#0"]
    assert len(started) == 1, "the worker was started again"
    # Status says the same, once: the worker failed on that ACL.
    workers = [
        s
        for s in read_status(flow.target, flow.name)
        if isinstance(s, WorkerStatus) and s.topics and topics[0] in s.topics
    ]
    assert [w.state for w in workers] == ["failed"]
    assert expected.search(workers[0].error or "")
    for topic in topics:
        assert pair.end_offsets("dr", f"primary.{topic}", 1) in ([0], None)


def _write_until(pair: SecuredPair, topics: list[str], done: threading.Event) -> None:
    """A few records into each of `topics` in turn, every few milliseconds, until
    `done`."""
    producer = Producer({"bootstrap.servers": pair.primary, **pair.admin("primary")})
    while not done.wait(0.005):
        for topic in topics:
            producer.produce(topic, b"more")
        producer.poll(0)
    producer.flush(10)
