"""generic_tasks: commands, notebooks, shells and TensorBoards (Determined's NTSC tasks)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 17:45:00.000000

Each runs as one allocation whose task_id is the task's id and whose trial_id is NULL; the task's
state and times are read from that allocation, so nothing here can disagree with it.
"""

import sqlalchemy as sa
from alembic import op

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "generic_tasks",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("owner_id", ID, nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("description", sa.String(length=512), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("context", sa.LargeBinary(), nullable=True),
        sa.Column("experiment_ids", sa.JSON(), nullable=False),
        sa.Column("trial_ids", sa.JSON(), nullable=False),
        sa.Column("secrets", sa.JSON(), nullable=False),
        sa.Column("start_time", sa.Float(), nullable=False),
        sa.Column("last_activity", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_generic_tasks_owner_id", "generic_tasks", ["owner_id"])
    op.create_index("ix_generic_tasks_workspace_id", "generic_tasks", ["workspace_id"])


def downgrade() -> None:
    op.drop_index("ix_generic_tasks_workspace_id", table_name="generic_tasks")
    op.drop_index("ix_generic_tasks_owner_id", table_name="generic_tasks")
    op.drop_table("generic_tasks")
