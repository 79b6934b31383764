"""Failures that used to pass in silence: each now says what is wrong and where.

- an MM2 file for a one-broker cluster creates our own status and resets topics
  (MM2's `status.storage.replication.factor` is honoured, else the broker default);
- `replicator status` and `stop_flow` say that no replicator has run for a flow
  when its target has no status topic (or none of the flow's status);
- an unreachable bootstrap is one line naming the cluster, not a traceback;
- an unparseable state store URL is shown with its password redacted.

(`offset-syncs.topic.location = target`, once refused at load, now works:
tests/integration/config/test_settings_live.py.)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from replicator.cli import main
from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.config.redact import REDACTED, redact_url
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.resets import RESETS_TOPIC
from replicator.engine.status import STATUS_TOPIC, PartitionStatus, read_status
from replicator.errors import ReplicatorError
from replicator.procedures.flows import stop_flow
from replicator.procedures.reset_requests import request_reset
from replicator.statestore import StateStore, StateStoreError
from replicator_lab import ClusterSpec, LocalStack

from helpers.kafka import create_topic, free_port_pair, make_records, produce_records, unique_topic
from helpers.replication import running, wait_until

EXAMPLES = Path(__file__).resolve().parents[3] / "include" / "config"
_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap of a one-broker cluster of the module's own, on which nothing has run
    (the session's `dr` may hold a status topic from other tests)."""
    stack = LocalStack(
        [ClusterSpec("bare", free_port_pair())], data_dir=tmp_path_factory.mktemp("bare")
    )
    stack.up(timeout=120)
    yield stack.bootstrap("bare")
    stack.down(wipe=True)


def _config_file(tmp_path: Path, source: str, target: str, source_alias: str = "primary") -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = {source_alias}, dr\n"
        f"{source_alias}.bootstrap.servers = {source}\n"
        f"dr.bootstrap.servers = {target}\n"
        f"{source_alias}->dr.enabled = true\n"
        "replication.factor = 1\n"
    )
    return path


def _flow(path: Path) -> FlowConfig:
    (flow,) = load_config(path).flows
    return flow


# --- a missing status topic ------------------------------------------------------------


@pytest.mark.integration
def test_status_says_no_replicator_ran_when_the_status_topic_is_missing(
    primary: str, bare: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(tmp_path, primary, bare)

    assert main(["status", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"the status topic {STATUS_TOPIC} does not exist on cluster 'dr' ({bare})" in err
    assert "no replicator has run for flow primary->dr there" in err

    assert main(["status", "--config", str(config), "--json"]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "[]" and "does not exist on cluster 'dr'" in err


@pytest.mark.integration
def test_status_says_no_replicator_ran_for_a_flow_without_status(
    primary: str, dr: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A status topic that exists, holding no record of this (uniquely named) flow.
    source_alias = f"src{uuid.uuid4().hex[:8]}"
    config = _config_file(tmp_path, primary, dr, source_alias)
    flow = _flow(config)
    ensure_compacted_topic(flow.target, STATUS_TOPIC, 1, "status.topic.replication.factor")

    assert main(["status", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert f"holds no status of flow {source_alias}->dr" in err
    assert "no replicator has run for the flow there" in err


@pytest.mark.integration
def test_stop_flow_refuses_to_report_a_stop_it_cannot_see(
    primary: str, bare: str, tmp_path: Path, store: StateStore
) -> None:
    flow = _flow(_config_file(tmp_path, primary, bare))

    with pytest.raises(ReplicatorError) as error:
        stop_flow(store.flows, flow, "test", timeout_s=1)
    assert f"cannot confirm that flow {flow.name} stops, so it was not changed" in str(error.value)
    assert "no replicator has run for flow primary->dr there" in str(error.value)
    assert store.flows.get(flow.name) is None

    # With the source gone (required=False) the flow is set to stopped, flagged unconfirmed.
    report = stop_flow(store.flows, flow, "test", timeout_s=1, required=False)
    assert "does not exist on cluster 'dr'" in report["unconfirmed"]
    assert store.flows.get(flow.name).state == "stopped"


# --- an unreachable cluster ------------------------------------------------------------


@pytest.mark.integration
def test_unreachable_bootstrap_is_one_line_naming_the_cluster(
    primary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"127.0.0.1:{free_port_pair()}"  # nothing listens there
    config = _config_file(tmp_path, primary, nowhere)

    assert main(["status", "--config", str(config)]) == 1

    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith(f"replicator: error: cannot reach cluster 'dr' at {nowhere} ("), line
    assert f"check dr.bootstrap.servers in {config}" in line
    assert "'primary'" not in line, "the reachable cluster is not blamed"


# --- the state store URL ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://replicator:s3cr3t-pw@db.example:notaport/dr",  # a port that is no number
        "postgres ql://replicator:s3cr3t-pw@db.example/dr",  # not a URL at all
        "postgresql://replicator:s3cr3t-pw@with@at:xx/dr",  # an unescaped @ in the password
    ],
)
def test_unparseable_state_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(StateStoreError) as error:
        StateStore(url)
    message = str(error.value)
    assert "s3cr3t-pw" not in message and "with@at" not in message
    assert f"replicator:{REDACTED}@" in message
    assert "is not a SQLAlchemy URL" in message


def test_redact_url_keeps_urls_without_password() -> None:
    assert redact_url("sqlite:////tmp/state.db") == "sqlite:////tmp/state.db"
    assert redact_url("postgresql://dr@db:5432/dr") == "postgresql://dr@db:5432/dr"
    assert redact_url("postgresql://dr:pw@db:5432/dr") == f"postgresql://dr:{REDACTED}@db:5432/dr"


# --- an MM2 file for a small cluster ---------------------------------------------------


@pytest.mark.integration
def test_kafka_sample_mm2_file_creates_our_topics_on_one_broker(
    primary: str, bare: str, tmp_path: Path
) -> None:
    """Kafka's own connect-mirror-maker.properties sets every replication factor to 1
    (Connect's `status.storage.replication.factor` too) and no status.topic.* of ours:
    our status and resets topics are created on a one-broker target all the same."""
    topic = unique_topic("mm2file")
    create_topic(primary, topic)
    produce_records(primary, topic, make_records(10))
    sample = (EXAMPLES / "mm2-active-active.properties").read_text()
    for key, value in {
        "A.bootstrap.servers": primary,
        "B.bootstrap.servers": bare,
        "A->B.topics": re.escape(topic),
        "B->A.enabled": "false",
    }.items():
        sample, found = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", sample)
        assert found == 1, key
    path = tmp_path / "connect-mirror-maker.properties"
    path.write_text(sample)
    flow = load_config(path).flow("A->B")
    assert "status.topic.replication.factor" not in sample

    try:
        with running(flow):  # creates the status topic, then replicates
            wait_until(
                lambda: any(
                    isinstance(row, PartitionStatus)
                    and row.topic == topic
                    and row.next_offset == 10
                    for row in read_status(flow.target, flow.name)
                ),
                _TIMEOUT_S,
                "the partition replicated",
            )
        request_reset(flow, topic, "earliest")  # creates the resets topic

        topics = AdminClient({"bootstrap.servers": bare}).list_topics(timeout=30).topics
        for internal in (STATUS_TOPIC, RESETS_TOPIC):
            assert len(topics[internal].partitions[0].replicas) == 1, internal
    finally:
        # The status-topic tests above need it missing, also when run after this one.
        admin = AdminClient({"bootstrap.servers": bare})

        def left() -> set[str]:
            return {STATUS_TOPIC, RESETS_TOPIC} & set(admin.list_topics(timeout=30).topics)

        for future in admin.delete_topics(sorted(left())).values():
            future.result(timeout=30)
        wait_until(lambda: not left(), _TIMEOUT_S, "the internal topics deleted")
