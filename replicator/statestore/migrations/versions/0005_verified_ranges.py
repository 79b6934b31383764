"""Verified ranges: per flow and source partition, each range of source offsets a
verification run proved copied, with its digest (issue 43 point 1).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_NAME = 255


def upgrade() -> None:
    op.create_table(
        "dr_verified_ranges",
        sa.Column("flow", sa.String(_NAME), primary_key=True),
        sa.Column("topic", sa.String(_NAME), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("source_first", sa.BigInteger(), primary_key=True),
        sa.Column("source_end", sa.BigInteger(), nullable=False),
        sa.Column("target_topic", sa.String(_NAME), nullable=False),
        sa.Column("target_topic_id", sa.String(32)),
        sa.Column("target_first", sa.BigInteger()),
        sa.Column("target_end", sa.BigInteger()),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(16), nullable=False),
        sa.Column("verified_at", sa.DateTime(), nullable=False),
        sa.Column("checked_at", sa.DateTime(), nullable=False),
        sa.Column("run_id", sa.String(_NAME)),
    )


def downgrade() -> None:
    op.drop_table("dr_verified_ranges")
