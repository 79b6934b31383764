"""The runs table group: the DR history (one row per failover, failback, drill or
verification) and the saved results of each procedure's steps, which let a
retried procedure skip the steps it finished.

A run that ended "aborted" or "rejected" (`FINAL_OUTCOMES`) keeps that record:
`finish` refuses to overwrite it (`RunEnded`), so what the abort undid stays in
the history even when a step that was still running ends after it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Row, insert, or_, select, update

from replicator.statestore import database, schema
from replicator.statestore.database import Database, json_field
from replicator.statestore.errors import NotFoundError, StateStoreError
from replicator.statestore.records import RunRecord, StepRecord, StepStatus

_STEP_STATES = ("done", "failed")
#: Outcomes no later `finish` overwrites: the run was aborted, or a person said no.
FINAL_OUTCOMES = ("rejected", "aborted")


class RunEnded(StateStoreError):
    """`finish` of a run that ended "aborted" or "rejected": its record is kept."""

    def __init__(self, message: str, outcome: str) -> None:
        super().__init__(message)
        self.outcome = outcome


class RunStore:
    """Record runs and their steps, and read the history back. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def __str__(self) -> str:
        """The state store it is a part of (its URL without a password)."""
        return str(self._db)

    # --- runs ---------------------------------------------------------------------

    def start(
        self, kind: str, flow: str | None, mode: str | None, params: Mapping[str, Any]
    ) -> str:
        """Record the start of a run; returns its id (`<kind>-<UTC time>-<random>`)."""
        started = database.now()
        run_id = f"{kind}-{started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        with self._db.write() as conn:
            conn.execute(
                insert(schema.runs).values(
                    run_id=run_id,
                    kind=kind,
                    flow=flow,
                    mode=mode,
                    params=json_field(f"params of run {run_id}", params),
                    started_at=started,
                    details={},
                )
            )
        return run_id

    def finish(
        self,
        run_id: str,
        outcome: str,
        rpo_records: int | None,
        rto_seconds: float | None,
        details: Mapping[str, Any],
    ) -> RunRecord:
        """Record how a run ended; finishing it again (a retry) overwrites the result,
        except that of a run that ended "aborted" or "rejected": RunEnded, and the
        record stays as it is (checked in the same statement, so no race)."""
        runs = schema.runs
        with self._db.write() as conn:
            done = conn.execute(
                update(runs)
                .where(
                    runs.c.run_id == run_id,
                    or_(runs.c.outcome.is_(None), runs.c.outcome.not_in(FINAL_OUTCOMES)),
                )
                .values(
                    finished_at=database.now(),
                    outcome=outcome,
                    rpo_records=rpo_records,
                    rto_seconds=rto_seconds,
                    details=json_field(f"details of run {run_id}", details),
                )
            )
            if not done.rowcount:
                ended = conn.execute(
                    select(runs.c.outcome, runs.c.finished_at).where(runs.c.run_id == run_id)
                ).first()
                if ended is None:
                    raise self._unknown_run(run_id)
                raise RunEnded(
                    f"run {run_id} ended {ended.outcome} at "
                    f"{ended.finished_at:%Y-%m-%d %H:%M:%S} UTC; its record is kept, not "
                    f"overwritten with {outcome!r}: an aborted or rejected run runs no "
                    "further step (`replicator history` shows what its end undid)",
                    ended.outcome,
                )
        return self.get(run_id)

    def get(self, run_id: str) -> RunRecord:
        with self._db.read() as conn:
            row = conn.execute(select(schema.runs).where(schema.runs.c.run_id == run_id)).first()
        if row is None:
            raise self._unknown_run(run_id)
        return RunRecord(**_without_seq(row))

    def recent(self, kind: str | None = None, limit: int = 50) -> list[RunRecord]:
        """The last `limit` runs (of `kind` if given), newest first."""
        query = select(schema.runs).order_by(schema.runs.c.seq.desc()).limit(limit)
        if kind is not None:
            query = query.where(schema.runs.c.kind == kind)
        with self._db.read() as conn:
            return [RunRecord(**_without_seq(row)) for row in conn.execute(query)]

    # --- procedure steps ----------------------------------------------------------

    def step(self, procedure_id: str, name: str) -> StepRecord | None:
        steps = schema.steps
        with self._db.read() as conn:
            row = conn.execute(
                select(steps).where(steps.c.procedure_id == procedure_id, steps.c.name == name)
            ).first()
        return None if row is None else StepRecord(**_without_seq(row))

    def save_step(
        self, procedure_id: str, name: str, state: StepStatus, result: Mapping[str, Any]
    ) -> StepRecord:
        if state not in _STEP_STATES:
            raise StateStoreError(
                f"step {name!r} of {procedure_id!r} saved with state {state!r}; "
                f"a step state is one of {', '.join(_STEP_STATES)}"
            )
        now = database.now()
        values = {"state": state, "result": json_field(f"result of step {name!r}", result)}
        with self._db.write() as conn:
            self._db.upsert(
                conn,
                schema.steps,
                {"procedure_id": procedure_id, "name": name},
                {**values, "updated_at": now},
                first={"first_saved_at": now},
            )
        saved = self.step(procedure_id, name)
        assert saved is not None  # written just above
        return saved

    def steps(self, procedure_id: str) -> list[StepRecord]:
        """The steps of one procedure run, in the order they were first saved."""
        steps = schema.steps
        query = select(steps).where(steps.c.procedure_id == procedure_id).order_by(steps.c.seq)
        with self._db.read() as conn:
            return [StepRecord(**_without_seq(row)) for row in conn.execute(query)]

    def _unknown_run(self, run_id: str) -> NotFoundError:
        return NotFoundError(
            f"run {run_id!r} is not in the state store {self}; "
            "list the recent ones with `replicator history`"
        )


def _without_seq(row: Row) -> dict[str, Any]:
    """A row's fields but its `seq`, which only orders rows and no record carries."""
    fields = dict(row._mapping)
    del fields["seq"]
    return fields
