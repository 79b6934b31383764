"""The supervision DAGs and the lag sensor against the real clusters: the launcher
starts a real worker and the supervisor restarts it after `kill -9`; the supervisor
fails naming the partition on lag, retention gaps and stopped partitions, leaves a
flow that just started alone until its bounds have passed, and names the procedure
that left a flow stopped; the sync DAG translates a group's offsets onto the target;
the diagnose DAG returns its diagnosis; the lag sensor (poke) and its trigger see lag
fall to the bound."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.status import STATUS_TOPIC, PartitionStatus, StatusWriter, WorkerStatus
from replicator.offsets.checkpoints import read_checkpoints
from replicator.operations.lag import measure_lag
from replicator.operations.launchers import RUN_DIR_ENV, LocalProcessLauncher
from replicator.operations.supervision import Bounds, SupervisionError, supervise
from replicator.procedures import Failover, StepFailed, live_workers
from replicator.procedures.abort import abort
from replicator.statestore import STATE_URL_ENV, StateStore

from helpers.airflow import ROOT, dagbag, xcom
from helpers.kafka import create_topic, unique_topic
from helpers.procedures import commit_offsets, committed_offsets
from helpers.replication import preload, running, wait_until, write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def plugin(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """The plugin's sensor and trigger modules, imported once Airflow is configured."""
    monkeypatch.syspath_prepend(str(ROOT / "plugins"))
    from replicator_airflow import sensors, triggers  # noqa: PLC0415 - after airflow_home

    return {"sensors": sensors, "triggers": triggers}


@pytest.fixture
def flow_env(
    tmp_path: Path, primary: str, dr: str, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path, FlowConfig]:
    """A fresh two-partition topic with 100 records on primary, a primary->dr config
    for it, and the environment the DAGs' hook reads."""
    topic = unique_topic("sup")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 100, 2)
    config = write_config(
        tmp_path,
        primary,
        dr,
        topic,
        extra=("sync.group.offsets.enabled = true", "sync.group.offsets.interval.seconds = 3600"),
    )
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "replicators"))
    return topic, config, load_config(config).flow("primary->dr")


def _caught_up(flow: FlowConfig) -> bool:
    lag = measure_lag(flow)
    return len(lag.partitions) == 2 and lag.total_behind == 0


def test_trigger_serializes_to_what_recreates_it(plugin: dict[str, ModuleType]) -> None:
    from airflow.sdk.module_loading import import_string  # noqa: PLC0415 - after airflow_home

    trigger = plugin["triggers"].ReplicationLagTrigger(
        replicator_conn_id="replicator_dr",
        flow="primary->dr",
        max_lag=5,
        topics=["orders"],
        poll_interval_s=0.5,
        timeout_s=30.0,
    )
    path, kwargs = trigger.serialize()
    assert path == "replicator_airflow.triggers.ReplicationLagTrigger"
    again = import_string(path)(**json.loads(json.dumps(kwargs)))  # as stored in the DB
    assert again.serialize() == (path, kwargs)
    assert (again.replicator_conn_id, again.flow, again.max_lag, again.topics, again.timeout_s) == (
        "replicator_dr",
        "primary->dr",
        5,
        ["orders"],
        30.0,
    )


def test_supervisor_dag_restarts_a_killed_worker_the_launcher_started(
    airflow_home: Path, tmp_path: Path, state_url: str, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    _, config, flow = flow_env
    launcher = LocalProcessLauncher(tmp_path / "replicators", state_url=state_url)
    started = launcher.ensure_running("sup-worker", config)
    try:
        assert started.action == "started"
        assert launcher.alive("sup-worker")
        record = json.loads((tmp_path / "replicators" / "sup-worker.json").read_text())
        assert record["config"] == str(config.resolve())
        assert record["command"][1:] == ["-m", "replicator", "run", "--config", str(config)]
        assert STATE_URL_ENV not in json.dumps(record)
        assert launcher.ensure_running("sup-worker", config).action == "running"
        wait_until(lambda: live_workers(flow) and _caught_up(flow), 90, "the worker replicating")

        os.kill(record["pid"], signal.SIGKILL)
        wait_until(lambda: not launcher.alive("sup-worker"), 10, "the worker dead")
        began = datetime.now(UTC)
        run = dagbag().get_dag("replicator_supervisor").test()

        assert run.state == "success"
        # The run recorded its sample of the flow for the DR status page, by its params.
        [sample] = StateStore(state_url).samples.since(began, flow.name)
        assert sample.total_lag is not None and sample.problems == ()
        assert sample.bounds["max_lag_records"] == Bounds().max_lag_records
        assert launcher.alive("sup-worker")
        [worker] = launcher.workers()
        assert worker.where != started.where, "a new process runs under the name"
        assert (
            "starting worker sup-worker"
            in (tmp_path / "replicators" / "sup-worker.log").read_text()
        )
    finally:
        was_running = launcher.stop("sup-worker")
    assert was_running
    assert not launcher.alive("sup-worker")
    assert launcher.workers() == []


def test_pid_reused_by_another_process_is_not_the_worker(tmp_path: Path, dr: str) -> None:
    launcher = LocalProcessLauncher(tmp_path / "run")
    config = write_config(tmp_path, dr, dr, "none")
    (tmp_path / "run").mkdir()
    record = {
        "name": "ghost",
        "pid": os.getpid(),  # alive, but this is pytest, not a worker
        "config": str(config),
        "log": str(tmp_path / "run" / "ghost.log"),
        "started_at": "2024-01-01T00:00:00+00:00",
        "command": [sys.executable, "-m", "replicator", "run", "--config", str(config)],
    }
    (tmp_path / "run" / "ghost.json").write_text(json.dumps(record))
    assert not launcher.alive("ghost")
    assert launcher.stop("ghost") is False  # forgotten without signalling pytest
    assert launcher.workers() == []


def test_supervisor_fails_naming_every_partition_with_a_problem(
    airflow_home: Path, dr: str, store: StateStore, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    topic, config, _ = flow_env  # 50 records per partition, nothing replicated
    target = load_config(config).flow("primary->dr").target
    ensure_compacted_topic(target, STATUS_TOPIC, 1, "status.topic.replication.factor")
    writer = Producer({"bootstrap.servers": dr})
    status = StatusWriter(writer)
    status.publish(PartitionStatus("primary->dr", topic, 0, "replicating", lost=7))
    status.publish(
        PartitionStatus("primary->dr", topic, 1, "stopped", error="records deleted (fix it)")
    )
    assert writer.flush(30) == 0
    run = (
        dagbag()
        .get_dag("replicator_supervisor")
        .test(run_conf={"max_lag_records": 10, "restart": False})
    )
    with pytest.raises(SupervisionError) as raised:
        supervise(load_config(config), store, None, Bounds(max_lag_records=10))

    assert run.state == "failed"
    message = str(raised.value)
    assert f"flow primary->dr: {topic}[0]: 50 records behind" in message
    assert f"flow primary->dr: {topic}[1]: 50 records behind" in message
    assert f"{topic}[0]: 7 records deleted by retention on 'primary'" in message
    assert f"{topic}[1]: stopped by its failure policy: records deleted (fix it)" in message
    assert "no worker of flow primary->dr reported running" in message
    # Within the bounds nothing but the missing worker is wrong.
    relaxed = Bounds(max_lag_records=50, max_lost_records=7)
    problems = {p.check for p in raised.value.report.problems}
    assert {"lag", "retention", "stopped", "workers"} <= problems
    with pytest.raises(SupervisionError) as again:
        supervise(load_config(config), store, None, relaxed)
    assert {p.check for p in again.value.report.problems} - {"heartbeats"} == {
        "workers",
        "stopped",
    }
    # A group at a replicated position with no checkpoint, and no checkpoint or heartbeat
    # young enough for a bound of 0 s: both stalled.
    group = f"sup-group-{uuid.uuid4().hex[:8]}"
    commit_offsets(load_config(config).flow("primary->dr").source, group, {(topic, 0): 0})
    with pytest.raises(SupervisionError) as stalled:
        supervise(
            load_config(config),
            store,
            None,
            Bounds(max_lag_records=50, max_checkpoint_age_s=0, max_heartbeat_age_s=0),
        )
    message = str(stalled.value)
    assert f"group {group} {topic}[0] committed 0, checkpointed none" in message
    assert "primary.checkpoints.internal on 'dr': checkpoints stalled" in message
    assert "primary.heartbeats on 'dr': heartbeats stalled" in message
    # A flow the state store has stopped (a failover) is not checked at all.
    store.flows.set("primary->dr", "stopped")
    report = supervise(load_config(config), store, None, Bounds(max_lag_records=10))
    assert [(f.flow, f.wanted_running) for f in report.flows] == [("primary->dr", False)]


def test_a_flow_that_just_started_is_not_paged_until_its_bounds_have_passed(
    airflow_home: Path, store: StateStore, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    """The false alarm of a failover's reverse flow: groups on its source moved on, the
    flow started seconds ago and has written no checkpoint yet."""
    topic, config, flow = flow_env
    group = f"sup-group-{uuid.uuid4().hex[:8]}"
    commit_offsets(flow.source, group, {(topic, 0): 10, (topic, 1): 20})
    # As a failover starts its reverse flow: running in the store since now, no worker yet.
    store.flows.set(flow.name, "running", {"by": "failover-just-now"})
    assert supervise(load_config(config), store, None, Bounds()).problems == []

    with running(flow):  # the task alone: it writes no checkpoint
        wait_until(lambda: live_workers(flow) and _caught_up(flow), 90, "the flow replicating")
        [worker] = live_workers(flow)
        assert worker.started_ms is not None and worker.started_ms <= worker.updated_ms
        run = dagbag().get_dag("replicator_supervisor").test(run_conf={"restart": False})
        assert run.state == "success"
        assert supervise(load_config(config), store, None, Bounds()).problems == []
        # The bound counts from the start: past it, no checkpoint is a stalled round.
        with pytest.raises(SupervisionError) as stalled:
            supervise(load_config(config), store, None, Bounds(max_checkpoint_age_s=0))
    message = str(stalled.value)
    assert "primary.checkpoints.internal on 'dr': checkpoints stalled: none written yet" in message
    assert ", the flow has run for " in message
    assert f"group {group} {topic}[0] committed 10, checkpointed none" in message


def test_supervisor_names_the_procedure_that_left_a_flow_stopped(
    airflow_home: Path, dr: str, store: StateStore, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    """A failover that stops midway leaves the forward flow stopped: DR replication is
    off, and nothing will start it again until someone aborts the run."""
    topic, config_path, flow = flow_env
    config = load_config(config_path)
    ensure_compacted_topic(flow.target, STATUS_TOPIC, 1, "status.topic.replication.factor")
    writer = Producer({"bootstrap.servers": dr})  # a worker of the flow ran, and stopped
    StatusWriter(writer).publish(WorkerStatus(flow.name, "sup-gone", "stopped", topics=[topic]))
    assert writer.flush(30) == 0
    app = f"sup-app-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    failover = Failover(config, flow.name, [app], store, timeout_s=30)
    procedure = f"failover-{uuid.uuid4().hex[:12]}"
    failover.run_step(procedure, "stop_flow")
    stopped = store.flows.get(flow.name)
    assert stopped is not None and stopped.state == "stopped"
    # It runs (it holds its lease): it starts the flow again, or hands it over.
    assert supervise(config, store, None, Bounds()).problems == []
    # Also when it leases other things only (a failback stops the reverse flow, and
    # leases its forward flow and applications).
    store.leases.release(procedure)
    store.leases.acquire([f"application {app}"], procedure, 60)
    assert supervise(config, store, None, Bounds()).problems == []
    # Its orchestrator died: the lease lapses with no step to renew it.
    store.leases.acquire(failover.leases(), procedure, 0)
    with pytest.raises(SupervisionError) as abandoned:
        supervise(config, store, None, Bounds())
    assert f"by procedure {procedure} (failover run failover-" in str(abandoned.value)
    assert "which was abandoned: it holds no lease" in str(abandoned.value)

    with pytest.raises(StepFailed):
        failover.run_step(procedure, "verify")  # fails: offsets were never committed
    run = dagbag().get_dag("replicator_supervisor").test(run_conf={"restart": False})
    with pytest.raises(SupervisionError) as failed:
        supervise(config, store, None, Bounds())

    assert run.state == "failed"
    [problem] = failed.value.report.problems
    assert problem.check == "left stopped"
    assert f"by procedure {procedure}" in problem.detail
    assert "which failed at step 'verify'" in problem.detail
    assert "nothing replicates from 'primary' to 'dr'" in problem.detail
    assert f"`replicator abort {procedure}`" in problem.fix
    assert f"start the flow {flow.name} again" in problem.fix
    # The fix works: the abort starts the flow again.
    abort(store, procedure, reason="the supervisor said so")
    assert supervise(config, store, None, Bounds()).problems == []  # it started just now
    # A procedure that succeeded stopped it for good (the forward flow after a failover),
    # and the standby direction `make run` stops names no procedure: both are fine.
    # (The aborted run's record stays aborted: a later failover stops it, and succeeds.)
    done = f"failover-{uuid.uuid4().hex[:12]}"
    failover.run_step(done, "stop_flow")
    store.leases.release(done)
    store.flows.set(flow.name, "stopped", {"by": done})
    [history] = [r for r in store.runs.recent("failover") if r.params["procedure_id"] == done]
    store.runs.finish(history.run_id, "succeeded", 0, 1.0, {})
    assert supervise(config, store, None, Bounds()).problems == []
    store.flows.set(flow.name, "stopped")
    assert supervise(config, store, None, Bounds()).problems == []


def test_sync_dag_writes_checkpoints_and_translated_group_offsets(
    airflow_home: Path, dr: str, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    topic, _, flow = flow_env
    group = f"sup-group-{uuid.uuid4().hex[:8]}"
    commit_offsets(flow.source, group, {(topic, 0): 30, (topic, 1): 40})
    remote = f"primary.{topic}"

    with running(flow):  # the task alone: no checkpoint loop of its own
        wait_until(lambda: _caught_up(flow), 90, "everything replicated")
        run = dagbag().get_dag("replication_sync").test()

    assert run.state == "success"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "topics": "success",
        "checkpoints": "success",
        "acls": "success",  # sync.topic.acls.enabled is off: nothing to do
    }
    assert committed_offsets("dr", dr, group) == {(remote, 0): 30, (remote, 1): 40}
    checkpoints = read_checkpoints(flow.target, "primary.checkpoints.internal")
    assert {
        (p, c.upstream, c.downstream) for (g, _, p), c in checkpoints.items() if g == group
    } == {
        (0, 30, 30),
        (1, 40, 40),
    }


def test_diagnose_dag_returns_the_diagnosis_of_the_topic(
    airflow_home: Path, flow_env: tuple[str, Path, FlowConfig]
) -> None:
    topic, _, _ = flow_env
    run = (
        dagbag()
        .get_dag("diagnose_replication")
        .test(run_conf={"flow": "primary->dr", "topic": topic})
    )

    assert run.state == "success"
    diagnosis = xcom(run, "diagnose")
    assert (diagnosis["topic"], diagnosis["remote_topic"]) == (topic, f"primary.{topic}")
    assert diagnosis["verdict"] == "not replicated"  # no worker ever ran for it
    [missing] = [f for f in diagnosis["findings"] if f["check"] == "target topic"]
    assert missing["status"] == "problem"
    assert f"primary.{topic} does not exist on 'dr'" in missing["detail"]


def test_lag_sensor_and_trigger_see_lag_fall_to_the_bound(
    plugin: dict[str, ModuleType], flow_env: tuple[str, Path, FlowConfig]
) -> None:
    topic, _, flow = flow_env
    sensor = plugin["sensors"].ReplicationLagSensor(task_id="lag", flow=flow.name, max_lag=0)
    Trigger = plugin["triggers"].ReplicationLagTrigger

    def first_event(timeout_s: float) -> dict[str, Any]:
        trigger = Trigger(
            replicator_conn_id="replicator_default",
            flow=flow.name,
            max_lag=0,
            poll_interval_s=0.2,
            timeout_s=timeout_s,
        )

        async def first() -> dict[str, Any]:
            async for event in trigger.run():
                return event.payload
            raise AssertionError("the trigger ended without an event")

        return asyncio.run(asyncio.wait_for(first(), timeout_s + 60))

    assert not sensor.poke({})
    behind = first_event(0)
    assert behind["status"] == "timeout"
    assert f"{topic}[0] 50 behind" in behind["message"]
    with pytest.raises(Exception, match=f"{topic}\\[1\\] 50 behind"):
        sensor.execute_complete({}, behind)

    with running(flow):
        caught_up = first_event(90)
        assert caught_up == {
            "status": "caught_up",
            "message": "flow primary->dr: 2 partitions, at most 0 records behind (bound 0)",
            "max_behind": 0,
        }
        assert sensor.poke({})
        assert sensor.execute_complete({}, caught_up) == 0
        waited = dagbag().get_dag("wait_for_replication").test()
    assert waited.state == "success"
