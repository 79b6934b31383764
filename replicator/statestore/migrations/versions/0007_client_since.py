"""Clients: when each first reported its current cluster, epoch and state, for the
cutover's "first client resumed" phase (issue 46 point 1).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("dr_clients", sa.Column("since", sa.DateTime()))


def downgrade() -> None:
    with op.batch_alter_table("dr_clients") as batch:
        batch.drop_column("since")
