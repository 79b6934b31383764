"""Incidents: what people were told about each problem, and when (issue 16 item 4).

One row per incident key (source/scope/kind), so the supervisor, the verification
and the approvals notify once per incident whichever scheduler runs them, across
restarts (`replicator.operations.incidents`).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_NAME = 255


def upgrade() -> None:
    op.create_table(
        "dr_incidents",
        sa.Column("key", sa.String(_NAME * 2 + 64), primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(_NAME), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime()),
        sa.Column("resolution", sa.Text()),
        sa.Column("notified", sa.String(16)),
        sa.Column("notified_at", sa.DateTime()),
    )


def downgrade() -> None:
    op.drop_table("dr_incidents")
