"""registered_models, model_labels, model_versions: Determined's model registry

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 16:30:00.000000

A model is named (unique), owned by its creator and belongs to a workspace (a plain integer, 1 by
default: no foreign key, workspaces come in their own migration). Its versions, numbered 1, 2, 3...
per model, are checkpoints; checkpoint garbage collection leaves a registered checkpoint alone.
The tables start empty.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "registered_models",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("owner_id", ID, nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_registered_models_owner_id", "registered_models", ["owner_id"])
    op.create_table(
        "model_labels",
        sa.Column("model_id", ID, nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["registered_models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("model_id", "label"),
    )
    op.create_index("ix_model_labels_label", "model_labels", ["label"])
    op.create_table(
        "model_versions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("model_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("owner_id", ID, nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["registered_models.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["checkpoint_uuid"], ["checkpoints.uuid"]),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("model_id", "version", name="uq_model_versions_model_version"),
    )
    op.create_index("ix_model_versions_checkpoint_uuid", "model_versions", ["checkpoint_uuid"])


def downgrade() -> None:
    op.drop_index("ix_model_versions_checkpoint_uuid", table_name="model_versions")
    op.drop_table("model_versions")
    op.drop_index("ix_model_labels_label", table_name="model_labels")
    op.drop_table("model_labels")
    op.drop_index("ix_registered_models_owner_id", table_name="registered_models")
    op.drop_table("registered_models")
