"""MirrorMaker 2's signs of life on a flow's target (`engine.mm2_liveness`), on the real
test clusters: a fresh heartbeat of the flow, a target partition growing while its
takeover is planned; the gate that keeps takeovers waiting while either shows, and
lets them through when forced.
Each test's flow has aliases of its own, so its heartbeats and group are its own (the
whole takeover with two real MM2 nodes: `test_mm2_running.py`)."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import suppress
from dataclasses import replace

import pytest
from confluent_kafka import KafkaException, Producer

from replicator.config.model import FlowConfig
from replicator.engine.formats import Heartbeat
from replicator.engine.mm2_liveness import (
    FORCE_SETTING,
    MirrorMakerRunning,
    MirrorMakerWatch,
    TakeoverGate,
)
from replicator.engine.takeover import TakeoverPlanner

from helpers.kafka import create_topic
from helpers.replication import flow_config

pytestmark = pytest.mark.integration


@pytest.fixture
def flow(primary: str, dr: str) -> FlowConfig:
    # As MM2's heartbeat connector makes it (another test may have made it already).
    with suppress(KafkaException):
        create_topic(dr, "heartbeats", partitions=1)
    tag = uuid.uuid4().hex[:8]
    return flow_config((f"src{tag}", primary), (f"dst{tag}", dr), "orders")


def _beat(flow: FlowConfig, source: str, target: str, age_s: float) -> None:
    stamp = int((time.time() - age_s) * 1000)
    beat = Heartbeat(source, target, stamp)
    producer = Producer({"bootstrap.servers": flow.target.bootstrap_servers})
    producer.produce("heartbeats", beat.value(), beat.key(), 0, timestamp=stamp)
    producer.produce("heartbeats", b"not a heartbeat", b"garbage", 0)
    assert producer.flush(10) == 0


def test_nothing_on_the_target_says_mm2_is_gone(flow: FlowConfig) -> None:
    assert MirrorMakerWatch(flow).evidence() == []
    TakeoverGate(flow).check()  # passes


def test_a_fresh_heartbeat_of_the_flow_keeps_the_takeover_waiting(flow: FlowConfig) -> None:
    _beat(flow, flow.source.alias, flow.target.alias, age_s=2)
    evidence = MirrorMakerWatch(flow).evidence()
    assert len(evidence) == 1 and f"heartbeat of {flow.name}" in evidence[0], evidence
    with pytest.raises(MirrorMakerRunning) as refused:
        TakeoverGate(flow).check()
    message = str(refused.value)
    assert "still writes this flow" in message and FORCE_SETTING in message
    assert "--force-takeover" in message


def test_old_heartbeats_and_other_flows_heartbeats_are_not_mm2_running(flow: FlowConfig) -> None:
    source, target = flow.source.alias, flow.target.alias
    _beat(flow, source, target, age_s=600)  # MM2 stopped ten minutes ago
    _beat(flow, target, source, age_s=1)  # the reverse flow's, written here
    _beat(flow, "west", target, age_s=1)  # another flow into the same target
    assert MirrorMakerWatch(flow).evidence() == []


def test_a_target_partition_that_grows_while_its_takeover_is_planned_keeps_it_waiting(
    flow: FlowConfig, dr: str
) -> None:
    remote = f"{flow.source.alias}.orders"
    create_topic(dr, remote, partitions=1)
    producer = Producer({"bootstrap.servers": dr})
    producer.produce(remote, b"copied by MM2", partition=0)
    assert producer.flush(10) == 0
    with TakeoverPlanner(flow) as planner:
        assert planner.end_moved(remote, 0, 1) is None
        producer.produce(remote, b"MM2 copies on", partition=0)
        assert producer.flush(10) == 0
        moved = planner.end_moved(remote, 0, 1)
    assert moved is not None and "grew from 1 to 2 records" in moved, moved
    with pytest.raises(MirrorMakerRunning, match="grew from 1 to 2"):
        TakeoverGate(flow).check(moved)


def test_forced_the_takeover_goes_on_and_says_what_it_saw(
    flow: FlowConfig, caplog: pytest.LogCaptureFixture
) -> None:
    _beat(flow, flow.source.alias, flow.target.alias, age_s=1)
    gate = TakeoverGate(replace(flow, takeover_force=True))
    with caplog.at_level(logging.WARNING, logger="replicator.engine.mm2_liveness"):
        gate.check()
    assert f"heartbeat of {flow.name}" in caplog.text and f"{FORCE_SETTING} = true" in caplog.text
