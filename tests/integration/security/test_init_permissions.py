"""`replicator init` on secured clusters (SASL_SSL, StandardAuthorizer, no ACL means no
access): the least-privilege plan is checked against what the authorizer answers for
the configuration's own principal. With every ACL of the plan it is ready; without
one it names that ACL, the principal and the cluster, and exits 1; a principal the
clusters refuse (authentication) fails init too, unlike a cluster that does not answer."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from replicator.acls.plan import replicator_rules
from replicator.cli import main
from replicator.config import load_config

from helpers.secured import SecuredPair

pytestmark = pytest.mark.integration

CHECKPOINTS = "primary.checkpoints.internal"


def _init(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    state = f"sqlite:///{tmp_path / 'state.db'}"
    code = main(["init", "--config", str(config), "--state-url", state, "--json"])
    printed = capsys.readouterr()
    assert printed.out, f"exit {code}, nothing printed; stderr: {printed.err}"
    return code, json.loads(printed.out)


def _config(pair: SecuredPair, tmp_path: Path, user: str) -> Path:
    return pair.config_as(
        user,
        tmp_path / "mm2.properties",
        "dr->primary.enabled = false",
        f"primary->dr.topics = init-{user}",
    )


def test_init_checks_the_plan_against_the_authorizer(
    secured_pair: SecuredPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = secured_pair
    granted, lacking = f"init-ok-{uuid.uuid4().hex[:6]}", f"init-no-{uuid.uuid4().hex[:6]}"
    for folder in ("full", "partial"):
        (tmp_path / folder).mkdir()
    full = _config(pair, tmp_path / "full", granted)
    pair.grant(replicator_rules(load_config(full)))
    partial = _config(pair, tmp_path / "partial", lacking)
    rules = replicator_rules(load_config(partial))
    kept = [r for r in rules if (r.cluster, r.name, r.operation) != ("dr", CHECKPOINTS, "WRITE")]
    assert len(kept) == len(rules) - 1
    pair.grant(kept)

    code, report = _init(full, tmp_path / "full", capsys)

    assert code == 0 and report["ready"], report
    ok = [f for f in report["findings"] if f["step"] == "permissions" and f["outcome"] == "ok"]
    assert {f["cluster"] for f in ok} == {"primary", "dr"}
    assert all(f"User:{granted} holds " in f["text"] for f in ok), ok

    code, report = _init(partial, tmp_path / "partial", capsys)

    assert code == 1 and not report["ready"]
    [missing] = [f for f in report["findings"] if f["outcome"] == "missing"]
    assert missing["cluster"] == "dr"
    text = missing["text"]
    assert text.startswith(
        f"User:{lacking} lacks ALLOW WRITE on TOPIC {CHECKPOINTS} (literal) (asked on topic "
        f"{CHECKPOINTS}) - needed to primary->dr: write and read checkpoints"
    ), text
    assert "grant it with `replicator acls apply --config" in text
    # The password reaches neither the report nor anything printed.
    for password in pair.passwords().values():
        assert password.decode() not in json.dumps(report)


def test_init_fails_when_a_cluster_refuses_the_client(
    secured_pair: SecuredPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A principal the clusters do not know (a wrong user name or password) is a real
    problem, not an outage: each cluster `failed`, naming the authentication error and
    the settings to check, and the command exits 1 even with --allow-unreachable (the
    workers of docker-compose.yml and the Helm chart do not start)."""
    user = f"init-auth-{uuid.uuid4().hex[:6]}"
    config = _config(secured_pair, tmp_path, user)
    config.write_text(config.read_text().replace(f'username="{user}"', 'username="nobody"'))
    state = f"sqlite:///{tmp_path / 'state.db'}"

    code = main(["init", "--config", str(config), "--state-url", state, "--json",
                 "--allow-unreachable"])  # fmt: skip

    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["verdict"] == "not ready" and not report["unreachable"], report
    failed = {f["cluster"]: f["text"] for f in report["findings"] if f["outcome"] == "failed"}
    assert set(failed) == {"primary", "dr"}, report
    for alias, text in failed.items():
        assert "refuses the client: _AUTHENTICATION: " in text, text
        assert f"check {alias}.security.protocol" in text, text
