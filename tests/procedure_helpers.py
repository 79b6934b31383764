"""Helpers for the DR procedure tests: demo apps as subprocesses, a runner in a thread."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import TopicPartition
from replication_helpers import wait_until

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.errors import ReplicatorError
from replicator.groups import GroupAdmin
from replicator.localstack.demo_apps import DEMO_DIR
from replicator.runner import run_flows
from replicator.statestore import StateStore, read_ledger

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
