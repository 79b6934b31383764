"""Helpers for tests that run our DAGs in-process (`dag.test()`) on the session's
Airflow metadata DB (the `airflow_home` fixture in conftest.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.procedures.orchestration import ProcedureRequest

from helpers.procedures import ProcedureScene

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"


def dagbag(folder: Path = DAGS) -> Any:
    """Our DAGs (or one file's), parsed as the dag-processor would."""
    # Late import: Airflow reads its settings at import, after `airflow_home` set them.
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415

    return DagBag(dag_folder=str(folder))


class _Person:
    """Who answers a human-in-the-loop question in a test (what the API's auth
    manager hands the response handler)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get_id(self) -> str:
        return self.name

    def get_name(self) -> str:
        return self.name


@dataclass
class Attempt:
    """One person's try at answering a question: `status` as the REST API answered
    it (200, or the HTTPException's code, e.g. 403 for someone not assigned)."""

    by: str
    status: int
    detail: str = ""


@contextmanager
def answering(
    dag_id: str, task_id: str, option: str | None, by: str | list[str] = "ops"
) -> Iterator[list[Attempt]]:
    """While `dag.test()` runs in the calling thread, a thread answers the question of
    task `task_id` once it waits (state awaiting_input): with `option`, through the
    REST API's own response handler, as a person in the Required Actions page would
    (`by` a list: each person in turn tries until one is accepted; the attempts are
    yielded); or with None not at all, running the scheduler's timeout sweep until the
    question's `response_timeout` passes and its defaults are taken."""
    from airflow.api_fastapi.core_api.datamodels.hitl import (  # noqa: PLC0415
        UpdateHITLDetailPayload,
    )
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail  # noqa: PLC0415
    from airflow.jobs.job import Job  # noqa: PLC0415
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner  # noqa: PLC0415
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from airflow.utils.state import TaskInstanceState  # noqa: PLC0415
    from fastapi import HTTPException  # noqa: PLC0415
    from sqlalchemy import select  # noqa: PLC0415

    done = threading.Event()
    failure: list[BaseException] = []
    attempts: list[Attempt] = []
    people = [by] if isinstance(by, str) else list(by)
    sweeper = SchedulerJobRunner(job=Job()) if option is None else None

    def waiting() -> TaskInstance | None:
        with create_session() as session:
            return session.scalar(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id,
                    TaskInstance.task_id == task_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
            )

    def answer() -> None:
        try:
            while not done.is_set():
                ti = waiting()
                if ti is not None and sweeper is not None:
                    sweeper.check_awaiting_input_timeouts()
                elif ti is not None:
                    for person in people:
                        try:
                            with create_session() as session:
                                update_hitl_detail(
                                    dag_id=dag_id,
                                    dag_run_id=ti.run_id,
                                    task_id=task_id,
                                    update_hitl_detail_payload=UpdateHITLDetailPayload(
                                        chosen_options=[option]
                                    ),
                                    user=_Person(person),  # type: ignore[arg-type]
                                    session=session,
                                )
                        except HTTPException as refused:
                            if refused.status_code == 404:
                                # Asked between the task's state and its question being
                                # recorded (404 "detail does not exist"): ask again.
                                break
                            attempts.append(Attempt(person, refused.status_code, refused.detail))
                            continue
                        attempts.append(Attempt(person, 200))
                        return
                    else:
                        # Everyone was refused: dag.test() would wait for an answer for
                        # ever (and Airflow's own alarm cancels pytest-timeout's), so the
                        # question's task is failed and the run ends for the test to see.
                        _fail(ti)
                        return
                done.wait(0.2)
        except BaseException as exc:
            # The answer will not come: end the run (as above) rather than leave it
            # waiting, and raise this once the test's block is left.
            failure.append(exc)
            stuck = waiting()
            if stuck is not None:
                _fail(stuck)

    thread = threading.Thread(target=answer, name=f"answer {task_id}", daemon=True)
    thread.start()
    try:
        yield attempts
    finally:
        done.set()
        thread.join(timeout=30)
        if failure:
            raise failure[0]


def _fail(ti: Any) -> None:
    """Mark the task instance `ti` failed (dag.test() reads states from the database)."""
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415 - after airflow_home
    from airflow.utils.session import create_session  # noqa: PLC0415 - after airflow_home
    from airflow.utils.state import TaskInstanceState  # noqa: PLC0415 - after airflow_home
    from sqlalchemy import update  # noqa: PLC0415

    with create_session() as session:
        session.execute(
            update(TaskInstance)
            .where(TaskInstance.id == ti.id)
            .values(state=TaskInstanceState.FAILED)
        )


def xcom(run: Any, task_id: str) -> Any:
    """The return value of `task_id` in the DAG run `run`."""
    from airflow.models.xcom import XComModel  # noqa: PLC0415 - after airflow_home
    from airflow.utils.session import create_session  # noqa: PLC0415 - after airflow_home

    with create_session() as session:
        query = XComModel.get_many(
            run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value"
        )
        row = session.scalars(query).first()
        assert row is not None, f"{task_id} returned nothing"
        return XComModel.deserialize_value(row)


def task_states(run: Any) -> dict[str, str]:
    """The state of each task of the DAG run `run`."""
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def approval_policy(monkeypatch: Any, **policy: Any) -> None:
    """Set the deployment's approval policy (`replicator_airflow.operators.approval_policy`)
    where the DAGs' tasks read it without a `replicator_default` connection, as they
    read the scene's configuration and store; e.g. `skip=["planned_failover"]` lets a
    run with `skip_approval` go without asking."""
    monkeypatch.setenv("REPLICATOR_APPROVAL", json.dumps(policy))


def failover_conf(scene: ProcedureScene, **more: Any) -> dict[str, Any]:
    """The conf of a planned `failover` DAG run for the scene's application (starting
    the reverse flow when the scene has one); `more` adds or overrides keys."""
    return {
        "flow": "primary->dr",
        "mode": "planned",
        "applications": [scene.app],
        "reverse": len(scene.flows) > 1,
        "timeout_s": 90,
        **more,
    }


def task_request(scene: ProcedureScene, dag_id: str, conf: dict[str, Any]) -> ProcedureRequest:
    """What a task of a `dag_id` run with `conf` asks for: the conf, with the
    configuration and the state store of the connection (here: the scene's)."""
    return ProcedureRequest.from_params(
        dag_id, {**conf, "config": str(scene.config_path), "state_url": scene.state_url}
    )
