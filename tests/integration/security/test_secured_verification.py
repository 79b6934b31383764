"""`replicator verify` as the verifier role on SASL_SSL (issue 14 items 2 and 4): with
exactly its planned ACLs the Spark job verifies the copy, its truststore shipped to
the executors with `spark-submit --files` and named as shipped; one ACL less and the
run stops before Spark is submitted, naming the operation, the resource and the
principal; no password in any file the run leaves, Spark's included; the same on a
verification server, whose log holds no password either."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from replicator_spark.kafka_ranges import SMALL_RANGE_OFFSETS

from replicator.acls.plan import VERIFIER_GROUP_PREFIX, AclRule, verifier_rules
from replicator.config import load_config
from replicator.config.model import FlowConfig, NameFilter
from replicator.errors import ReplicatorError
from replicator.statestore import StateStore
from replicator.verification.plan import VerificationPlan
from replicator.verification.run import finish, run_spark, run_suites, spark_job, start, verify

from helpers.kafka import create_topic
from helpers.replication import preload, running, wait_until
from helpers.secured import SecuredPair
from helpers.verification_server import verification_server


def _copied_topic(pair: SecuredPair, name: str, records: int) -> str:
    """A topic of its own on the primary, replicated to dr by the replicator's principal."""
    topic = f"demo.{name}-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 2, client=pair.admin("primary"))
    wanted = preload(pair.primary, topic, records, 2, client=pair.admin("primary"))
    flow = _only(load_config(pair.clients_file).flow("primary->dr"), topic)
    with running(flow):
        wait_until(lambda: pair.end_offsets("dr", f"primary.{topic}", 2) == wanted, 90, "copied")
    return topic


def _only(flow: FlowConfig, topic: str) -> FlowConfig:
    return replace(flow, topics=NameFilter((re.compile(re.escape(topic)),)))


def _verifier(pair: SecuredPair, tmp_path: Path, without: AclRule | None = None) -> Path:
    """A verifier principal's configuration, granted its planned ACLs but `without`."""
    user = f"verifier-{uuid.uuid4().hex[:6]}"
    config = pair.config_as(user, tmp_path / "verifier.properties", "dr->primary.enabled = false")
    rules = verifier_rules(load_config(config), f"User:{user}")
    pair.grant([rule for rule in rules if not _same(rule, without)])
    return config


def _same(rule: AclRule, other: AclRule | None) -> bool:
    if other is None:
        return False
    fields = ("cluster", "resource_type", "pattern_type", "name", "operation")
    return all(getattr(rule, f) == getattr(other, f) for f in fields)


def _rule(cluster: str, kind: str, pattern: str, name: str, operation: str) -> AclRule:
    return AclRule(cluster, "", kind, pattern, name, operation, "verifier", "")


@pytest.mark.parametrize(
    ("without", "expected"),
    [
        (
            _rule("dr", "TOPIC", "PREFIXED", "primary.demo.", "READ"),
            "lacks ALLOW READ on TOPIC primary.{topic} on cluster 'dr'",
        ),
        (
            _rule("primary", "GROUP", "PREFIXED", f"{VERIFIER_GROUP_PREFIX}-", "READ"),
            f"lacks ALLOW READ on GROUP {VERIFIER_GROUP_PREFIX}- (prefixed) on cluster 'primary'",
        ),
        (
            _rule("primary", "TOPIC", "PREFIXED", "demo.", "DESCRIBE_CONFIGS"),
            "lacks ALLOW DESCRIBE_CONFIGS on TOPIC {topic} on cluster 'primary'",
        ),
    ],
    ids=["copy-read", "spark-group", "source-configs"],
)
def test_a_verifier_without_one_acl_stops_before_spark_naming_it(
    secured_pair: SecuredPair,
    tmp_path: Path,
    store: StateStore,
    without: AclRule,
    expected: str,
) -> None:
    pair = secured_pair
    topic = _copied_topic(pair, "noacl", 200)
    config = _verifier(pair, tmp_path, without)
    user = load_config(config).clusters["primary"].consumer["sasl.username"]
    flow = _only(load_config(config).flow("primary->dr"), topic)
    before = len(store.runs.recent("verification"))
    with pytest.raises(ReplicatorError) as stopped:
        start(flow, store, topics=[topic], results=tmp_path / "results", config_file=config)
    message = str(stopped.value)
    assert f"User:{user} {expected.format(topic=topic)}" in message, message
    assert f"--role verifier --principal User:{user}" in message
    assert "\n" not in message
    assert len(store.runs.recent("verification")) == before  # nothing started, nothing submitted
    assert not (tmp_path / "results").exists()


@pytest.mark.timeout(900)  # a Spark job and the GX suites on a busy machine
def test_the_verifier_role_verifies_with_the_truststore_shipped_and_leaks_nothing(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore
) -> None:
    """Local mode, but the job reads the truststore by the name `--files` gives it in
    the executors' working directory, as on a cluster that does not share the
    driver's files; Spark's event log and local directories are kept to be searched."""
    pair = secured_pair
    topic = _copied_topic(pair, "shipped", 1_000)
    config = _verifier(pair, tmp_path)
    flow = _only(load_config(config).flow("primary->dr"), topic)
    run = start(
        flow, store, topics=[topic], results=tmp_path / "results", config_file=config,
        ship_files=True,
    )  # fmt: skip
    ca = pair.stack.security.ca_file
    assert run.shipped == [str(ca)]
    assert VerificationPlan.read(run.plan).ship_files
    job = spark_job(run)
    assert job.command()[job.command().index("--files") + 1] == str(ca)
    spark_files = tmp_path / "spark"
    job = replace(
        job,
        conf={
            **job.conf,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.compress": "false",  # to be searched
            "spark.eventLog.dir": str(spark_files / "events"),
            "spark.local.dir": str(spark_files / "local"),
        },
    )
    (spark_files / "events").mkdir(parents=True)
    run_spark(job)
    summary = run_suites(run.directory)
    verification = finish(store, run, summary)
    assert verification.success, summary
    assert "ca.pem" not in [p.name for p in run.directory.iterdir()]  # the link is gone
    log = (run.directory / "spark.log").read_text()
    # Shipped with --files and fetched into the executor's files; the connector names
    # it as shipped (Spark logs no data source option: `cluster_options` unit tests).
    assert f"Added file file://{ca}" in log and f"Executor: Fetching file://{ca}" in log
    leaked = {
        str(path): user
        for user, password in pair.passwords().items()
        for folder in (run.directory, spark_files)
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink() and password in path.read_bytes()
    }
    assert not leaked


@pytest.mark.timeout(900)  # a server, a Spark job and the GX suites on a busy machine
def test_the_verifier_role_verifies_on_a_verification_server_and_leaks_nothing(
    secured_pair: SecuredPair, tmp_path: Path, store: StateStore
) -> None:
    """The job as a verification server's client: the server reads both clusters with
    the connector (windows too large for the client's own reads) as the verifier, with
    the configuration's truststore where it is; no password in the run's files or the
    server's log."""
    pair = secured_pair
    topic = _copied_topic(pair, "served", 2 * (SMALL_RANGE_OFFSETS + 100))
    config = _verifier(pair, tmp_path)
    flow = _only(load_config(config).flow("primary->dr"), topic)
    with verification_server(tmp_path / "server.log") as url:
        result = verify(
            flow, store, topics=[topic], master=url, results=tmp_path / "results",
            config_file=config,
        )  # fmt: skip

    assert result.success, result.summary
    assert not VerificationPlan.read(result.directory / "plan.json").ship_files
    assert result.summary["suites_ran"].startswith("warm, on 127.0.0.1:")
    leaked = {
        str(path): user
        for user, password in pair.passwords().items()
        for path in tmp_path.rglob("*")
        if path.is_file() and not path.is_symlink() and password in path.read_bytes()
    }
    assert not leaked
