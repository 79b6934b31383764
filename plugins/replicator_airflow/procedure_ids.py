"""Which procedure a DAG run is: its id in the state store, the same for every task of
the run (the operators act under it, the notifiers tell people about it)."""

from __future__ import annotations

from airflow.sdk import Context


def procedure_id(context: Context) -> str:
    """The procedure id of the task's DAG run: `<dag id>/<run id>`."""
    return f"{context['dag'].dag_id}/{context['run_id']}"
