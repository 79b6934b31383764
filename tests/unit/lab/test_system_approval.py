"""`make run`'s approval policy: what Airflow standalone is given, and that it is one
the DAGs accept (docs/failover-approval.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.procedures.approval import ApprovalPolicy
from replicator_lab.system import (
    APPROVAL_ENV,
    LOCAL_APPROVAL_POLICY,
    EmbeddedSystem,
    SystemOptions,
)


def _airflow_env(tmp_path: Path) -> dict[str, str]:
    options = SystemOptions(state_url=f"sqlite:///{tmp_path}/state.db", work_dir=tmp_path)
    return EmbeddedSystem(None, options)._airflow_env()  # type: ignore[arg-type]


def test_the_local_admin_approves_and_scripts_may_skip_planned_failovers_and_failbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(APPROVAL_ENV, raising=False)
    given = json.loads(_airflow_env(tmp_path)[APPROVAL_ENV])
    assert given == LOCAL_APPROVAL_POLICY
    policy = ApprovalPolicy.from_settings(given, f"${APPROVAL_ENV}")
    assert policy.users == ("admin",) and policy.roles == ()
    assert policy.skip == {"planned_failover", "failback"}


def test_a_policy_in_the_callers_environment_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = json.dumps({"approvers": ["alice"], "two_person": True})
    monkeypatch.setenv(APPROVAL_ENV, mine)
    assert _airflow_env(tmp_path)[APPROVAL_ENV] == mine
