"""Baseline: the schema as the replicator created it before migrations (commit 41d8c6e).

Stores of those releases were made by `MetaData.create_all`, which created missing
tables on every start and never altered one; so such a store has every table below
with these columns, or lacks whole tables (dr_leases came last). This revision
creates only the tables that are missing, and keeps the rows of the others: an
existing store is adopted as it is, a new one gets the full schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_NAME = 255


def _tables() -> list[tuple[str, list[sa.schema.SchemaItem]]]:
    """Each table of the baseline with its columns and constraints, in creation order."""
    return [
        (
            "dr_applications",
            [
                sa.Column("name", sa.String(_NAME), primary_key=True),
                sa.Column("active_cluster", sa.String(_NAME), nullable=False),
                sa.Column("fenced", sa.Boolean(), nullable=False),
                sa.Column("epoch", sa.Integer(), nullable=False),
                sa.Column("updated_at", sa.DateTime(), nullable=False),
            ],
        ),
        (
            "dr_clients",
            [
                sa.Column("application", sa.String(_NAME), primary_key=True),
                sa.Column("client_id", sa.String(_NAME), primary_key=True),
                sa.Column("role", sa.String(64), nullable=False),
                sa.Column("cluster", sa.String(_NAME), nullable=False),
                sa.Column("epoch", sa.Integer(), nullable=False),
                sa.Column("state", sa.String(16), nullable=False),
                sa.Column("last_seen", sa.DateTime(), nullable=False),
            ],
        ),
        (
            "dr_flows",
            [
                sa.Column("flow", sa.String(_NAME), primary_key=True),
                sa.Column("state", sa.String(64), nullable=False),
                sa.Column("detail", sa.JSON(), nullable=False),
                sa.Column("updated_at", sa.DateTime(), nullable=False),
            ],
        ),
        (
            "dr_runs",
            [
                sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
                sa.Column("run_id", sa.String(_NAME), nullable=False, unique=True),
                sa.Column("kind", sa.String(64), nullable=False),
                sa.Column("flow", sa.String(_NAME)),
                sa.Column("mode", sa.String(64)),
                sa.Column("params", sa.JSON(), nullable=False),
                sa.Column("started_at", sa.DateTime(), nullable=False),
                sa.Column("finished_at", sa.DateTime()),
                sa.Column("outcome", sa.String(64)),
                sa.Column("rpo_records", sa.BigInteger()),
                sa.Column("rto_seconds", sa.Float()),
                sa.Column("details", sa.JSON(), nullable=False),
            ],
        ),
        (
            "dr_steps",
            [
                sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
                sa.Column("procedure_id", sa.String(_NAME), nullable=False),
                sa.Column("name", sa.String(_NAME), nullable=False),
                sa.Column("state", sa.String(16), nullable=False),
                sa.Column("result", sa.JSON(), nullable=False),
                sa.Column("first_saved_at", sa.DateTime(), nullable=False),
                sa.Column("updated_at", sa.DateTime(), nullable=False),
                sa.UniqueConstraint("procedure_id", "name"),
            ],
        ),
        (
            "dr_leases",
            [
                sa.Column("resource", sa.String(_NAME), primary_key=True),
                sa.Column("owner", sa.String(_NAME), nullable=False),
                sa.Column("acquired_at", sa.DateTime(), nullable=False),
                sa.Column("expires_at", sa.DateTime(), nullable=False),
            ],
        ),
    ]


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, items in _tables():
        if name in existing:
            continue
        op.create_table(name, *items)
        if name == "dr_runs":
            op.create_index("ix_dr_runs_kind", "dr_runs", ["kind"])


def downgrade() -> None:
    raise NotImplementedError(
        "the baseline of the state store is not downgraded: it would delete the DR history"
    )
