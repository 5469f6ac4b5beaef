"""agents.credential_hash and instance_enrollments: agents authenticate as themselves

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02 10:00:00.000000

The cluster's agent token is an enrollment secret: at its first registration an agent is issued a
credential of its own, bound to its id, of which the master keeps the sha256 (agents.credential_hash).
An instance a provider launches with user data gets a single-use enrollment secret of its own
(instance_enrollments, its sha256 only), never the cluster's.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("credential_hash", sa.String(length=64), nullable=True))
    op.create_table(
        "instance_enrollments",
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("resource_pool", sa.String(length=255), nullable=False),
        sa.Column("launch_token", sa.String(length=64), nullable=False),
        sa.Column("instance_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("consumed_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("secret_hash"),
    )
    op.create_index("ix_instance_enrollments_launch_token", "instance_enrollments", ["launch_token"])
    op.create_index("ix_instance_enrollments_instance_id", "instance_enrollments", ["instance_id"])


def downgrade() -> None:
    op.drop_index("ix_instance_enrollments_instance_id", table_name="instance_enrollments")
    op.drop_index("ix_instance_enrollments_launch_token", table_name="instance_enrollments")
    op.drop_table("instance_enrollments")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("credential_hash")
