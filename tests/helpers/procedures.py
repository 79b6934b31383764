"""Helpers for the DR procedure tests: demo apps as subprocesses, a runner in a thread,
and the `procedure_scene` fixture (conftest.py registers this module as a plugin)."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest
from confluent_kafka import TopicPartition

from replicator.config import load_config
from replicator.config.model import ClusterConfig, FlowConfig, ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin
from replicator.operations.runner import run_flows
from replicator.procedures import live_workers
from replicator.statestore import STATE_URL_ENV, StateStore, read_ledger
from replicator_lab.demo_apps import DEMO_DIR

from helpers.kafka import create_topic, unique_topic
from helpers.replication import preload, wait_until, write_config

Start = Callable[..., subprocess.Popen[bytes]]


@contextmanager
def demo_apps(logs: Path) -> Iterator[Start]:
    """Start demo apps (`start("producer", *args)`), logging under `logs`; every one
    still running at the end is killed."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(script: str, *args: str) -> subprocess.Popen[bytes]:
        with (logs / f"{script}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, str(DEMO_DIR / f"{script}.py"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        processes.append(process)
        return process

    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@contextmanager
def runner(flows: list[FlowConfig], store: StateStore) -> Iterator[None]:
    """`replicator run` for `flows` in a thread, obeying `store`'s flow states."""
    stop = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run_flows(flows, stop, store)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="runner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=120)
        assert not thread.is_alive(), "runner did not stop within 120 s"
        if failure:
            raise failure[0]


def cluster_config(alias: str, bootstrap: str) -> ClusterConfig:
    client = {"bootstrap.servers": bootstrap}
    return ClusterConfig(alias, bootstrap, consumer=client, producer=client, admin=client)


def committed_offsets(alias: str, bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = GroupAdmin(cluster_config(alias, bootstrap))
    return {(c.topic, c.partition): c.offset for c in admin.committed(group)}


def commit_offsets(cluster: ClusterConfig, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group`, again while a fresh cluster's coordinator loads."""
    admin = GroupAdmin(cluster)

    def committed() -> bool:
        try:
            admin.commit(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        except ReplicatorError:
            return False
        now = {(c.topic, c.partition): c.offset for c in admin.committed(group)}
        return all(now.get(where) == offset for where, offset in offsets.items())

    wait_until(committed, 90, f"offsets of {group} committed")


def ids_on(ledger: Path, cluster: str) -> set[str]:
    """The record ids a demo app's ledger holds for `cluster`."""
    return {entry.id for entry in read_ledger(ledger) if entry.cluster == cluster}


def wait_processed(consumed: Path, cluster: str, more: int, timeout: float) -> None:
    """Wait until the consumer ledger holds `more` records processed on `cluster`
    than it does now."""
    wanted = len(ids_on(consumed, cluster)) + more
    wait_until(
        lambda: len(ids_on(consumed, cluster)) >= wanted,
        timeout,
        f"{more} more records processed on {cluster}",
    )


@dataclass
class ProcedureScene:
    """What a procedure test starts from: a topic of its own replicated primary->dr
    (and dr->primary, left stopped for the failover to start), one application on
    the primary with committed offsets, and the test's state store. The environment's
    `$REPLICATOR_CONFIG` and `$REPLICATOR_STATE_URL` name them, as the DAGs'
    connection, the CLI and a `replicator run` subprocess read them."""

    topic: str
    app: str
    config_path: Path
    config: ReplicatorConfig
    flows: list[FlowConfig]  # primary->dr first
    primary: str
    dr: str
    state_url: str
    store: StateStore

    @contextmanager
    def running(self) -> Iterator[None]:
        """`replicator run` for the flows in a thread, once primary->dr runs."""
        with runner(self.flows, self.store):
            wait_until(lambda: live_workers(self.flows[0]), 90, "the flow running")
            yield


class SceneMaker(Protocol):
    def __call__(
        self,
        name: str,
        *,
        partitions: int = 2,
        records: int = 0,
        offsets: dict[int, int] | None = None,
        reverse: bool = False,
    ) -> ProcedureScene: ...


@pytest.fixture
def procedure_scene(
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    monkeypatch: pytest.MonkeyPatch,
) -> SceneMaker:
    """`procedure_scene(name, ...)` sets a ProcedureScene up: the topic `name-<unique>`
    with `partitions` and `records` preloaded on the primary (on DR too with
    `reverse`, which enables dr->primary), the application `name-app-<unique>`
    registered on the primary with `offsets` (per partition) committed there."""

    def make(
        name: str,
        *,
        partitions: int = 2,
        records: int = 0,
        offsets: dict[int, int] | None = None,
        reverse: bool = False,
    ) -> ProcedureScene:
        topic = unique_topic(name)
        create_topic(primary, topic, partitions=partitions)
        preload(primary, topic, records, partitions)
        extra: tuple[str, ...] = ()
        if reverse:
            create_topic(dr, topic, partitions=partitions)
            extra = ("dr->primary.enabled = true", f"dr->primary.topics = {topic}")
        config_path = write_config(tmp_path, primary, dr, topic, extra=extra)
        config = load_config(config_path)
        flows = [config.flow("primary->dr")]
        if reverse:
            flows.append(config.flow("dr->primary"))
            store.flows.set("dr->primary", "stopped")  # the failover starts it
        app = f"{name}-app-{uuid.uuid4().hex[:8]}"
        store.applications.register(app, "primary")
        if offsets:
            commit_offsets(flows[0].source, app, {(topic, p): o for p, o in offsets.items()})
        monkeypatch.setenv("REPLICATOR_CONFIG", str(config_path))
        monkeypatch.setenv(STATE_URL_ENV, state_url)
        return ProcedureScene(topic, app, config_path, config, flows, primary, dr, state_url, store)

    return make
