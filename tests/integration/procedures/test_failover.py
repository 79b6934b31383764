"""Failover procedures against the real clusters: planned with the demo apps and a
running `replicator run` (zero lost, zero processed twice), resumed after an
interruption without applying a step twice, dry run, and unplanned with the
primary's broker stopped (the report names every unreplicated offset)."""

from __future__ import annotations

import contextlib
import signal
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.engine.status import PartitionStatus, WorkerStatus, read_status
from replicator.offsets.checkpoints import Checkpointer
from replicator.procedures import Failback, Failover, live_workers
from replicator.procedures.phases import PHASES
from replicator.procedures.positions import wait_drained
from replicator.statestore import StateStore, check_ledgers, read_ledger
from replicator_lab import LocalStack

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import (
    SceneMaker,
    commit_offsets,
    committed_offsets,
    demo_apps,
    runner,
    wait_processed,
)
from helpers.replication import (
    flow_config,
    preload,
    start_replicator,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

_TIMEOUT_S = 90.0


def test_planned_failover_and_failback_with_live_apps_lose_and_duplicate_nothing(
    tmp_path: Path, procedure_scene: SceneMaker
) -> None:
    scene = procedure_scene("demo.orders", partitions=3, reverse=True)
    config, app, store, topic = scene.config, scene.app, scene.store, scene.topic
    produced, consumed = tmp_path / "produced.jsonl", tmp_path / "consumed.jsonl"
    common = ["--config", str(scene.config_path), "--app", app, "--topic", topic]
    common += ["--state-url", scene.state_url]
    # The replicator obeys the same store ($REPLICATOR_STATE_URL).
    replicator = start_replicator(scene.config_path, tmp_path / "replicator.log")

    try:
        with demo_apps(tmp_path) as start:
            producer = start("producer", *common, "--ledger", str(produced), "--rate", "50")
            consumer = start("consumer", *common, "--ledger", str(consumed))
            wait_processed(consumed, "primary", 100, _TIMEOUT_S)
            wait_until(
                lambda: len(store.applications.clients(app, seen_within_s=5)) == 2,
                _TIMEOUT_S,
                "clients",
            )
            forward = config.flow("primary->dr")
            wait_until(lambda: live_workers(forward), _TIMEOUT_S, "the replicator running")

            failover = Failover(
                config, "primary->dr", [app], store, reverse=True, timeout_s=_TIMEOUT_S
            ).run()

            assert failover.ok, failover.error
            assert [s.name for s in failover.steps] == [
                "preflight", "fence", "drain", "stop_flow", "commit_offsets",
                "switch", "checkpoint", "start_reverse", "verify",
            ]  # fmt: skip
            assert failover.rpo_records == 0
            assert failover.rto_seconds is not None and failover.rto_seconds > 0
            assert len(failover.report_of("fence")["fenced"][app]["clients"]) == 2
            # The group continued on dr exactly after its last record processed on primary.
            commits = failover.report_of("commit_offsets")["groups"][app]
            assert {e["to_topic"] for e in commits} == {f"primary.{topic}"}
            assert store.applications.get(app).active_cluster == "dr"
            assert store.flows.get("primary->dr").state == "stopped"
            [run] = store.runs.recent("failover")
            assert (run.outcome, run.rpo_records) == ("succeeded", 0)
            assert run.rto_seconds == failover.rto_seconds
            # Every phase of the cutover, in order, the last the clients' resumption.
            phases = failover.phases
            assert list(phases) == list(PHASES) and run.details["phases"] == phases
            moments = [phases[p] for p in PHASES]
            assert all(m is not None for m in moments), phases
            assert moments == sorted(moments), phases
            assert phases["switch_written"] == pytest.approx(run.downtime_seconds, abs=0.01)

            wait_processed(consumed, "dr", 100, _TIMEOUT_S)
            failback = Failback(config, "primary->dr", [app], store, timeout_s=_TIMEOUT_S).run()

            assert failback.ok, failback.error
            assert failback.report_of("reconcile")["records"] == 0
            assert failback.rpo_records == 0 and failback.rto_seconds
            moved = failback.report_of("commit_offsets")["groups"][app]
            assert {e["to_topic"] for e in moved} == {topic, f"dr.{topic}"}
            assert store.applications.get(app).active_cluster == "primary"
            assert store.flows.get("primary->dr").state == "running"
            assert store.flows.get("dr->primary").state == "stopped"
            [back] = store.runs.recent("failback")
            assert (back.outcome, back.rpo_records) == ("succeeded", 0)

            wait_processed(consumed, "primary", 100, _TIMEOUT_S)
            producer.send_signal(signal.SIGTERM)
            assert producer.wait(timeout=60) == 0
            wait_until(
                lambda: (
                    {e.id for e in read_ledger(consumed)} >= {e.id for e in read_ledger(produced)}
                ),
                _TIMEOUT_S,
                "every acknowledged record processed",
            )
            consumer.send_signal(signal.SIGTERM)
            assert consumer.wait(timeout=60) == 0
            # The forward flow runs again: what was written after the failback is on dr.
            wait_drained(config.flow("primary->dr"), _TIMEOUT_S, "the resumed forward flow")
    finally:
        replicator.send_signal(signal.SIGTERM)
        assert replicator.wait(timeout=90) == 0

    check = check_ledgers([produced], [consumed])
    assert check.ok, check.summary()
    assert check.produced >= 300


def test_interrupted_failover_resumes_without_applying_a_step_twice(
    procedure_scene: SceneMaker,
) -> None:
    committed = {0: 400, 1: 0, 2: 1_000}
    scene = procedure_scene("resume", partitions=3, records=3_000, offsets=committed)
    config, app, store, [flow] = scene.config, scene.app, scene.store, scene.flows
    topic, dr = scene.topic, scene.dr
    remote = f"primary.{topic}"

    def failover(**options: object) -> Failover:
        return Failover(config, "primary->dr", [app], store, timeout_s=_TIMEOUT_S, **options)

    with scene.running():
        dry = failover(dry_run=True).run("fo-resume")
        assert dry.outcome == "planned", dry.error
        assert [s.status for s in dry.steps] == ["planned"] * len(dry.steps)
        would = {
            e["partition"]: e["from_offset"]
            for e in dry.report_of("commit_offsets")["would_commit"][app]
        }
        assert would == committed
        assert store.runs.steps("fo-resume") == [] and store.runs.recent("failover") == []
        assert store.applications.get(app).epoch == 0 and not store.applications.get(app).fenced
        assert store.flows.get(flow.name) is None
        assert committed_offsets("dr", dr, app) == {}

        procedure = failover()
        for step in ("preflight", "fence", "drain", "stop_flow"):
            assert procedure.run_step("fo-resume", step).status == "done"
        assert live_workers(flow) == [], "the runner stopped the flow's task"
        assert any(
            isinstance(r, WorkerStatus) and r.state == "stopped"
            for r in read_status(flow.target, flow.name)
        )

        calls = []
        real_commit = procedure._commit_offsets

        def crash_once() -> dict[str, object]:
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("orchestrator worker lost")
            return real_commit()

        procedure._commit_offsets = crash_once  # type: ignore[method-assign]
        failed = procedure.run("fo-resume")
        assert failed.outcome == "failed" and "commit_offsets" in (failed.error or "")
        assert [s.status for s in failed.steps] == ["skipped"] * 4 + ["failed"]
        assert store.runs.recent("failover")[0].outcome == "failed"

        resumed = failover().run("fo-resume")  # a new process: only the store remembers
        assert resumed.ok, resumed.error
        assert [s.status for s in resumed.steps] == ["skipped"] * 4 + ["done"] * 4
        again = failover().run("fo-resume")
        assert [s.status for s in again.steps] == ["skipped"] * 8
        assert store.applications.get(app).epoch == 2, "fenced once, switched once"
        [run] = store.runs.recent("failover")
        assert (run.outcome, run.rpo_records) == ("succeeded", 0) and run.rto_seconds

        per_partition = {(remote, p): o for p, o in committed.items()}
        assert committed_offsets("dr", dr, app) == per_partition  # same layout, offsets map 1:1

        store.flows.set(flow.name, "running")
        wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow running again")


def test_unplanned_failover_reports_every_unreplicated_offset(
    tmp_path: Path, lone_primary: LocalStack, dr: str, store: StateStore
) -> None:
    primary = lone_primary.bootstrap("primary")
    topic = unique_topic("unplanned")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=2)
    # The remote partition 0 refuses the big record at source offset 10: the partition
    # stops there and everything after it stays unreplicated.
    create_topic(dr, remote, partitions=2, config={"max.message.bytes": "20000"})
    producer = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    for i in range(16):
        value = b"x" * (50_000 if i == 10 else 10)
        producer.produce(topic, value=value, partition=0)
    for _ in range(20):
        producer.produce(topic, value=b"y", partition=1)
    assert producer.flush(30) == 0
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        topic,
        {"sync.topic.configs.enabled": "false", "refresh.topics.enabled": "false"},
    )
    config = load_config(
        write_config(tmp_path, primary, dr, topic, extra=("sync.topic.configs.enabled = false",))
    )
    app = f"app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    commit_offsets(flow.source, app, {(topic, 0): 5, (topic, 1): 20})

    def partition_status() -> dict[int, PartitionStatus]:
        return {
            r.partition: r
            for r in read_status(flow.target, flow.name)
            if isinstance(r, PartitionStatus) and r.topic == topic
        }

    with runner([flow], store):
        wait_until(
            lambda: (
                (s := partition_status()).keys() >= {0, 1}
                and s[0].state == "stopped"
                and s[0].lag == 6
                and s[1].next_offset == 20
            ),
            _TIMEOUT_S,
            "partition 0 stopped at the big record, partition 1 replicated",
        )
        with Checkpointer(flow) as checkpointer:
            written = checkpointer.emit([app])  # or by `replicator run`'s own round
            assert len(written.emitted) + written.unchanged == 2 and not written.held
        lone_primary.down(["primary"])

        report = Failover(
            config, "primary->dr", [app], store, mode="unplanned", timeout_s=_TIMEOUT_S
        ).run()

    assert report.ok, report.error
    unreplicated = {
        p["partition"]: (p["unreplicated"], p["records"])
        for p in report.report_of("unreplicated")["partitions"]
    }
    assert unreplicated == {0: ([10, 15], 6), 1: ([], 0)}
    assert report.rpo_records == 6
    assert report.rto_seconds is not None
    assert store.applications.get(app).active_cluster == "dr"
    assert committed_offsets("dr", dr, app) == {(remote, 0): 5, (remote, 1): 20}
    assert store.runs.recent("failover")[0].rpo_records == 6


def test_a_dry_run_passes_while_the_flow_copies_towards_the_groups(
    procedure_scene: SceneMaker,
) -> None:
    """A failover's plan (a dry run: what the DAG's `plan` task runs) while the flow is
    behind the groups: their positions are not replicated yet when the plan reads
    them, and are by the time its verify step looks at the copies (a loaded machine's
    Docker stack failed its failback plan so: "offset 0 holds the copy of
    demo.orders@0, not of @194"). They are counted as not replicated yet, not failed."""
    scene = procedure_scene("dryrun", partitions=2)
    config, app, store, topic = scene.config, scene.app, scene.store, scene.topic
    remote, [flow] = f"primary.{topic}", scene.flows
    procedure = Failover(config, "primary->dr", [app], store, timeout_s=_TIMEOUT_S, dry_run=True)
    checked, planned = procedure._preflight_planned, procedure._preview_commit_offsets

    with contextlib.ExitStack() as flow_running:

        def checked_then_stopped() -> dict[str, object]:
            report = checked()  # the flow runs, nothing behind
            flow_running.close()
            preload(scene.primary, topic, 2_000, 2)  # the applications went on
            commit_offsets(flow.source, app, {(topic, 0): 900, (topic, 1): 0})
            return report

        def planned_then_replicated() -> dict[str, object]:
            report = planned()  # the flow has copied none of it yet
            flow_running.enter_context(scene.running())
            wait_drained(flow, _TIMEOUT_S, "everything replicated")
            return report

        procedure._preflight_planned = checked_then_stopped  # type: ignore[method-assign]
        procedure._preview_commit_offsets = planned_then_replicated  # type: ignore[method-assign]
        flow_running.enter_context(scene.running())
        dry = procedure.run("fo-dry-behind")

    assert dry.outcome == "planned", dry.error
    would = dry.report_of("commit_offsets")["would_commit"][app]
    assert {(e["to_topic"], e["partition"], e["pending"]) for e in would} == {
        (remote, 0, True),
        (remote, 1, False),  # at the start: nothing before it to wait for
    }
    assert dry.report_of("verify") == {
        "positions_checked": 1,
        "ok": True,
        "positions_not_replicated_yet": 1,
    }
