"""workspaces.checkpoint_storage, workspace_pins, projects.notes: what det edits on workspaces and projects

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 14:30:00.000000

A workspace may carry a checkpoint_storage section (Determined's checkpointStorageConfig), checked
against the master's storage roots like an experiment's and used under the config of experiments
created in it. Each user pins workspaces (Determined pins a new workspace for its creator). A project
keeps its notes ([{name, contents}]).
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # plain ALTER TABLE (SQLite 3.35+ drops columns too): a batch copy of workspaces would break the
    # foreign keys of projects and templates that point at it
    op.add_column("workspaces", sa.Column("checkpoint_storage", sa.JSON(), nullable=True))
    op.add_column("projects", sa.Column("notes", sa.JSON(), nullable=True))
    op.create_table(
        "workspace_pins",
        sa.Column("workspace_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("workspace_id", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("workspace_pins")
    op.drop_column("projects", "notes")
    op.drop_column("workspaces", "checkpoint_storage")
