"""The CLI's tables fit their width however long the names in them (issue 44): off a
terminal a table is 100 columns wide, and a 60-character topic, group or cluster name
wraps or folds inside its column instead of pushing the columns after it out of line.
Each test prints a command's table from inputs made here (no Kafka) and checks every
line's length and that each long name is there whole, read down its column."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from replicator.cli import main
from replicator.cli.diagnose import _print as print_diagnosis
from replicator.cli.flows import _print_describe, _print_list
from replicator.cli.init import _print as print_init
from replicator.cli.offset_reset import print_reset_report
from replicator.cli.offsets import _print_translations
from replicator.cli.output import PIPE_WIDTH
from replicator.cli.procedures import print_report
from replicator.cli.replication import _print_all, _print_topics
from replicator.cli.verify import _print as print_verification
from replicator.config import load_config
from replicator.engine.status import PartitionStatus, WorkerStatus
from replicator.engine.topic_sync import TopicDecision
from replicator.init.report import InitReport
from replicator.operations.diagnose import Diagnosis, Finding
from replicator.operations.dr_status import (
    BackgroundInfo,
    CheckpointInfo,
    FlowStatus,
    PartitionLag,
    WorkerInfo,
)
from replicator.operations.thread_status import RunnerThreads
from replicator.procedures.steps import ProcedureReport, StepOutcome
from replicator.statestore import StateStore
from replicator.verification.run import Verification
from replicator_lab.broker import ClusterSpec
from replicator_lab.cli import _print_table, _print_where_to_look
from replicator_lab.stack import ClusterStatus

SOURCE = "primary-" + "s" * 22  # 30 characters: the flow's name is 62
TARGET = "dr-" + "t" * 27
FLOW = f"{SOURCE}->{TARGET}"
TOPIC = "orders-" + "o" * 53  # 60 characters
REMOTE = f"{SOURCE}.{TOPIC}"
GROUP = "billing-" + "g" * 52
WORKER = "worker-" + "w" * 53
RUN = "failover-20260501T120000Z-" + "r" * 34
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stdout is pytest's capture, no terminal: the width is the pipe's, unless these say."""
    for name in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)


def _table(out: str, headers: tuple[str, ...], *names: str) -> None:
    """Every line of `out` fits `PIPE_WIDTH`, and each of `names` is in the table whose
    header line holds `headers`: read down one column, with its fragments joined."""
    lines = out.splitlines()
    assert lines, "nothing printed"
    too_wide = [line for line in lines if len(line) > PIPE_WIDTH]
    assert not too_wide, f"lines wider than {PIPE_WIDTH}:\n{out}"
    assert "…" not in out, f"a cell was cut short:\n{out}"
    [at] = [i for i, line in enumerate(lines) if _header_starts(line, headers)]
    starts = _header_starts(lines[at], headers)
    ends = [*starts[1:], None]
    columns = [
        "".join(line[s:e].strip() for line in lines[at + 1 :])
        for s, e in zip(starts, ends, strict=True)
    ]
    missing = [name for name in names if not any(name in column for column in columns)]
    assert not missing, f"not found whole in one column: {missing}\n{out}"


def _header_starts(line: str, headers: tuple[str, ...]) -> list[int]:
    """Where each header starts on `line`, if the line is the table's header line."""
    starts, at = [], 0
    for header in headers:
        found = re.search(rf"(?:^|(?<=\s)){re.escape(header)}(?=\s|$)", line[at:])
        if found is None:
            return []
        starts.append(at + found.start())
        at += found.end()
    return starts


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = {SOURCE}, {TARGET}\n"
        f"{SOURCE}.bootstrap.servers = 127.0.0.1:9\n"
        f"{TARGET}.bootstrap.servers = 127.0.0.1:9\n"
        f"{FLOW}.enabled = true\n"
        f"{FLOW}.topics = {TOPIC}\n"
        f"{FLOW}.groups = {GROUP}\n"
    )
    return config


def test_acls_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "plan", "--config", str(_config(tmp_path))]) == 0
    headers = ("CLUSTER", "PRINCIPAL", "RESOURCE", "NAME", "OPERATIONS", "WHY")
    _table(capsys.readouterr().out, headers, SOURCE, TARGET, TOPIC, GROUP, REMOTE)


def test_clients_list_and_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = StateStore(url)
    store.applications.register(GROUP, SOURCE)
    store.applications.report_client(GROUP, WORKER, "consumer", SOURCE, 0, "running")
    run = store.runs.start("failover", FLOW, "planned", {})
    store.runs.finish(run, "succeeded", 0, 12.5, {})
    store.close()
    assert main(["clients", "list", "--state-url", url]) == 0
    out = capsys.readouterr().out
    _table(out, ("APPLICATION", "ACTIVE ON", "EPOCH", "STATE"), GROUP, SOURCE)
    clients = ("APPLICATION", "ROLE", "CLIENT", "CLUSTER", "STATE", "SEEN")
    _table(out, clients, GROUP, WORKER, SOURCE)
    assert main(["history", "--state-url", url]) == 0
    headers = ("STARTED", "RUN", "FLOW", "MODE", "OUTCOME", "RPO", "RTO")
    _table(capsys.readouterr().out, headers, run, FLOW)


def _steps(*reports: dict[str, object]) -> list[StepOutcome]:
    return [StepOutcome(f"step-{i}", "done", report) for i, report in enumerate(reports)]


def test_procedure_and_offset_reset_reports(capsys: pytest.CaptureFixture[str]) -> None:
    report = ProcedureReport(
        RUN,
        "failover",
        dry_run=True,
        steps=_steps({"fenced": {GROUP: 2}}, {"translated": {TOPIC: {"0": 5}, GROUP: 1}}),
        outcome="planned",
        rpo_records=0,
    )
    print_report(report)
    _table(capsys.readouterr().out, ("STEP", "STATUS", "REPORT"), GROUP, TOPIC)
    effect = f"{TOPIC}[0]: 50 -> 10: 40 records will be copied again"
    reset = ProcedureReport(
        RUN,
        "offset_reset",
        dry_run=True,
        steps=_steps({"topic": TOPIC}, {"copied_again": 40, "partitions": [{"effect": effect}]}),
        outcome="planned",
    )
    print_reset_report(reset)
    out = capsys.readouterr().out
    assert f"  {effect}\n" in out  # each partition's move on a line of its own: grepped for
    table = "\n".join(line for line in out.splitlines() if line != f"  {effect}")
    _table(table, ("STEP", "STATUS", "REPORT"), TOPIC)


def test_translate(capsys: pytest.CaptureFixture[str]) -> None:
    row = {
        "flow": FLOW,
        "topic": TOPIC,
        "partition": 0,
        "source_offset": 1234,
        "remote_topic": REMOTE,
        "target_offset": 1200,
        "missing": 0,
        "unreplicated_before": 3,
    }
    _print_translations([row, {**row, "partition": 1, "unreplicated_before": 0}])
    headers = ("FLOW", "SOURCE", "TARGET", "MISSING", "VERDICT")
    _table(capsys.readouterr().out, headers, FLOW, f"{TOPIC}[0]@1234", f"{REMOTE}[1]@1200")


def test_status_and_topics(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        WorkerStatus(FLOW, WORKER, "running", partitions=3, data_path="records move through"),
        PartitionStatus(FLOW, TOPIC, 0, "replicating", 20, 0, 15, error=f"{GROUP} failed"),
    ]
    runners = [RunnerThreads(FLOW, f"{WORKER}:4242")]
    _print_all(rows, runners)
    headers = ("FLOW", "WHAT", "STATE", "DETAILS")
    _table(capsys.readouterr().out, headers, FLOW, WORKER, f"{TOPIC}[0]", GROUP)
    decisions = [
        TopicDecision(TOPIC, REMOTE, 3, True, ""),
        TopicDecision(GROUP, f"{SOURCE}.{GROUP}", 1, False, f"{GROUP} is left out by the filter"),
    ]
    _print_topics({FLOW: decisions})
    headers = ("FLOW", "TOPIC", "REMOTE TOPIC", "WHY NOT")
    _table(capsys.readouterr().out, headers, FLOW, TOPIC, REMOTE, GROUP)


def test_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    statuses = [ClusterStatus(SOURCE, "127.0.0.1:19092", "running", topics=[TOPIC, GROUP])]
    _print_table(SimpleNamespace(status=lambda: statuses))  # type: ignore[arg-type]
    headers = ("CLUSTER", "BOOTSTRAP", "STATE", "TOPICS")
    _table(capsys.readouterr().out, headers, SOURCE, TOPIC, GROUP)
    stack = SimpleNamespace(clusters=[ClusterSpec(SOURCE, 19092)], data_dir=tmp_path)
    system = SimpleNamespace(
        stack=stack, demo=None, worker=None, app=None, airflow=None, verification=None
    )
    _print_where_to_look(system, None, 50)  # type: ignore[arg-type]
    _table(capsys.readouterr().out, ("CLUSTER", "CLIENTS CONNECT WITH"), SOURCE)


def test_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = {
        "expectation": "expect_column_values_to_be_in_set",
        "column": "clean",
        "rows": [{"topic": TOPIC, "partition": 0, "first": 0, "last": 99}],
    }
    summary = {
        "suites": {
            "parity": {"success": True, "rows": 3, "failed": []},
            "digests": {"success": False, "rows": 3, "failed": [failed]},
        },
        "data_docs": str(tmp_path / "index.html"),
    }
    print_verification([(FLOW, Verification(RUN, tmp_path, False, summary))])
    headline, *rest = capsys.readouterr().out.splitlines()
    assert headline == f"{FLOW}: FAILED ({RUN})"  # one line, however long: grepped for
    _table("\n".join(rest), ("SUITE", "RESULT", "ROWS", "FAILED"), TOPIC)


def test_init(capsys: pytest.CaptureFixture[str]) -> None:
    report = InitReport(dry_run=True)
    report.add("clusters", SOURCE, "ok", f"127.0.0.1:9 answers: cluster id {GROUP}")
    report.add("topics", TARGET, "would", f"would create {SOURCE}.checkpoints.internal")
    report.add("permissions", TARGET, "unchecked", f"READ on TOPIC {TOPIC} (literal): no topic")
    report.add("state", None, "would", f"would register application {GROUP}")
    print_init(report)
    out = capsys.readouterr().out
    _table(out, ("STEP", "OUTCOME", "CLUSTER", "FINDING"), SOURCE, TARGET, TOPIC, GROUP)
    assert out.rstrip().splitlines()[-1].startswith("ready (dry run")


def test_diagnose(capsys: pytest.CaptureFixture[str]) -> None:
    diagnosis = Diagnosis(FLOW, TOPIC, REMOTE, "not replicated")
    diagnosis.findings += [
        Finding("topics filter", "ok", f"{TOPIC} matches the flow's topics"),
        Finding("authorization", "problem", f"not allowed to read {TOPIC}", f"grant {GROUP}"),
    ]
    print_diagnosis(diagnosis)
    out = capsys.readouterr().out
    headline, *rest = out.splitlines()
    assert headline == f"flow {FLOW}: {TOPIC} -> {REMOTE}: not replicated"  # one line
    _table("\n".join(rest), ("STATUS", "CHECK", "DETAIL", "FIX"), TOPIC, GROUP)
    assert out.index("\nPROBLEM") < out.index("\nOK")


def test_flows_list_and_describe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [flow] = load_config(_config(tmp_path)).flows
    worker = WorkerInfo(WORKER, "running", "host-" + "h" * 55, 4242, 3, True, NOW)
    partition = PartitionLag(TOPIC, 0, "replicating", 5, 100, 100, 0, None, NOW, False)
    checkpoint = CheckpointInfo(f"{SOURCE}.checkpoints.internal", 3, [GROUP], NOW, 5.0)
    status = FlowStatus(
        FLOW,
        SOURCE,
        TARGET,
        "running",
        workers=[worker],
        partitions=[partition],
        checkpoint=checkpoint,
        background=[BackgroundInfo(f"{WORKER}:4242", "ok", "checkpoints ok")],
        error=f"{GROUP}: a read failed",
    )
    _print_list(SimpleNamespace(flows=[(flow, status)], store_error=None))  # type: ignore[arg-type]
    headers = ("FLOW", "SOURCE", "TARGET", "TOPICS", "STATE", "WORKERS", "LAG", "CHECKPOINT")
    _table(capsys.readouterr().out, headers, FLOW, SOURCE, TARGET, TOPIC)
    _print_describe(flow, status, [f"worker {WORKER} is late by {timedelta(minutes=3)}"])
    out = capsys.readouterr().out
    _table(out, ("WORKER", "STATE", "HOST", "PID", "PARTITIONS", "LIVE", "UPDATED"), WORKER)
    _table(out, ("PARTITION", "STATE", "NEXT", "LAG", "REPLICATED", "LOST", "NOTE"), TOPIC)
