"""An unplanned failover's `unreplicated` step when the status topic says nothing of the
flow: the report says what is not known, never "nothing lost" (no cluster: the
status read is replaced)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from replicator.procedures import failover
from replicator.procedures.orchestration import ProcedureRequest, build

CONFIG = """\
clusters = primary, dr
primary.bootstrap.servers = 127.0.0.1:1
dr.bootstrap.servers = 127.0.0.1:2
primary->dr.enabled = true
topics = orders
"""


def _unplanned(tmp_path: Path) -> Any:
    config = tmp_path / "mm2.properties"
    config.write_text(CONFIG)
    params = {
        "config": str(config),
        "flow": "primary->dr",
        "applications": ["orders"],
        "state_url": f"sqlite:///{tmp_path / 'state.db'}",
        "mode": "unplanned",
    }
    return build(ProcedureRequest.from_params("failover", params))  # type: ignore[arg-type]


def test_no_partition_status_is_reported_as_unknown_not_as_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    procedure = _unplanned(tmp_path)
    monkeypatch.setattr(failover, "TargetIndex", lambda *_: nullcontext())
    monkeypatch.setattr(failover, "last_seen_progress", lambda flow, index: [])
    report = procedure._unreplicated()
    assert report["records"] is None
    assert report["partitions"] == []
    assert "holds no partition status of flow primary->dr" in report["unknown"]
    assert "'dr'" in report["unknown"]
