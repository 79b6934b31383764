"""Helpers for tests that run our DAGs in-process (`dag.test()`) on the session's
Airflow metadata DB (the `airflow_home` fixture in conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "dags"


def dagbag(folder: Path = DAGS) -> Any:
    """Our DAGs (or one file's), parsed as the dag-processor would."""
    # Late import: Airflow reads its settings at import, after `airflow_home` set them.
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415

    return DagBag(dag_folder=str(folder))
