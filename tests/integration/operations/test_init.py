"""`replicator init` on clusters it did not start (the test clusters, under aliases of
this test's own so its internal topics are new): a dry run changes nothing and says
what it would do, the run does it, a second run finds everything in place, and a
cluster that does not answer is named with the fix while the rest is done (partial:
exit status 3, 0 with --allow-unreachable). Its permission check on a cluster
with an authorizer: tests/integration/security/test_init_permissions.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from replicator.cli import main
from replicator.engine.internal_topics import CURRENT_STATE_SEGMENTS
from replicator.statestore import StateStore

from helpers.kafka import free_port_pair

pytestmark = pytest.mark.integration


def _config(tmp_path: Path, primary: str, dr: str, *extra: str) -> tuple[Path, str, str]:
    suffix = uuid.uuid4().hex[:6]
    home, away = f"home{suffix}", f"away{suffix}"
    path = tmp_path / "mm2.properties"
    path.write_text(
        "\n".join(
            [
                f"clusters = {home}, {away}",
                f"{home}.bootstrap.servers = {primary}",
                f"{away}.bootstrap.servers = {dr}",
                f"{home}->{away}.enabled = true",
                f"{home}->{away}.topics = orders",
                f"{away}->{home}.enabled = true",
                f"{away}->{home}.topics = orders",
                "replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "status.topic.replication.factor = 1",
                "applications.orders.producer.principals = User:orders-app",
                *extra,
            ]
        )
    )
    return path, home, away


def _init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["init", *args, "--json"])
    printed = capsys.readouterr()
    assert printed.out, f"exit {code}, nothing printed; stderr: {printed.err}"
    return code, json.loads(printed.out)


def _lines(report: dict, outcome: str) -> list[str]:
    return [f["text"] for f in report["findings"] if f["outcome"] == outcome]


def test_init_dry_run_then_run_then_again(
    tmp_path: Path, primary: str, dr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, home, away = _config(tmp_path, primary, dr)
    state_file = tmp_path / "state" / "replicator.db"
    state = ["--state-url", f"sqlite:///{state_file}"]
    args = ["--config", str(config), *state, "--home", home]
    internal = {
        (home, f"mm2-offset-syncs.{away}.internal"),  # on the source, MM2's default
        (away, f"mm2-offset-syncs.{home}.internal"),
        (away, f"{home}.checkpoints.internal"),
        (home, f"{away}.checkpoints.internal"),
    }

    code, dry = _init(capsys, *args, "--dry-run")

    assert code == 0 and dry["ready"] and dry["dry_run"], dry
    would = _lines(dry, "would")
    for _, topic in internal:
        assert f"create {topic} (compacted, 1 partition, replication factor 1)" in would
    assert any(t.startswith("migrate state store") for t in would), would
    assert f"record flow {away}->{home} as stopped ({home} is active)" in would
    assert f"register application orders as active on {home}" in would
    assert not state_file.exists()  # nothing created, not even the store's file
    topics = AdminClient({"bootstrap.servers": primary}).list_topics(timeout=10).topics
    assert f"mm2-offset-syncs.{away}.internal" not in topics

    code, run = _init(capsys, *args)

    assert code == 0 and run["ready"], run
    done = _lines(run, "done")
    for _, topic in internal:
        assert f"created {topic} (compacted, 1 partition, replication factor 1)" in done
    for bootstrap, topic in (
        (primary, f"{away}.checkpoints.internal"),
        (dr, f"{home}.checkpoints.internal"),
    ):
        resource = ConfigResource("topic", topic)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_configs([resource])[resource].result(timeout=10)
        assert described["cleanup.policy"].value == "compact"
        # Read whole for their current state: segments small enough to be compacted
        # (`CURRENT_STATE_SEGMENTS`); the offset syncs keep their history.
        assert described["segment.bytes"].value == CURRENT_STATE_SEGMENTS["segment.bytes"]
    syncs = ConfigResource("topic", f"mm2-offset-syncs.{away}.internal")
    admin = AdminClient({"bootstrap.servers": primary})
    described = admin.describe_configs([syncs])[syncs].result(timeout=10)
    assert described["segment.bytes"].value == str(1024**3)  # the broker's default
    store = StateStore(state[1])
    try:
        assert store.applications.get("orders").active_cluster == home
        assert store.flows.get(f"{away}->{home}").state == "stopped"
        assert store.flows.get(f"{home}->{away}") is None  # runs when started
        # Clusters without an authorizer allow everything: every planned ACL is there.
        assert not _lines(run, "missing")
        store.applications.fence("orders")  # something an operator did since: init must leave it
        store.flows.set(f"{away}->{home}", "running")
    finally:
        store.close()

    code, again = _init(capsys, *args)

    assert code == 0 and again["ready"], again
    assert not _lines(again, "done") and not _lines(again, "would")
    assert f"application orders is active on {home}; left as it is" in _lines(again, "ok")
    assert f"flow {away}->{home} is running; left as it is" in _lines(again, "ok")


def test_init_names_a_cluster_that_does_not_answer_and_does_the_rest(
    tmp_path: Path,
    primary: str,
    dr: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """During an outage of one cluster, init does everything it can on the other and on
    the state store, names the cluster that did not answer with the fix, and exits 3
    (partial); with --allow-unreachable, 0 (what docker-compose.yml and the Helm
    chart's init Job run, so the workers start)."""
    monkeypatch.setenv("COLUMNS", "1000")  # a finding's row on one line, however long
    dead = f"127.0.0.1:{free_port_pair()}"
    config, home, away = _config(tmp_path, primary, dr)
    config.write_text(
        config.read_text().replace(
            f"{away}.bootstrap.servers = {dr}", f"{away}.bootstrap.servers = {dead}"
        )
    )
    state = f"sqlite:///{tmp_path / 'state.db'}"
    args = ["--config", str(config), "--state-url", state, "--home", home]

    code = main(["init", *args])

    printed = capsys.readouterr()
    out = printed.out
    assert code == 3, out + printed.err
    [line] = [
        line for line in out.splitlines() if line.split()[:3] == ["clusters", "unreachable", away]
    ]
    assert f"{dead} does not answer" in line
    assert f"If {away} is down, nothing to fix" in line
    assert f"check {away}.bootstrap.servers" in line
    # What could be done was done: the internal topics on the cluster that answered,
    # its permissions, the state store.
    done = [line for line in out.splitlines() if line.split()[1:2] == ["done"]]
    assert any(f"created mm2-offset-syncs.{away}.internal" in line for line in done), out
    assert any(f"created {away}.checkpoints.internal" in line for line in done), out
    assert any(f"application orders registered as active on {home}" in line for line in done)
    assert not any(line.split()[1:2] == ["failed"] for line in out.splitlines()), out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("PARTIAL: ") and f"did not answer: {away}" in last, last
    # Logged too (stderr), whatever the output format: a start-up step's log shows it.
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(w.startswith(f"cluster {away}: {dead} does not answer") for w in warnings)
    assert "init is PARTIAL (exit status 3): did not answer: " + away in warnings, warnings

    code, again = _init(capsys, *args, "--allow-unreachable")

    assert code == 0, again
    assert (again["ready"], again["verdict"], again["unreachable"]) == (False, "partial", [away])
    assert not _lines(again, "done")  # the first run did it all: safe to run again
    assert f"application orders is active on {home}; left as it is" in _lines(again, "ok")


def test_init_refuses_applications_without_a_home(
    tmp_path: Path, primary: str, dr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _, _ = _config(tmp_path, primary, dr)

    code = main(["init", "--config", str(config), "--state-url", f"sqlite:///{tmp_path / 's.db'}"])

    assert code == 1
    err = capsys.readouterr().err
    assert "names applications (orders): say which cluster they run on now with --home" in err
