"""Approvals: the recorded answer to each procedure run's approval question (issue 26
point 6).

The approval task writes it from the human-in-the-loop response; the first step of
the run that changes anything reads it and refuses unless it is Approve, by an
allowed approver, for this run (`replicator.procedures.approval`).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_NAME = 255


def upgrade() -> None:
    op.create_table(
        "dr_approvals",
        sa.Column("procedure_id", sa.String(_NAME), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("approver", sa.String(_NAME)),
        sa.Column("approver_name", sa.String(_NAME)),
        sa.Column("approver_roles", sa.JSON(), nullable=False),
        sa.Column("triggered_by", sa.String(_NAME)),
        sa.Column("answered_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("preflight_rechecked_at", sa.DateTime()),
        sa.Column("details", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dr_approvals")
