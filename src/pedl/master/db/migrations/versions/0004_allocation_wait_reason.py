"""allocations.wait_kind, wait_reason, wait_since: why a queued allocation waits

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 21:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: rows queued before this revision get a reason on the next scheduling pass
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("wait_kind", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("wait_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("wait_since", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_column("wait_since")
        batch_op.drop_column("wait_reason")
        batch_op.drop_column("wait_kind")
