"""trials.warm_start_checkpoint: the checkpoint a trial starts from when its experiment's searcher
names searcher.source_trial_id or source_checkpoint_uuid (Determined's warm start)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 14:55:00.000000

Resolved once, when the experiment is created (a source trial's latest completed checkpoint then);
the trial reports it as warmStartCheckpointUuid and its runs get it as their latest checkpoint until
the trial has one of its own.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("warm_start_checkpoint", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("warm_start_checkpoint")
