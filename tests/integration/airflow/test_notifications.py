"""Notifications through Airflow's SMTP notifier to a real SMTP server (aiosmtpd),
configured by the Airflow connection `dr_notifications`: the supervisor DAG, run
every minute, mails once per incident (not again on the next run) and once when it
is resolved; a failover waiting for approval mails once when asked and once when
answered; a wrong copy found by the verification DAG mails once until a right one
resolves it. Real clusters, a real replication task, real Spark and GX, real
`dag.test()`."""

from __future__ import annotations

import html
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator.errors import ReplicatorError
from replicator.operations.lag import measure_lag
from replicator.operations.launchers import RUN_DIR_ENV
from replicator.procedures import live_workers
from replicator.statestore import STATE_URL_ENV, StateStore

from helpers.airflow import ROOT, answering, dagbag, failover_conf
from helpers.kafka import create_topic, unique_topic
from helpers.mail import RECIPIENT, Inbox, Mail, notifications_connection, smtp_server
from helpers.procedures import ProcedureScene, SceneMaker, cluster_config, commit_offsets
from helpers.replication import preload, running, wait_until, write_config

pytestmark = pytest.mark.integration

BASE_URL = "http://airflow.example:8080"
#: Another notifier than SMTP, named in the connection's extra (Airflow imports it).
RECORDING = "helpers.recording_notifier.RecordingNotifier"


@pytest.fixture
def inbox(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    """A real SMTP server, and the `dr_notifications` connection pointing at it
    (incidents resolve as soon as their problem is gone: the test does not wait 5 min)."""
    with smtp_server() as received:
        monkeypatch.setenv(
            "AIRFLOW_CONN_DR_NOTIFICATIONS",
            notifications_connection(received.port, resolve_after_minutes=0),
        )
        monkeypatch.setenv("AIRFLOW__API__BASE_URL", BASE_URL)
        yield received


def _text(mail: Mail) -> str:
    return html.unescape(mail.html)


def _caught_up(flow: FlowConfig) -> bool:
    lag = measure_lag(flow)
    return len(lag.partitions) == 2 and lag.total_behind == 0


@pytest.fixture
def unhealthy(
    tmp_path: Path, primary: str, dr: str, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, FlowConfig]:
    """A two-partition topic with 50 records per partition on primary, nothing
    replicated and no worker; the primary->dr config the supervisor DAG's hook reads."""
    topic = unique_topic("notify")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 100, 2)
    config = write_config(tmp_path, primary, dr, topic)
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "replicators"))
    return topic, load_config(config).flow("primary->dr")


def test_supervisor_mails_once_per_incident_and_once_when_it_is_resolved(
    store: StateStore, inbox: Inbox, unhealthy: tuple[str, FlowConfig]
) -> None:
    topic, flow = unhealthy
    supervisor = dagbag().get_dag("replicator_supervisor")
    conf = {"max_lag_records": 10, "restart": False}

    first = supervisor.test(run_conf=conf)

    assert first.state == "failed"
    opened = inbox.take()
    incidents = store.incidents.all(open_only=True)
    assert {"workers", "lag"} <= {incident.kind for incident in incidents}
    # One mail per incident (flow and check), not one per partition.
    assert sorted(mail.subject for mail in opened) == sorted(
        f"[Kafka DR] PROBLEM: {incident.title}" for incident in incidents
    )
    assert all(mail.recipients == (RECIPIENT,) for mail in opened)
    [lag] = [mail for mail in opened if "lag" in mail.subject]
    assert (
        lag.subject
        == "[Kafka DR] PROBLEM: replication lag over its bound on flow primary->dr (2 places)"
    )
    body = _text(lag)
    assert f"{topic}[0]: 50 records behind" in body and f"{topic}[1]: 50 records behind" in body
    assert "fix: " in body and "Open since " in body and "check lag" in body
    assert f'href="{BASE_URL}/dr-status/"' in lag.html
    assert f"{BASE_URL}/dags/replicator_supervisor/runs/" in body

    second = supervisor.test(run_conf=conf)

    assert second.state == "failed"
    assert inbox.take() == [], "the same incidents a minute later: no mail"

    with running(flow):
        wait_until(lambda: live_workers(flow) and _caught_up(flow), 90, "the flow replicating")
        third = supervisor.test(run_conf=conf)
        resolved = inbox.take()
        fourth = supervisor.test(run_conf=conf)

    assert third.state == "success"
    assert len(resolved) == len(incidents)
    for incident in incidents:
        [mail] = [m for m in resolved if m.subject.endswith(f": {incident.title}")]
        assert mail.subject.startswith("[Kafka DR] RESOLVED after ")
        assert "Resolved at " in _text(mail) and "What it was:" in _text(mail)
    assert fourth.state == "success"
    assert inbox.take() == [], "resolved once, not again"
    assert store.incidents.all(open_only=True) == []


@pytest.fixture
def scene(airflow_home: Path, procedure_scene: SceneMaker) -> Iterator[ProcedureScene]:
    scene = procedure_scene("notify.approval", records=200, offsets={0: 40, 1: 70}, reverse=True)
    with scene.running():
        yield scene


def test_a_failover_waiting_for_approval_mails_once_asked_and_once_answered(
    scene: ProcedureScene, inbox: Inbox
) -> None:
    with answering("failover", "approval", "Approve", by="alice"):
        run = dagbag().get_dag("failover").test(run_conf=failover_conf(scene))

    assert run.state == "success"
    procedure = f"failover/{run.run_id}"
    asked, answered = inbox.take()
    assert asked.subject == (
        f"[Kafka DR] APPROVAL NEEDED: Fail ['{scene.app}'] over to primary->dr's target? "
        f"({procedure} waits for approval)"
    )
    body = _text(asked)
    assert "answer by 20" in body and "no answer by then counts as Reject" in body
    assert '"would_fence"' in body  # the question's plan, as the Required Actions page shows it
    assert f'href="{BASE_URL}/dags/failover/runs/' in asked.html  # Answer it: Required Actions
    assert answered.subject.startswith("[Kafka DR] ANSWERED after ")
    assert answered.subject.endswith(
        f"(approved by alice): Fail ['{scene.app}'] over to primary->dr's target? "
        f"({procedure} waits for approval)"
    )
    assert [i.key for i in scene.store.incidents.all(open_only=True)] == []


def test_a_mail_not_sent_goes_on_the_next_run_and_other_notifiers_plug_in(
    tmp_path: Path,
    store: StateStore,
    inbox: Inbox,
    unhealthy: tuple[str, FlowConfig],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded = tmp_path / "recorded.jsonl"
    other = {
        "class": RECORDING,
        "kwargs": {"path": str(recorded), "text": "{{ dr_notice.subject }}"},
    }
    with socket.socket() as closed:  # a port nobody listens on: the mail server is down
        closed.bind(("127.0.0.1", 0))
        down = closed.getsockname()[1]
    monkeypatch.setenv(
        "AIRFLOW_CONN_DR_NOTIFICATIONS", notifications_connection(down, notifiers=[other])
    )
    supervisor = dagbag().get_dag("replicator_supervisor")
    conf = {"max_lag_records": 10, "restart": False}

    assert supervisor.test(run_conf=conf).state == "failed"

    failures = [r.getMessage() for r in caplog.records if "could not send" in r.getMessage()]
    assert failures, "the failed delivery is logged"
    assert "SmtpNotifier: " in failures[0] and "'dr_notifications'" in failures[0]
    told = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert (
        "[Kafka DR] PROBLEM: replication lag over its bound on flow primary->dr (2 places)" in told
    )
    assert inbox.mails == []

    # The mail server is back: the notices it missed go now, once.
    port = inbox.port
    monkeypatch.setenv(
        "AIRFLOW_CONN_DR_NOTIFICATIONS", notifications_connection(port, notifiers=[other])
    )
    assert supervisor.test(run_conf=conf).state == "failed"
    assert sorted(m.subject for m in inbox.take()) == sorted(
        f"[Kafka DR] PROBLEM: {incident.title}" for incident in store.incidents.all(open_only=True)
    )
    assert supervisor.test(run_conf=conf).state == "failed"
    assert inbox.take() == []


def test_a_wrong_copy_mails_once_until_a_right_copy_resolves_it(
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    inbox: Inbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The verify_replication DAG (real Spark, real GX) over copies written by hand:
    topic `wrong` lacks offsets 5 to 9 on the target, topic `right` is exact."""
    wrong, right = unique_topic("notify-wrong"), unique_topic("notify-right")
    for topic in (wrong, right):
        _copy_by_hand(primary, dr, topic, skip=range(5, 10) if topic == wrong else range(0))
    # The plan checks group access: on a fresh cluster, once its group coordinator loaded.
    commit_offsets(cluster_config("primary", primary), "notify-warm-up", {(wrong, 0): 0})
    commit_offsets(cluster_config("dr", dr), "notify-warm-up", {(f"primary.{wrong}", 0): 0})
    config = write_config(tmp_path, primary, dr, f"{wrong}|{right}")
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_LOCAL",
        '{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}',
    )
    verification = dagbag().get_dag("verify_replication")

    first = verification.test(run_conf={"flow": "primary->dr", "topics": [wrong]})

    assert first.state == "failed"
    [opened] = inbox.take()
    assert opened.subject.startswith(
        "[Kafka DR] PROBLEM: verification: the copy of flow primary->dr is wrong (parity"
    )
    body = _text(opened)
    assert f"topic {wrong}, partition 0" in body and "failed for 1 rows" in body
    assert f"{BASE_URL}/dr-status/runs/" in body and "/data-docs/index.html" in body
    assert "replicator diagnose --config FILE --flow primary:dr TOPIC" in body

    # The same wrong copy found by a later run sends no mail: the incident is the flow's
    # copy, not the run (tests/integration/operations/test_incident_tracking.py; a third
    # Spark run here cost the suite two minutes).

    fixed = verification.test(run_conf={"flow": "primary->dr", "topics": [right]})
    assert fixed.state == "success"
    [resolved] = inbox.take()
    assert resolved.subject.startswith("[Kafka DR] RESOLVED after ")
    assert "found the copy right" in _text(resolved)


def _copy_by_hand(primary: str, dr: str, topic: str, skip: range) -> None:
    """20 records on `topic` (one partition) and their copy on `primary.<topic>`, as
    the replicator writes it, but for the source offsets in `skip`."""
    create_topic(primary, topic, partitions=1)
    create_topic(dr, f"primary.{topic}", partitions=1)
    source = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    target = Producer({"bootstrap.servers": dr, "enable.idempotence": True})
    timestamp = int(time.time() * 1000)  # now: an old one would be deleted by retention
    for offset in range(20):
        key, value = f"k{offset}".encode(), f"v{offset}".encode()
        source.produce(topic, key=key, value=value, timestamp=timestamp + offset, partition=0)
        if offset not in skip:
            target.produce(
                f"primary.{topic}",
                key=key,
                value=value,
                timestamp=timestamp + offset,
                partition=0,
                headers=[(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(offset))],
            )
    assert source.flush(30) == 0 and target.flush(30) == 0


def test_bad_notification_settings_are_refused_naming_the_connection(
    inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "plugins"))
    from replicator_airflow.notifiers import NotificationSettings  # noqa: PLC0415

    port = inbox.port
    monkeypatch.setenv("AIRFLOW_CONN_DR_NOTIFICATIONS", notifications_connection(port, to=""))
    with pytest.raises(ReplicatorError, match="'dr_notifications' names a mail server but no "):
        NotificationSettings.load()
    wrong = [{"class": "airflow.providers.smtp.hooks.smtp.SmtpHook"}]
    monkeypatch.setenv(
        "AIRFLOW_CONN_DR_NOTIFICATIONS", notifications_connection(port, notifiers=wrong)
    )
    with pytest.raises(
        ReplicatorError, match=r"'airflow\.providers\.smtp\.hooks\.smtp\.SmtpHook' is not"
    ):
        NotificationSettings.load()
    missing = [{"class": "airflow.providers.slack.notifications.slack.SlackNotifier"}]
    monkeypatch.setenv(
        "AIRFLOW_CONN_DR_NOTIFICATIONS", notifications_connection(port, notifiers=missing)
    )
    with pytest.raises(ReplicatorError, match="install its provider or fix the dotted path"):
        NotificationSettings.load()
    monkeypatch.delenv("AIRFLOW_CONN_DR_NOTIFICATIONS")
    settings = NotificationSettings.load()
    assert settings.notifiers == ()  # no connection: the task log only
