"""The DR DAGs on SASL_SSL with the authorizer on (issue 14 item 4): `failover`,
`failback` and `dr_drill` through `dag.test()` on the real metadata DB, while the
replicator runs as `User:replicator` and the demo producer and consumer as
`User:demo`, each with only its planned ACLs. The configuration comes from the
`replicator_default` Airflow connection; its passwords come from the files that
configuration names (`${file:...}`) or, for `verify_replication` (on a Spark
standalone cluster), from the connection itself (`${conn:...}`), never from a DAG's
params.

Then the secret-leak check: no principal's SCRAM password in XCom, the task logs,
the runs' reports, the state store, the status topic, the checkpoints, or the DR
status page's HTML and JSON."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from replicator.config import load_config
from replicator.config.model import ClusterConfig
from replicator.offsets.checkpoints import read_checkpoints
from replicator.procedures import live_workers
from replicator.statestore import StateStore, check_ledgers, read_ledger
from replicator_lab.client_config import DEMO_FILE

from helpers.airflow import dagbag, task_states, xcom
from helpers.kafka import create_topic, read_partition
from helpers.procedures import commit_offsets, demo_apps, runner, wait_processed
from helpers.replication import preload, start_replicator, wait_until
from helpers.secured import SecuredPair
from helpers.spark import standalone_spark

_TIMEOUT_S = 120.0
#: Records/s the demo producer writes while the DAGs run.
_RATE = 50


@pytest.mark.timeout(900)
def test_failover_failback_and_drill_dags_on_the_secured_stack_leak_no_password(
    airflow_home: Path,
    secured_pair: SecuredPair,
    tmp_path: Path,
    state_url: str,
    store: StateStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    pair = secured_pair
    config_path = pair.clients_file
    monkeypatch.setenv(
        "AIRFLOW_CONN_REPLICATOR_DEFAULT",
        json.dumps(
            {
                "conn_type": "replicator",
                # This deployment lets both go without asking when a run says so (the
                # approval itself: test_failover_approval.py).
                "extra": {
                    "config": str(config_path),
                    "state_url": state_url,
                    "approval": {"skip": ["planned_failover", "failback"]},
                },
            }
        ),
    )
    monkeypatch.setenv("REPLICATOR_STATE_URL", state_url)  # `replicator run` obeys it too
    topic = f"demo.dags-{uuid.uuid4().hex[:8]}"
    for cluster in ("primary", "dr"):  # dr's is the reverse flow's source after the switch
        create_topic(pair.stack.bootstrap(cluster), topic, 3, client=pair.admin(cluster))
    app = f"demo-{uuid.uuid4().hex[:8]}"  # the demo principal's groups start with "demo"
    store.applications.register(app, "primary")
    store.flows.set("dr->primary", "stopped")  # the failover starts it
    config = load_config(config_path)
    common = ["--config", str(pair.stack.data_dir / DEMO_FILE), "--app", app]
    common += ["--topic", topic, "--state-url", state_url]
    produced, consumed = tmp_path / "produced.jsonl", tmp_path / "consumed.jsonl"
    bag = dagbag()
    replicator = start_replicator(config_path, tmp_path / "replicator.log")
    runs: list[Any] = []
    try:
        with demo_apps(tmp_path) as start:
            producer = start("producer", *common, "--ledger", str(produced), "--rate", str(_RATE))
            consumer = start("consumer", *common, "--ledger", str(consumed))
            wait_processed(consumed, "primary", 100, _TIMEOUT_S)
            wait_until(
                lambda: len(store.applications.clients(app, seen_within_s=5)) == 2,
                _TIMEOUT_S,
                "apps",
            )
            wait_until(lambda: live_workers(config.flow("primary->dr")), _TIMEOUT_S, "replicator")

            conf = {"flow": "primary->dr", "applications": [app], "timeout_s": _TIMEOUT_S}
            runs.append(
                bag.get_dag("failover").test(
                    run_conf={**conf, "mode": "planned", "reverse": True, "skip_approval": True}
                )
            )
            assert runs[-1].state == "success", task_states(runs[-1])
            assert store.applications.get(app).active_cluster == "dr"
            wait_processed(consumed, "dr", 100, _TIMEOUT_S)

            runs.append(bag.get_dag("failback").test(run_conf={**conf, "skip_approval": True}))
            assert runs[-1].state == "success", task_states(runs[-1])
            assert store.applications.get(app).active_cluster == "primary"
            wait_processed(consumed, "primary", 100, _TIMEOUT_S)

            # The failback started primary->dr again; the drill measures a running copy.
            wait_until(lambda: live_workers(config.flow("primary->dr")), _TIMEOUT_S, "restarted")
            runs.append(bag.get_dag("dr_drill").test(run_conf=conf))
            assert runs[-1].state == "success", task_states(runs[-1])
            [drill] = store.runs.recent("drill")
            assert drill.outcome == "succeeded"
            # The producer keeps writing: the drill's RPO is what was on its way when it
            # took the positions, and a running copy is well under a second behind. (A
            # fresh-clone run under load had 1 record in flight; 0 is not guaranteed.)
            assert drill.rpo_records is not None and drill.rpo_records < _RATE
            # The producer flushes and stops; the consumer processes everything acknowledged.
            producer.send_signal(signal.SIGTERM)
            assert producer.wait(60) == 0
            _wait_drained(produced, consumed)
            consumer.send_signal(signal.SIGTERM)
            assert consumer.wait(60) == 0
            check = check_ledgers([produced], [consumed])
    finally:
        replicator.send_signal(signal.SIGTERM)
        code = replicator.wait(90)
    assert code == 0, (tmp_path / "replicator.log").read_text()[-3000:]
    assert check.ok, check.summary()
    assert [r.outcome for r in store.runs.recent("failover")] == ["succeeded"]
    assert [r.outcome for r in store.runs.recent("failback")] == ["succeeded"]

    # The secret-leak check, in every place the runs wrote to.
    places = {
        "XCom": _xcom_values(runs),
        "the task logs": caplog.text
        + "".join(capfd.readouterr())
        + _files_text(airflow_home / "logs"),
        "the replicator's log": (tmp_path / "replicator.log").read_text(errors="replace"),
        "the state store": Path(state_url.removeprefix("sqlite:///"))
        .read_bytes()
        .decode(errors="replace"),
        "the status topic and the checkpoints": _internal_topics(pair),
        **_page(store, config_path, state_url),
    }
    # dag.test() hands the task logs to Python's logging and to the process's stdout
    # (both captured here); a scheduler's workers would write them under
    # AIRFLOW_HOME/logs, searched too.
    assert "cutover" in places["the task logs"] and "report" in places["the task logs"]
    assert len(pair.passwords()) >= 3  # broker, replicator, demo at least
    for user, password in pair.passwords().items():
        leaked = [where for where, text in places.items() if password.decode() in text]
        assert not leaked, f"the password of {user} is in {leaked}"


def _wait_drained(produced: Path, consumed: Path) -> None:
    """Until the consumer processed every acknowledged record; on timeout, say which
    are missing and where they were acknowledged."""
    try:
        wait_until(lambda: not check_ledgers([produced], [consumed]).missing, _TIMEOUT_S, "")
    except AssertionError:
        missing = set(check_ledgers([produced], [consumed]).missing)
        where = [e for e in read_ledger(produced) if e.id in missing]
        raise AssertionError(f"not processed within {_TIMEOUT_S}s: {where[:20]}") from None


def _xcom_values(runs: list[Any]) -> str:
    """Every XCom value the runs' tasks pushed, serialised."""
    from airflow.models.xcom import XComModel  # noqa: PLC0415 - after airflow_home
    from airflow.utils.session import create_session  # noqa: PLC0415 - after airflow_home
    from sqlalchemy import select  # noqa: PLC0415

    values = []
    with create_session() as session:
        for run in runs:
            rows = session.scalars(
                select(XComModel).where(
                    XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id
                )
            )
            values += [json.dumps(XComModel.deserialize_value(row), default=str) for row in rows]
    assert values, "no XCom found"
    return "\n".join(values)


def _files_text(folder: Path) -> str:
    if not folder.exists():
        return ""
    return "\n".join(
        path.read_text(errors="replace") for path in folder.rglob("*") if path.is_file()
    )


def _internal_topics(pair: SecuredPair) -> str:
    """The status topics and checkpoints of both flows, as text."""
    texts = []
    for cluster, topic in (
        ("dr", "replicator-status.internal"),
        ("dr", "primary.checkpoints.internal"),
        ("primary", "replicator-status.internal"),
        ("primary", "dr.checkpoints.internal"),
    ):
        assert pair.end_offsets(cluster, topic, 1), f"{topic} on {cluster} is empty"
        bootstrap = pair.stack.bootstrap(cluster)
        for _, record in read_partition(bootstrap, topic, 0, client=pair.admin(cluster)):
            texts.append(((record.key or b"") + (record.value or b"")).decode(errors="replace"))
    return "\n".join(texts)


def _page(store: StateStore, config: Path, state_url: str) -> dict[str, str]:
    """The DR status page's HTML, its JSON and every run's page and audit report."""
    import replicator_airflow.status_page as page  # noqa: PLC0415 - after airflow_home
    from replicator_airflow.hooks import ReplicatorSettings  # noqa: PLC0415

    client = TestClient(page.create_app(lambda: ReplicatorSettings(str(config), state_url)))
    shown = {"the page's HTML": client.get("/").text, "its JSON": client.get("/api/status").text}
    for kind in ("failover", "failback", "drill"):
        for run in store.runs.recent(kind):
            shown[f"{kind} {run.run_id}'s page"] = client.get(f"/runs/{run.run_id}").text
            report = client.get(f"/runs/{run.run_id}/report.html")
            assert report.status_code == 200, report.text[:500]
            shown[f"{kind} {run.run_id}'s report"] = report.text
    assert "primary->dr" in shown["its JSON"]
    return shown


@pytest.mark.timeout(900)  # a Spark cluster, its job and the GX suites on a busy machine
def test_verify_replication_dag_on_a_spark_cluster_with_passwords_from_the_connection(
    airflow_home: Path,
    secured_pair: SecuredPair,
    tmp_path: Path,
    state_url: str,
    store: StateStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The verification DAG on SASL_SSL, submitted to a Spark standalone cluster of the
    test's own: the plan task reads the master from `spark_local` and ships the
    truststore (`--files`), the executor fetches it into its working directory, the
    driver reads it by the same name in the run's folder. The configuration takes
    primary's password from the `replicator_default` connection's password field and
    dr's from its extra's "secrets" (`${conn:...}`, no password file). No password in
    XCom, the rendered fields, the task logs, or the Spark cluster's logs and files."""
    pair = secured_pair
    password = pair.passwords()["replicator"].decode()
    monkeypatch.setenv(
        "AIRFLOW_CONN_REPLICATOR_DEFAULT",
        json.dumps(
            {
                "conn_type": "replicator",
                "password": password,
                "extra": {
                    "config": str(_passwords_from_the_connection(pair, tmp_path)),
                    "state_url": state_url,
                    "secrets": {"dr_password": password},
                },
            }
        ),
    )
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, on loopback as the cluster
    topic = f"demo.dagverify-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 2, client=pair.admin("primary"))
    wanted = preload(pair.primary, topic, 500, 2, client=pair.admin("primary"))
    flow = load_config(pair.clients_file).flow("primary->dr")
    with runner([flow], store):
        wait_until(lambda: pair.end_offsets("dr", f"primary.{topic}", 2) == wanted, 90, "copied")
    with standalone_spark(tmp_path / "spark") as spark:
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_LOCAL",
            json.dumps(
                {"conn_type": "spark", "host": spark.master_url, "extra": {"deploy-mode": "client"}}
            ),
        )
        run = (
            dagbag()
            .get_dag("verify_replication")
            .test(run_conf={"flow": "primary->dr", "topics": [topic]})
        )
    # dag.test() writes the task logs (spark-submit's output among them) to stdout.
    task_logs = caplog.text + "".join(capfd.readouterr())
    assert run.state == "success", (task_states(run), task_logs[-5000:])
    [verified] = store.runs.recent("verification")
    assert verified.outcome == "succeeded"
    assert verified.params["master"] == spark.master_url
    ca = pair.stack.security.ca_file
    planned = xcom(run, "plan")
    assert planned["files"] == str(ca)
    assert not (Path(planned["run"]["directory"]) / ca.name).exists()  # the link is gone
    # Added by the driver, fetched by the executor into its own working directory.
    assert f"Added file file://{ca}" in task_logs
    [executor] = spark.executor_dirs()
    assert (executor / ca.name).read_bytes() == ca.read_bytes()
    assert f"/files/{ca.name}" in (executor / "stderr").read_text()
    texts = {
        "XCom": _xcom_values([run]),
        "the rendered fields": _rendered_fields(run),
        "the task logs": task_logs,
        **{str(path): path.read_text(errors="replace") for path in spark.files()},
    }
    for user, secret in pair.passwords().items():
        leaked = [where for where, text in texts.items() if secret.decode() in text]
        assert not leaked, f"the password of {user} is in {leaked}"


def _passwords_from_the_connection(pair: SecuredPair, tmp_path: Path) -> Path:
    """The stack's clients.properties with the replicator's password taken from the
    connection, `${conn:password}` for primary and `${conn:dr_password}` for dr,
    instead of the password file."""
    security = pair.stack.security
    assert security is not None
    from_file = f"${{file:{security.password_file('replicator')}:password}}"
    text = "\n".join(
        line.replace(
            from_file, "${conn:dr_password}" if line.startswith("dr.") else "${conn:password}"
        )
        for line in pair.clients_file.read_text().splitlines()
    )
    assert "${file:" not in text and "${conn:dr_password}" in text
    path = tmp_path / "mm2.properties"
    path.write_text(text + "\n")
    return path


def _rendered_fields(run: Any) -> str:
    """The rendered template fields Airflow stored for the run's tasks, serialised."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415 - after airflow_home
    from sqlalchemy import select  # noqa: PLC0415

    with create_session() as session:
        rows = session.scalars(
            select(RenderedTaskInstanceFields).where(
                RenderedTaskInstanceFields.dag_id == run.dag_id,
                RenderedTaskInstanceFields.run_id == run.run_id,
            )
        ).all()
        fields = [json.dumps(row.rendered_fields, default=str) for row in rows]
    assert fields, "no rendered fields found"
    return "\n".join(fields)


def test_replication_sync_dag_on_the_secured_stack(
    airflow_home: Path,
    secured_pair: SecuredPair,
    state_url: str,
    store: StateStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """One round of the sync DAG (topics, checkpoints, ACL sync) as `User:replicator`
    with its planned ACLs: an application's group is checkpointed on dr; no password
    in its XCom or task logs."""
    pair = secured_pair
    monkeypatch.setenv(
        "AIRFLOW_CONN_REPLICATOR_DEFAULT",
        json.dumps(
            {
                "conn_type": "replicator",
                "extra": {"config": str(pair.clients_file), "state_url": state_url},
            }
        ),
    )
    topic = f"demo.dagsync-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 2, client=pair.admin("primary"))
    wanted = preload(pair.primary, topic, 200, 2, client=pair.admin("primary"))
    flow = load_config(pair.clients_file).flow("primary->dr")
    with runner([flow], store):
        wait_until(lambda: pair.end_offsets("dr", f"primary.{topic}", 2) == wanted, 90, "copied")
    group = f"app-{uuid.uuid4().hex[:8]}"
    admin = pair.admin("primary")
    primary = ClusterConfig("primary", pair.primary, consumer=admin, producer=admin, admin=admin)
    commit_offsets(primary, group, {(topic, 0): 50, (topic, 1): 60})

    run = dagbag().get_dag("replication_sync").test(run_conf={"flows": ["primary->dr"]})
    assert run.state == "success", task_states(run)
    stored = read_checkpoints(flow.target, "primary.checkpoints.internal")
    assert {(p, c.upstream) for (g, _, p), c in stored.items() if g == group} == {(0, 50), (1, 60)}
    texts = {
        "XCom": _xcom_values([run]),
        "the task logs": caplog.text + "".join(capfd.readouterr()),
    }
    for user, password in pair.passwords().items():
        leaked = [where for where, text in texts.items() if password.decode() in text]
        assert not leaked, f"the password of {user} is in {leaked}"
