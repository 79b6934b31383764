"""`replicator status` says which data path each worker's records take (issue 29):
the worker's row carries `WorkerStatus.data_path` as the task's log line says it."""

from __future__ import annotations

import pytest

from replicator.cli.replication import _print_status
from replicator.engine.status import WorkerStatus


@pytest.mark.parametrize(
    "path",
    [
        "records move through the compiled data plane (librdkafka 2.12.1)",
        "records move through the Python loop: replicator.data.path = python",
        "records move through the compiled data plane (librdkafka 2.12.1, exactly-once: "
        "a transactional Mover per partition)",
    ],
)
def test_the_workers_line_says_its_data_path(capsys: pytest.CaptureFixture[str], path: str) -> None:
    worker = WorkerStatus(
        flow="primary->dr", worker="w-1", state="running", partitions=3, data_path=path
    )
    _print_status([worker])
    # The row's last cell wraps at the table's width: its words, rejoined, are the path.
    row = " ".join(capsys.readouterr().out.split())
    assert "worker w-1" in row and "partitions=3" in row and path in row


def test_a_worker_older_than_the_field_reads_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    _print_status([WorkerStatus(flow="primary->dr", worker="w-1", state="running")])
    assert capsys.readouterr().out.rstrip().endswith("partitions=0")
