"""Which compacted topics a flow writes, declared once (`flow_topics`): what
`replicator init` creates is what the workers, the checkpoint writer and a reset
request create at their first write."""

from __future__ import annotations

from replicator.engine.internal_topics import RESETS_TOPIC, STATUS_TOPIC, flow_topics, written_by

from helpers.engine_fakes import flow


def _where(topics: list) -> list[tuple[str, str, str]]:
    return [(t.cluster.alias, t.name, t.writer) for t in topics]


def test_a_flow_writes_its_status_resets_syncs_heartbeats_and_checkpoints() -> None:
    assert _where(flow_topics(flow())) == [
        ("dr", STATUS_TOPIC, "worker"),
        ("dr", RESETS_TOPIC, "resets"),
        ("primary", "mm2-offset-syncs.dr.internal", "worker"),
        ("primary", "heartbeats", "worker"),
        ("dr", "primary.checkpoints.internal", "checkpoints"),
    ]
    syncs = [t for t in flow_topics(flow()) if t.name.startswith("mm2-offset-syncs")]
    assert [t.history for t in syncs] == [True]  # read back whole: not compacted away


def test_what_a_flow_does_not_emit_is_not_created_by_init_either() -> None:
    # init created the offset-syncs and heartbeats topics of such a flow (the worker did
    # not), with replication factors the flow need not set for topics it never writes.
    quiet = flow(
        **{
            "emit.offset-syncs.enabled": "false",
            "emit.heartbeats.enabled": "false",
            "emit.checkpoints.enabled": "false",
            "sync.group.offsets.enabled": "false",
        }
    )
    assert _where(flow_topics(quiet)) == [
        ("dr", STATUS_TOPIC, "worker"),
        ("dr", RESETS_TOPIC, "resets"),
    ]
    assert _where(written_by(quiet, "worker")) == [("dr", STATUS_TOPIC, "worker")]


def test_offset_syncs_live_where_the_flow_says() -> None:
    on_target = flow(**{"offset-syncs.topic.location": "target"})
    [syncs] = [t for t in flow_topics(on_target) if t.name.startswith("mm2-offset-syncs")]
    assert syncs.cluster.alias == "dr"
