"""checkpoints.deleting_by: what is deleting a checkpoint's files now

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 12:00:00.000000

A checkpoint leaves COMPLETED (to PARTIALLY_DELETED) before anything deletes its files, and this column
names what does: a checkpoint GC task's id, or the master itself. Download refuses such a checkpoint, and
the garbage collector deletes again those of a collection whose deletion ended unfinished.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("deleting_by", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("deleting_by")
