"""Fencing tokens: each lease carries the token of its taking, and the last token
given per resource is kept after release, so tokens never repeat (issue 46 point 2).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_NAME = 255


def upgrade() -> None:
    op.add_column(
        "dr_leases", sa.Column("token", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.create_table(
        "dr_lease_tokens",
        sa.Column("resource", sa.String(_NAME), primary_key=True),
        sa.Column("token", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dr_lease_tokens")
    with op.batch_alter_table("dr_leases") as batch:
        batch.drop_column("token")
