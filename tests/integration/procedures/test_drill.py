"""The non-disruptive DR drill against the real clusters, with `replicator run` in a
thread: a healthy flow passes record by record (match / at_end) with RPO and RTO in
the history and nothing left behind; a forged record and a partition stopped at an
oversized record are found and named, and the evidence stays in the history; a dry
run writes nothing, and a rerun with the same id applies no step twice."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator.engine.status import PartitionStatus, read_status
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin
from replicator.procedures import live_workers
from replicator.procedures.drill import SHADOW_METADATA, Drill
from replicator.statestore import StateStore

from helpers.kafka import Record, create_topic, make_records, unique_topic
from helpers.procedures import runner
from helpers.replication import end_offsets, flow_config, wait_until, write_config

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    state = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    yield state
    state.close()


def _produce(bootstrap: str, topic: str, partition: int, records: list[Record]) -> None:
    """`records` into one partition, in order (idempotent producer)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for record in records:
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp=record.timestamp,
            partition=partition,
        )
    assert producer.flush(60) == 0


def _commit(admin: GroupAdmin, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group`, again while a coordinator is still loading."""

    def committed() -> bool:
        try:
            admin.commit(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        except ReplicatorError:
            return False
        return _committed(admin, group) == offsets

    wait_until(committed, _TIMEOUT_S, f"offsets of {group} committed")


def _committed(admin: GroupAdmin, group: str) -> dict[tuple[str, int], int]:
    return {(c.topic, c.partition): c.offset for c in admin.committed(group)}


def _statuses(report: dict[str, Any]) -> dict[int, str]:
    return {p["partition"]: p["status"] for p in report["partitions"]}


def _replicated(flow: FlowConfig, dr: str, remote: str, wanted: list[int]) -> None:
    wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow's worker running")
    wait_until(
        lambda: end_offsets(dr, remote, len(wanted)) == wanted,
        _TIMEOUT_S,
        f"{remote} replicated to {wanted}",
    )


def test_drill_of_a_healthy_flow_matches_every_position_and_stores_the_evidence(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    topic = unique_topic("drill.orders")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=4)
    for partition in range(4):
        _produce(primary, topic, partition, make_records(20))
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    config = load_config(write_config(tmp_path, primary, dr, topic))
    group = f"orders-{uuid.uuid4().hex[:8]}"
    shadow = f"drill-{group}"
    # Three groups positions in the middle of their partitions, one at the end.
    committed = {(topic, 0): 5, (topic, 1): 10, (topic, 2): 19, (topic, 3): 20}
    source, target = GroupAdmin(flow.source), GroupAdmin(flow.target)
    _commit(source, group, committed)

    with runner([flow], store):
        _replicated(flow, dr, remote, [20] * 4)
        report = Drill(config, "primary->dr", [group], store, timeout_s=_TIMEOUT_S).run()

    assert report.ok, report.error
    assert [(s.name, s.status) for s in report.steps] == [
        ("preflight", "done"), ("translate", "done"), ("commit_shadow", "done"),
        ("check", "done"), ("cleanup", "done"), ("verdict", "done"),
    ]  # fmt: skip
    check = report.report_of("check")
    assert _statuses(check) == {0: "match", 1: "match", 2: "match", 3: "at_end"}, check
    positions = {
        p["partition"]: (p["source_offset"], p["target_offset"]) for p in check["partitions"]
    }
    # One-to-one layout on a fresh remote topic: the same offsets on both sides.
    assert positions == {0: (5, 5), 1: (10, 10), 2: (19, 19), 3: (20, 20)}
    assert report.report_of("commit_shadow")["shadow_groups"].keys() == {shadow}
    assert report.rpo_records == 0
    assert report.rto_seconds is not None and report.rto_seconds > 0

    [run] = store.runs.recent("drill")
    assert (run.outcome, run.flow, run.mode) == ("succeeded", "primary->dr", "non-disruptive")
    assert (run.rpo_records, run.rto_seconds) == (0, report.rto_seconds)
    assert _statuses(run.details["steps"]["check"]) == _statuses(check)
    assert run.params["groups"] == [group]

    # The shadow group is gone; the real group is where it was on both clusters.
    assert _committed(target, shadow) == {}
    assert shadow not in target.groups(flow.groups)
    assert _committed(source, group) == committed
    assert _committed(target, group) == {}


def test_drill_finds_a_forged_record_and_an_unreplicated_position(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    topic = unique_topic("drill.bad")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=3)
    # Records over 20000 bytes do not fit the remote topic: partition 1 stops there.
    create_topic(dr, remote, partitions=3, config={"max.message.bytes": "20000"})
    records = {p: make_records(10) for p in range(3)}
    big = records[1][5]
    records[1][5] = Record(big.key, b"x" * 50_000, big.headers, big.timestamp)
    # Partition 0 of the remote topic already holds a record that claims to be source
    # offset 0 but carries another value: the flow resumes after it, so the copy of
    # source offset 0 is wrong. Everything but the value is right.
    first = records[0][0]
    forged = Record(
        first.key,
        b"forged",
        (*first.headers, (SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(0))),
        first.timestamp,
    )
    _produce(dr, remote, 0, [forged])
    for partition, partition_records in records.items():
        _produce(primary, topic, partition, partition_records)

    no_config_sync = ("sync.topic.configs.enabled = false",)
    flow = flow_config(
        ("primary", primary), ("dr", dr), topic, {"sync.topic.configs.enabled": "false"}
    )
    config = load_config(write_config(tmp_path, primary, dr, topic, extra=no_config_sync))
    group = f"bad-{uuid.uuid4().hex[:8]}"
    source, target = GroupAdmin(flow.source), GroupAdmin(flow.target)
    committed = {(topic, 0): 0, (topic, 1): 8, (topic, 2): 4}
    _commit(source, group, committed)

    def partitions() -> dict[int, tuple[str, int | None]]:
        """Partition -> (state, next offset), as the status topic says now."""
        rows = read_status(flow.target, flow.name)
        return {
            r.partition: (r.state, r.next_offset)
            for r in rows
            if isinstance(r, PartitionStatus) and r.topic == topic
        }

    with runner([flow], store):
        wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow's worker running")
        wait_until(
            lambda: (
                (s := partitions()).get(1, ("", None))[0] == "stopped"
                and s.get(0, ("", None))[1] == 10
                and s.get(2, ("", None))[1] == 10
            ),
            _TIMEOUT_S,
            "partition 1 stopped at the big record, partitions 0 and 2 replicated",
        )
        report = Drill(config, "primary->dr", [group], store, timeout_s=5).run()

    assert report.outcome == "failed"
    assert [(s.name, s.status) for s in report.steps][-3:] == [
        ("check", "done"), ("cleanup", "done"), ("verdict", "failed"),
    ]  # fmt: skip
    check = report.report_of("check")
    assert _statuses(check) == {0: "mismatch", 1: "not_replicated", 2: "match"}, check
    details = {p["partition"]: p["detail"] for p in check["partitions"]}
    assert "value differs" in details[0] and "key" not in details[0]
    assert "timestamp" not in details[0] and "headers" not in details[0]
    assert "3 records before source offset 8" in details[1], details[1]
    error = report.error or ""
    assert f"{topic}[0]@0" in error and f"{topic}[1]@8" in error
    assert f"{topic}[2]" not in error
    assert report.rpo_records == 5  # source offsets 5..9 of partition 1

    [run] = store.runs.recent("drill")
    assert (run.outcome, run.rpo_records) == ("failed", 5)
    assert run.rto_seconds is not None
    assert run.details["failed_step"] == "verdict"
    assert _statuses(run.details["steps"]["check"]) == _statuses(check)
    assert _committed(target, f"drill-{group}") == {}, "cleaned up despite the verdict"
    assert _committed(source, group) == committed


def test_dry_run_writes_nothing_and_a_rerun_skips_done_steps(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    topic = unique_topic("drill.resume")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=2)
    for partition in range(2):
        _produce(primary, topic, partition, make_records(10))
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    config = load_config(write_config(tmp_path, primary, dr, topic))
    group = f"resume-{uuid.uuid4().hex[:8]}"
    shadow = f"drill-{group}"
    source, target = GroupAdmin(flow.source), GroupAdmin(flow.target)
    _commit(source, group, {(topic, 0): 3, (topic, 1): 10})

    def drill(**options: object) -> Drill:
        # No groups named: the drill finds the flow's groups with positions on its topics.
        return Drill(config, "primary->dr", [], store, timeout_s=_TIMEOUT_S, **options)

    with runner([flow], store):
        _replicated(flow, dr, remote, [10, 10])

        dry = drill(dry_run=True).run("drill-resume")
        assert dry.outcome == "planned", dry.error
        assert [s.status for s in dry.steps] == ["planned"] * 6
        assert dry.report_of("preflight")["groups"] == [group]
        assert dry.report_of("commit_shadow")["would_commit"] == {
            shadow: [
                {"remote_topic": remote, "partition": 0, "target_offset": 3, "source_offset": 3},
                {"remote_topic": remote, "partition": 1, "target_offset": 10, "source_offset": 10},
            ]
        }
        assert _statuses(dry.report_of("check")) == {0: "match", 1: "at_end"}
        assert dry.report_of("cleanup") == {"would_delete": [shadow]}
        assert dry.rpo_records is None and dry.rto_seconds is None
        assert store.runs.steps("drill-resume") == [] and store.runs.recent("drill") == []
        assert _committed(target, shadow) == {}

        # Kept for inspection: the shadow group carries the drill's marker.
        procedure = drill(keep_shadow=True)
        for step in ("preflight", "translate", "commit_shadow"):
            assert procedure.run_step("drill-resume", step).status == "done"
        marked = target.committed(shadow)
        assert {(c.partition, c.offset) for c in marked} == {(0, 3), (1, 10)}
        assert all(c.metadata == f"{SHADOW_METADATA} drill-resume" for c in marked)

        resumed = drill(keep_shadow=True).run("drill-resume")
        assert resumed.ok, resumed.error
        assert [s.status for s in resumed.steps] == ["skipped"] * 3 + ["done"] * 3
        assert resumed.report_of("cleanup") == {"kept": [shadow], "deleted": []}
        again = drill(keep_shadow=True).run("drill-resume")
        assert [s.status for s in again.steps] == ["skipped"] * 6
        [run] = store.runs.recent("drill")
        assert (run.outcome, run.rpo_records) == ("succeeded", 0) and run.rto_seconds

        # A later drill overwrites and deletes a kept shadow group (a drill's own).
        later = drill().run()
        assert later.ok, later.error
        assert later.report_of("cleanup") == {"kept": [], "deleted": [shadow]}
        assert _committed(target, shadow) == {}

        # A real group on the target that has a shadow's name is never touched.
        taken = {(remote, 0): 1}
        _commit(target, shadow, taken)
        refused = drill().run()
        assert refused.outcome == "failed"
        assert [s.status for s in refused.steps] == ["failed"]
        assert "choose another shadow prefix" in (refused.error or "")
        assert _committed(target, shadow) == taken
        assert _committed(source, group) == {(topic, 0): 3, (topic, 1): 10}
