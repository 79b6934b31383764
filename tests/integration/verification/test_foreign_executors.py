"""Verification on a Spark cluster that does not run this project's environment (issue 15
item 5): the executors' Python has nothing installed (no `replicator`, no
confluent-kafka; PySpark only from the archives Spark itself puts on their path), as on a
shared cluster. The job ships the packages its UDFs import with `--py-files`
(`replicator.verification.job.py_files`), and a correct copy passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replicator.statestore import StateStore
from replicator.verification.plan import plan_verification
from replicator.verification.run import verify

from helpers.kafka import create_topic, unique_topic
from helpers.replication import flow_config, preload, running, wait_until

# A Spark standalone cluster, its job and the GX suites: on two loaded cores a run has
# taken over 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _bare_python(folder: Path) -> Path:
    """The interpreter with no site-packages (`-S`): what a foreign executor has."""
    script = folder / "python-without-packages"
    script.write_text(f'#!/bin/sh\nexec {sys._base_executable} -S "$@"\n')
    script.chmod(0o755)
    return script


def test_executors_without_the_project_verify_a_copy(
    tmp_path: Path, primary: str, dr: str, store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = _bare_python(tmp_path)
    probe = subprocess.run(
        [bare, "-c", "import replicator"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert "No module named 'replicator'" in probe.stderr
    topic = unique_topic("foreign")
    create_topic(primary, topic, partitions=2)
    wanted = preload(primary, topic, 2_000, 2)
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    with running(flow):
        # The offset syncs the replicator writes are decoded by a UDF on the executors.
        wait_until(
            lambda: all(
                w.in_flight == 0 and w.source_end == wanted[w.partition]
                for w in plan_verification(flow).windows
            ),
            120,
            "everything replicated",
        )
    monkeypatch.setenv("PYSPARK_PYTHON", str(bare))

    result = verify(flow, store, results=tmp_path)

    assert result.success, result.summary
    # Rows the executors decoded with the shipped `replicator.engine.formats`.
    assert pq.read_table(result.directory / "mappings").num_rows > 0
