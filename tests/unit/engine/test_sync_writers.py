"""MM2 and this replicator write offset syncs to the same topic; only MM2's are MM2's
state. Ours once counted as evidence of an MM2 copy, so a replicator-only partition
whose replicas had expired on the target was refused as an unproven takeover (issue 44);
now they say where our own copy stood."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config.model import FlowConfig
from replicator.engine.formats import OWN_SYNC_HEADER, OffsetSync
from replicator.engine.mm2_state import MirrorMakerState

from helpers.mock_cluster import flow_on, mock_cluster

SYNCS = "mm2-offset-syncs.dr.internal"  # MM2's default name, on the source


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[FlowConfig]:
    with mock_cluster() as cluster:
        cluster.create_topic(SYNCS, 1)
        yield flow_on(cluster, tmp_path)


def _sync(flow: FlowConfig, partition: int, upstream: int, ours: bool) -> None:
    producer = Producer({"bootstrap.servers": flow.source.bootstrap_servers})
    sync = OffsetSync("orders", partition, upstream, upstream)
    headers = [OWN_SYNC_HEADER] if ours else None
    producer.produce(SYNCS, key=sync.key(), value=sync.value(), headers=headers)
    assert producer.flush(10) == 0


def test_our_offset_syncs_are_not_mm2s_evidence_but_our_own_position(flow: FlowConfig) -> None:
    _sync(flow, 0, 41, ours=False)  # MM2's
    _sync(flow, 1, 57, ours=True)  # ours
    state = MirrorMakerState.read(flow)
    assert state.has_evidence("orders", 0)
    assert state.syncs == {("orders", 0): [(41, 41)]}
    assert not state.has_evidence("orders", 1)
    assert state.own_sync("orders", 1) == (57, 57)
    assert state.own_sync("orders", 0) is None
