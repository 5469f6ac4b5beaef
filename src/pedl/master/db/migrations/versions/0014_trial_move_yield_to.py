"""trial_moves.yield_to: a move that gave a trial's slots to new work waiting for a boot

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 11:00:00.000000

A long checkpointed trial yields its slots to new work that would otherwise wait for an instance to
boot (provisioner/yielding.py). The move's row names the allocation it yielded to; the trial's next
allocation then queues behind that work rather than at its experiment's place in the queue, so the
freed slots go to the work they were freed for.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trial_moves") as batch:
        batch.add_column(sa.Column("yield_to", sa.String(length=160), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trial_moves") as batch:
        batch.drop_column("yield_to")
