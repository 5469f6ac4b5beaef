"""trial_source_infos: the trials that reported using a checkpoint or a model version

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 10:00:00.000000

Determined's trial source infos: a task calls core_context.experimental.report_task_using_checkpoint
(or _model_version), and the SDK's checkpoint.get_metrics / model_version.get_metrics then read the
metric reports of those trials. One row per (trial, checkpoint, type); it goes with its trial and its
checkpoint's row (an experiment's deletion); deleting the model version only clears model_id and
model_version (the link to the checkpoint stays). The table starts empty.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "trial_source_infos",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("trial_id", ID, nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("model_id", ID, nullable=True),
        sa.Column("model_version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["checkpoint_uuid"], ["checkpoints.uuid"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["model_id", "model_version"], ["model_versions.model_id", "model_versions.version"], ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trial_id", "checkpoint_uuid", "type", name="uq_trial_source_infos_trial_checkpoint_type"),
    )
    op.create_index("ix_trial_source_infos_checkpoint_uuid", "trial_source_infos", ["checkpoint_uuid"])
    op.create_index("ix_trial_source_infos_model_version", "trial_source_infos", ["model_id", "model_version"])


def downgrade() -> None:
    op.drop_index("ix_trial_source_infos_model_version", table_name="trial_source_infos")
    op.drop_index("ix_trial_source_infos_checkpoint_uuid", table_name="trial_source_infos")
    op.drop_table("trial_source_infos")
