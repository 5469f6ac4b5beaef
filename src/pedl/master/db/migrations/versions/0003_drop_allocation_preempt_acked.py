"""drop allocations.preempt_acked: written by the preemption ack, never read

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 20:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_column("preempt_acked")


def downgrade() -> None:
    # existing rows get false, as the model's default gave every new row
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("preempt_acked", sa.Boolean(), nullable=False, server_default=sa.false()))
