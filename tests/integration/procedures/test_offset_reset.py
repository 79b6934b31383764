"""Offset reset of one topic of a flow: a rewind copies the records again exactly
once (in both delivery modes) and is never applied twice; a skip to latest
leaves out what was produced while the flow was stopped; bad input is refused
naming topic, partition and offset; the procedure stops and restarts a running
flow, resumes step by step, and its dry run writes nothing. The command line's
options are tested without brokers too; the decision rule and the request records
are tests/unit/engine/test_reset_decision.py."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from replicator.cli import main
from replicator.cli.offset_reset import reset_to
from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.resets import ResetRequest, read_resets
from replicator.engine.status import PartitionStatus, read_status
from replicator.errors import ReplicatorError
from replicator.procedures import live_workers
from replicator.procedures.offset_reset import OffsetReset
from replicator.procedures.reset_requests import ResetTo, request_reset
from replicator.statestore import StateStore

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import runner
from helpers.replication import (
    flow_config,
    preload,
    running,
    source_offsets_on_target,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

_TIMEOUT_S = 120.0


def _copied(dr: str, remote: str, partition: int) -> list[int] | None:
    """The source offsets of the committed records of a target partition, in order."""
    consumer = Consumer({"bootstrap.servers": dr, "group.id": "reset-high"})
    try:
        high = consumer.get_watermark_offsets(TopicPartition(remote, partition), timeout=10)[1]
    except KafkaException:
        return None  # not created yet
    finally:
        consumer.close()
    return source_offsets_on_target(dr, remote, partition, high)


def _counts(dr: str, remote: str, partitions: int) -> list[int]:
    return [len(_copied(dr, remote, p) or []) for p in range(partitions)]


def _requests(flow: FlowConfig, topic: str) -> dict[int, ResetRequest]:
    """The reset requests written for `topic` (other tests reset other topics)."""
    return {p: r for (t, p), r in read_resets(flow).items() if t == topic}


# -- against the clusters --------------------------------------------------------------


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "exactly-once"])
def test_rewind_copies_again_exactly_once_and_is_not_reapplied(
    primary: str, dr: str, exactly_once: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.engine.resets")
    topic = unique_topic("reset-rewind")
    create_topic(primary, topic, partitions=3)
    preload(primary, topic, 300, 3)
    flow = flow_config(("primary", primary), ("dr", dr), topic, exactly_once=exactly_once)
    remote = f"primary.{topic}"

    with running(flow):
        wait_until(lambda: _counts(dr, remote, 3) == [100] * 3, _TIMEOUT_S, "the first copy")

    [request] = request_reset(flow, topic, ResetTo.offset(40), partitions=[0], requested_by="t")
    assert (request.from_offset, request.offset) == (100, 40)
    assert (request.copied_again, request.skipped) == (60, 0)
    assert "60 records will be copied again" in request.effect()
    assert _requests(flow, topic) == {0: request}

    with running(flow):
        wait_until(lambda: _counts(dr, remote, 3) == [160, 100, 100], _TIMEOUT_S, "the rewind")
    assert _copied(dr, remote, 0) == list(range(100)) + list(range(40, 100))
    assert _copied(dr, remote, 1) == _copied(dr, remote, 2) == list(range(100))
    assert "offset reset applied" in caplog.text
    assert "source offsets 40..99 (60 records) are copied again" in caplog.text

    caplog.clear()
    preload(primary, topic, 30, 3)  # 10 more per partition
    with running(flow):
        wait_until(lambda: _counts(dr, remote, 3) == [170, 110, 110], _TIMEOUT_S, "new records")
    assert _copied(dr, remote, 0) == list(range(100)) + list(range(40, 110))
    assert _copied(dr, remote, 1) == list(range(110))
    assert "offset reset to 40" in caplog.text and "ignored" in caplog.text
    assert "offset reset applied" not in caplog.text


def test_skip_to_latest_through_the_procedure(
    tmp_path: Path, primary: str, dr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    store = StateStore(state_url)
    topic = unique_topic("reset-skip")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 100, 2)
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    config_path = write_config(tmp_path, primary, dr, topic)
    config = load_config(config_path)
    remote = f"primary.{topic}"

    with runner([flow], store):
        wait_until(lambda: _counts(dr, remote, 2) == [50, 50], _TIMEOUT_S, "the first copy")
        wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow's worker running")

        # Refused while the flow runs: the task holds its position in memory.
        with pytest.raises(ReplicatorError, match=r"running workers .*Stop the flow"):
            request_reset(flow, topic, "latest")

        # A dry run previews and writes nothing: no request, no step, flow untouched.
        dry = OffsetReset(config, flow.name, topic, 10, store, partitions=[0], dry_run=True)
        planned = dry.run("reset-dry")
        assert planned.outcome == "planned", planned.error
        assert [s.name for s in planned.steps] == ["check", "stop_flow", "request", "start_flow"]
        assert [s.status for s in planned.steps] == ["planned"] * 4
        preview = planned.report_of("request")
        assert preview["copied_again"] == 40 and preview["skipped"] == 0
        assert "40 records will be copied again" in preview["summary"]
        [partition] = preview["partitions"]
        assert (partition["from_offset"], partition["to_offset"]) == (50, 10)
        assert planned.report_of("stop_flow")["running_workers"]
        assert _requests(flow, topic) == {}
        assert store.runs.steps("reset-dry") == [] and store.runs.recent("offset_reset") == []
        assert store.flows.get(flow.name) is None
        # The same through the command line.
        command = f"offsets reset --flow {flow.name} --topic {topic} --partition 0"
        command += " --to-offset 10 --dry-run --id reset-cli"
        argv = [*command.split(), "--config", str(config_path), "--state-url", state_url]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert "offset_reset reset-cli (dry run)" in printed and "planned" in printed
        assert f"{topic}[0]: 50 -> 10: 40 records will be copied again" in printed
        assert _requests(flow, topic) == {} and store.runs.steps("reset-cli") == []

        procedure = OffsetReset(config, flow.name, topic, "latest", store)
        assert procedure.run_step("reset-skip", "check").status == "done"
        assert procedure.run_step("reset-skip", "stop_flow").status == "done"
        assert live_workers(flow) == []
        preload(primary, topic, 20, 2)  # produced while stopped: to be skipped
        requested = procedure.run_step("reset-skip", "request").report
        assert requested["skipped"] == 20 and requested["copied_again"] == 0
        assert [(p["from_offset"], p["to_offset"]) for p in requested["partitions"]] == [
            (50, 60),
            (50, 60),
        ]
        assert procedure.run_step("reset-skip", "start_flow").status == "done"
        wait_until(lambda: live_workers(flow), _TIMEOUT_S, "the flow running again")

        preload(primary, topic, 20, 2)  # produced after the reset: replicated
        wait_until(lambda: _counts(dr, remote, 2) == [60, 60], _TIMEOUT_S, "the later records")
        for p in range(2):
            assert _copied(dr, remote, p) == list(range(50)) + list(range(60, 70))

        def skipped() -> dict[int, int]:
            return {
                row.partition: row.skipped
                for row in read_status(flow.target, flow.name)
                if isinstance(row, PartitionStatus) and row.topic == topic
            }

        wait_until(lambda: skipped() == {0: 10, 1: 10}, _TIMEOUT_S, "skips in the status")

        # Resuming the done procedure applies nothing again.
        again = OffsetReset(config, flow.name, topic, "latest", store).run("reset-skip")
        assert again.outcome == "succeeded", again.error
        assert [s.status for s in again.steps] == ["skipped"] * 4
    [run] = store.runs.recent("offset_reset")
    assert (run.outcome, run.rpo_records) == ("succeeded", 20)
    assert _counts(dr, remote, 2) == [60, 60]
    store.close()


def test_bad_requests_name_topic_partition_and_offset(primary: str, dr: str) -> None:
    topic = unique_topic("reset-bad")
    other = unique_topic("reset-other")
    create_topic(primary, topic, partitions=2)
    create_topic(primary, other, partitions=1)
    preload(primary, topic, 100, 2)
    flow = flow_config(("primary", primary), ("dr", dr), topic)

    missing = f"{topic}-nope"
    with pytest.raises(ReplicatorError, match=rf"topic '{missing}' does not exist on 'primary'"):
        request_reset(flow, missing, "earliest")
    with pytest.raises(ReplicatorError, match=rf"'{other}' is not replicated by flow primary->dr"):
        request_reset(flow, other, "earliest")
    with pytest.raises(ReplicatorError, match=r"partitions 0\.\.1; partition 2, 7 does not exist"):
        request_reset(flow, topic, "earliest", partitions=[0, 2, 7])
    with pytest.raises(
        ReplicatorError, match=rf"{topic}\[1\]: offset 51 is outside .* valid offsets are 0\.\.50"
    ):
        request_reset(flow, topic, 51, partitions=[1])
    with pytest.raises(ReplicatorError, match="non-negative integer"):
        request_reset(flow, topic, -1)
    assert _requests(flow, topic) == {}

    # The edges of the log are fine; a time after every record resolves to the end.
    [start] = request_reset(flow, topic, 0, partitions=[1])
    [end] = request_reset(flow, topic, datetime(2999, 1, 1, tzinfo=UTC), partitions=[1])
    assert (start.offset, start.tail_target_offset, start.from_offset) == (0, -1, 0)
    assert (end.offset, end.skipped) == (50, 50)
    assert _requests(flow, topic) == {1: end}  # the later request replaces the earlier


# -- without brokers -----------------------------------------------------------------------


def test_cli_options() -> None:
    """The reset target the options name, and the usage errors (exit status 2)."""
    assert reset_to(False, False, 5, None) == ResetTo.offset(5)
    noon = datetime.fromisoformat("2024-05-01T12:00:00Z")
    assert reset_to(False, False, None, noon) == ResetTo.timestamp(1_714_564_800_000)
    assert reset_to(True, False, None, None) == ResetTo.earliest()
    assert reset_to(False, True, None, None) == ResetTo.latest()
    common = ["offsets", "reset", "--config", "mm2.properties", "--flow", "A->B", "--topic", "t"]
    for wrong in (
        [],  # a target is required
        ["--to-earliest", "--to-latest"],  # only one
        ["--to-datetime", "yesterday"],
    ):
        with pytest.raises(SystemExit) as exited:
            main([*common, *wrong])
        assert exited.value.code == 2
