"""Flow samples: per flow, what each supervisor run measured and found (issue 16 item 2).

The DR status page charts lag and checkpoint age from these rows over a few hours
and takes the supervisor's verdict from the newest (`replicator.operations.samples`
records them every run and prunes those beyond the retention).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_NAME = 255


def upgrade() -> None:
    op.create_table(
        "dr_flow_samples",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("flow", sa.String(_NAME), nullable=False),
        sa.Column("sampled_at", sa.DateTime(), nullable=False),
        sa.Column("live_workers", sa.Integer()),
        sa.Column("total_lag", sa.BigInteger()),
        sa.Column("max_lag", sa.BigInteger()),
        sa.Column("checkpoint_age_s", sa.Float()),
        sa.Column("heartbeat_age_s", sa.Float()),
        sa.Column("problems", sa.JSON(), nullable=False),
        sa.Column("bounds", sa.JSON(), nullable=False),
    )
    op.create_index("ix_dr_flow_samples_sampled_at", "dr_flow_samples", ["sampled_at"])


def downgrade() -> None:
    op.drop_index("ix_dr_flow_samples_sampled_at", table_name="dr_flow_samples")
    op.drop_table("dr_flow_samples")
