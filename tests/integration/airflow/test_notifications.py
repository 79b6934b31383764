"""Notifications through Airflow's SMTP notifier to a real SMTP server (aiosmtpd),
configured by the Airflow connection `dr_notifications`: the supervisor DAG, run
every minute, mails once per incident (not again on the next run) and once when it
is resolved; a failover waiting for approval mails once when asked and once when
answered. Real clusters, a real replication task, real `dag.test()`."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.operations.lag import measure_lag
from replicator.operations.launchers import RUN_DIR_ENV
from replicator.procedures import live_workers
from replicator.statestore import STATE_URL_ENV, StateStore

from helpers.airflow import answering, dagbag, failover_conf
from helpers.kafka import create_topic, unique_topic
from helpers.mail import RECIPIENT, Inbox, Mail, notifications_connection, smtp_server
from helpers.procedures import ProcedureScene, SceneMaker
from helpers.replication import preload, running, wait_until, write_config

pytestmark = pytest.mark.integration

BASE_URL = "http://airflow.example:8080"


@pytest.fixture
def inbox(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    """A real SMTP server, and the `dr_notifications` connection pointing at it
    (incidents resolve as soon as their problem is gone: the test does not wait 5 min)."""
    with smtp_server() as (received, port):
        monkeypatch.setenv(
            "AIRFLOW_CONN_DR_NOTIFICATIONS",
            notifications_connection(port, resolve_after_minutes=0),
        )
        monkeypatch.setenv("AIRFLOW__API__BASE_URL", BASE_URL)
        yield received


def _text(mail: Mail) -> str:
    return html.unescape(mail.html)


def _caught_up(flow: FlowConfig) -> bool:
    lag = measure_lag(flow)
    return len(lag.partitions) == 2 and lag.total_behind == 0


def test_supervisor_mails_once_per_incident_and_once_when_it_is_resolved(
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    inbox: Inbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = unique_topic("notify")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 100, 2)  # 50 per partition, nothing replicated yet
    config = write_config(tmp_path, primary, dr, topic)
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "replicators"))
    flow = load_config(config).flow("primary->dr")
    supervisor = dagbag().get_dag("replicator_supervisor")
    conf = {"max_lag_records": 10, "restart": False}

    first = supervisor.test(run_conf=conf)

    assert first.state == "failed"
    opened = inbox.take()
    incidents = store.incidents(open_only=True)
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
    assert store.incidents(open_only=True) == []


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
    assert [i.key for i in scene.store.incidents(open_only=True)] == []
