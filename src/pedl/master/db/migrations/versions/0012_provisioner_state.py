"""instances.idle_since and instances.terminate_sent_at; pool_provisioning: a provisioner's state that
survives a master restart

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 10:00:00.000000

The provisioner kept an instance's idle clock, when it last sent a terminate, its pool's launch
backoff and last error, and the (type, spot) pairs avoided after capacity failures in memory only: a
restart gave every idle instance another max_idle period, never sent again a terminate the cloud had
not acted on, and tried a type that had just failed at once. Instances stored before this revision
start with no idle clock (the first provisioning pass sets it) and no terminate sent; the table starts
empty (a pool without a row has no backoff and avoids nothing).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("idle_since", sa.Float(), nullable=True))
        batch.add_column(sa.Column("terminate_sent_at", sa.Float(), nullable=True))
    op.create_table(
        "pool_provisioning",
        sa.Column("resource_pool", sa.String(length=255), nullable=False),
        sa.Column("consecutive_errors", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("backoff_until", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.Float(), nullable=True),
        sa.Column("unavailable", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("resource_pool"),
    )


def downgrade() -> None:
    op.drop_table("pool_provisioning")
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("terminate_sent_at")
        batch.drop_column("idle_since")
