"""experiments.queue_position: a job's place in its pool's queue among equal priorities

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 18:00:00.000000

`det job update --ahead-of/--behind-of` (POST /api/v1/job-queues) moves a job between two others of
its priority; the scheduler orders by priority, then this position, then FIFO. NULL (every
experiment stored before this revision) stands for the experiment's submission time, so the queue
keeps its order across the upgrade.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("queue_position", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("queue_position")
