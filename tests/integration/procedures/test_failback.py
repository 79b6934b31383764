"""Failback after an unplanned failover: the old primary comes back holding records
that never reached DR. They are listed per partition; with "replicate" they reach
DR exactly once and the group processes them once; with "report" the group skips
them. The procedure resumes after an interruption without applying a step twice."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.offsets.checkpoints import Checkpointer
from replicator.procedures import Failback, Failover, live_workers
from replicator.statestore import StateStore
from replicator_lab import LocalStack

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import commit_offsets, committed_offsets, runner
from helpers.replication import flow_config, preload, source_offsets_on_target, wait_until

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0
_PARTITIONS = 2
_REPLICATED = 20  # per partition, before the outage
_STRANDED = 5  # per partition, written on primary after the flow stopped
_WRITTEN_ON_DR = 7  # per partition, written on dr during the outage


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(_PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def test_failback_lists_stranded_records_and_replicates_them_exactly_once(
    tmp_path: Path, lone_primary: LocalStack, dr: str, store: StateStore
) -> None:
    primary = lone_primary.bootstrap("primary")
    topic = unique_topic("failback")
    remote, back = f"primary.{topic}", f"dr.{topic}"
    create_topic(primary, topic, partitions=_PARTITIONS)
    create_topic(dr, topic, partitions=_PARTITIONS)
    preload(primary, topic, _REPLICATED * _PARTITIONS, _PARTITIONS)
    properties = {
        "clusters": "primary, dr",
        "primary.bootstrap.servers": primary,
        "dr.bootstrap.servers": dr,
        "dr->primary.enabled": "true",
        "dr->primary.topics": topic,
    }
    forward = flow_config(("primary", primary), ("dr", dr), topic, properties)
    reverse = flow_config(("dr", dr), ("primary", primary), topic, properties)
    config = load_config(
        {
            **properties,
            "primary->dr.enabled": "true",
            "primary->dr.topics": topic,
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "status.topic.replication.factor": "1",
        }
    )
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    store.flows.set(reverse.name, "stopped")
    every = {(topic, p): _REPLICATED for p in range(_PARTITIONS)}
    commit_offsets(forward.source, app, every)

    with runner([forward, reverse], store):
        wait_until(
            lambda: all(
                source_offsets_on_target(dr, remote, p, _REPLICATED) == list(range(_REPLICATED))
                for p in range(_PARTITIONS)
            ),
            _TIMEOUT_S,
            "the first records replicated",
        )
        with Checkpointer(forward) as checkpointer:
            written = checkpointer.emit([app])  # or by `replicator run`'s own round
            assert len(written.emitted) + written.unchanged == _PARTITIONS and not written.held
        # The flow stops; the primary takes more records that never reach dr; it fails.
        store.flows.set(forward.name, "stopped")
        wait_until(lambda: not live_workers(forward), _TIMEOUT_S, "the forward flow stopped")
        _produce(primary, topic, _STRANDED)
        lone_primary.down(["primary"])

        failover = Failover(
            config, forward.name, [app], store, mode="unplanned", timeout_s=30
        ).run()
        assert failover.ok, failover.error
        assert committed_offsets("dr", dr, app) == {(remote, p): 20 for p in range(_PARTITIONS)}

        # During the outage the application writes on dr and processes some of it.
        _produce(dr, topic, _WRITTEN_ON_DR)
        commit_offsets(reverse.source, app, {(topic, p): 4 for p in range(_PARTITIONS)})
        lone_primary.up(timeout=120, keep_running=True)

        def failback(**options: object) -> Failback:
            return Failback(config, forward.name, [app], store, timeout_s=_TIMEOUT_S, **options)

        dry = failback(reconcile="report", dry_run=True).run("fb-stranded")
        assert dry.outcome == "planned", dry.error
        skipped = {
            (e["to_topic"], e["partition"]): e["to_offset"]
            for e in dry.report_of("commit_offsets")["would_commit"][app]
        }
        stranded_end = _REPLICATED + _STRANDED
        # "report": the group was at the first stranded record, so it skips them. (The
        # reverse copies do not exist yet: the dry run does not start the reverse flow.)
        assert {k: v for k, v in skipped.items() if k[0] == topic} == {
            (topic, p): stranded_end for p in range(_PARTITIONS)
        }
        assert {k for k in skipped if k[0] == back} == {(back, p) for p in range(_PARTITIONS)}
        assert store.runs.steps("fb-stranded") == [] and store.runs.recent("failback") == []

        procedure = failback()
        for step in ("preflight", "reconcile"):  # an orchestrator that then dies
            assert procedure.run_step("fb-stranded", step).status == "done"
        report = failback().run("fb-stranded")

    assert report.ok, report.error
    assert [s.status for s in report.steps[:3]] == ["skipped", "skipped", "done"]
    stranded = {
        p["partition"]: (p["unreplicated"], p["records"])
        for p in report.report_of("reconcile")["partitions"]
    }
    assert stranded == {p: ([_REPLICATED, stranded_end - 1], _STRANDED) for p in range(2)}
    # The copy starts at once (the flow's start overlaps the next steps); verify waited.
    started = report.report_of("replicate_missing")
    assert started["replicating"] == _STRANDED * _PARTITIONS and started["seconds"] < 2
    assert report.report_of("verify")["reconciled_copied"] == _STRANDED * _PARTITIONS
    for partition in range(_PARTITIONS):  # on dr exactly once, after the others
        copied = source_offsets_on_target(dr, remote, partition, stranded_end)
        assert copied == list(range(stranded_end))
    # The group was at the end of the copies on dr: it resumes at the first stranded
    # record on primary, and after its last processed dr record on the reverse copies.
    assert committed_offsets("primary", primary, app) == {
        **{(topic, p): _REPLICATED for p in range(_PARTITIONS)},
        **{(back, p): 4 for p in range(_PARTITIONS)},
    }
    assert store.applications.get(app).active_cluster == "primary"
    [run] = store.runs.recent("failback")
    assert (run.outcome, run.rpo_records, run.mode) == ("succeeded", 0, "replicate")
    assert run.rto_seconds is not None
