"""`replicator flows list | describe` against the real clusters (issue 30): a flow
replicated by a running worker, checkpointed, then stopped through the state store;
what each output format shows, and the exit statuses."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from replicator.cli import main
from replicator.config import load_config
from replicator.operations.runner import run_flows
from replicator.statestore import StateStore

from helpers.kafka import create_topic, unique_topic
from helpers.replication import preload, wait_until

pytestmark = pytest.mark.integration

_TIMEOUT_S = 120


def _config(tmp_path: Path, primary: str, dr: str, topic: str) -> tuple[Path, str, str]:
    """A flow under aliases of its own, so no other test's status rows or
    checkpoints (in the shared clusters' topics) are this flow's."""
    suffix = uuid.uuid4().hex[:6]
    source, target = f"src{suffix}", f"dst{suffix}"
    path = tmp_path / "mm2.properties"
    path.write_text(
        "\n".join(
            [
                f"clusters = {source}, {target}",
                f"{source}.bootstrap.servers = {primary}",
                f"{target}.bootstrap.servers = {dr}",
                f"{source}->{target}.enabled = true",
                f"{source}->{target}.topics = {topic}",
                "replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "status.topic.replication.factor = 1",
            ]
        )
        + "\n"
    )
    return path, f"{source}->{target}", source


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], status: int = 0) -> object:
    assert main([*argv, "-o", "json"]) == status
    return json.loads(capsys.readouterr().out)


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        commits = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        consumer.commit(offsets=commits, asynchronous=False)
    finally:
        consumer.close()


def test_flows_list_and_describe(
    tmp_path: Path,
    primary: str,
    dr: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Each row on one line, to be read for its content (the layout at 100 columns, names
    # folded within their column: tests/unit/cli/test_tables_fit.py).
    monkeypatch.setenv("COLUMNS", "1000")
    topic = unique_topic("flowscli")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 200, 2)
    config, name, source = _config(tmp_path, primary, dr, topic)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    common = ["--config", str(config), "--state-url", url]
    store = StateStore(url)
    stop = threading.Event()
    runner = threading.Thread(
        target=run_flows, args=(list(load_config(config).flows), stop, store), daemon=True
    )
    runner.start()
    try:

        def caught_up() -> object:
            [flow] = _json(capsys, ["flows", "list", *common])["flows"]
            return flow["total_lag"] == 0 and flow["live_workers"] >= 1 and flow

        wait_until(caught_up, _TIMEOUT_S, f"{name} replicated with a live worker")
        group = unique_topic("flowscli-group")
        _commit(primary, group, topic, {0: 50, 1: 40})
        report = _json(capsys, ["checkpoints", "--config", str(config), "--group", group])
        # Written by this command, or already by the runner's own loop (it comes back
        # soon while the copy is under way): either way both are on the target now.
        assert [(len(r["emitted"]) + r["unchanged"], r["held"]) for r in report] == [(2, [])]

        listed = _json(capsys, ["flows", "list", *common])
        assert listed["store_error"] is None
        [flow] = listed["flows"]
        assert (flow["name"], flow["source"]["alias"], flow["target"]["bootstrap"]) == (
            name,
            source,
            dr,
        )
        assert flow["topics"]["include"] == [topic]  # and MM2's default excludes
        assert (flow["desired_state"], flow["tasks_max"], flow["error"]) == ("running", 1, None)
        # The list reads the newest checkpoint only (a summary costs the same at any size)
        assert flow["checkpoint"]["age_seconds"] is not None
        assert flow["checkpoint"]["checkpoints"] is None
        assert "partitions" not in flow  # the list is a summary

        described = _json(capsys, ["flows", "describe", name, *common])
        assert sorted((p["topic"], p["partition"]) for p in described["partitions"]) == [
            (topic, 0),
            (topic, 1),
        ]
        assert sum(p["replicated"] for p in described["partitions"]) == 200
        checkpoint = described["checkpoint"]  # `describe` counts them
        assert checkpoint["checkpoints"] == 2 and group in checkpoint["groups"]
        assert all(w["live"] for w in described["workers"])
        assert main(["flows", "describe", name, *common, "-o", "yaml"]) == 0
        as_yaml = yaml.safe_load(capsys.readouterr().out)
        assert as_yaml["partitions"] == described["partitions"]

        assert main(["flows", "describe", name, *common]) == 0
        table = capsys.readouterr().out
        assert f"{topic}[0]" in table and f"{topic}[1]" in table
        assert "desired state" in table and "running" in table
        assert f"checkpoints: 2 in {source}.checkpoints.internal" in table

        store.flows.set(name, "stopped")
        assert main(["flows", "list", *common]) == 0
        table = capsys.readouterr().out
        assert name in table and "stopped" in table and topic in table
    finally:
        stop.set()
        runner.join(60)
        store.close()

    assert main(["flows", "describe", "nope->nowhere", *common]) == 1
    err = capsys.readouterr().err
    assert err.startswith("replicator: error: ") and "nope->nowhere" in err
