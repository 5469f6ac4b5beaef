"""metric_digests, metric_digest_marks, metric_digest_resets: each metric series' digest for charts

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 10:00:00.000000

A chart's downsampled series is read from one small digest per series instead of every report
(metrics/digests.py). The tables start empty: the master builds the digests of the reports
already stored in the background, and reads the reports themselves until it has.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "metric_digest_marks",
        sa.Column("trial_id", ID, nullable=False),
        sa.Column("metric_group", sa.String(length=64), nullable=False),
        sa.Column("through_step", sa.BigInteger(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trial_id", "metric_group"),
    )
    op.create_table(
        "metric_digests",
        sa.Column("trial_id", ID, nullable=False),
        sa.Column("metric_group", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trial_id", "metric_group", "name"),
    )
    op.create_table(
        "metric_digest_resets",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("trial_id", ID, nullable=False),
        sa.Column("metric_group", sa.String(length=64), nullable=False),
        sa.Column("from_step", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_metric_digest_resets_trial_group", "metric_digest_resets", ["trial_id", "metric_group"])


def downgrade() -> None:
    op.drop_index("ix_metric_digest_resets_trial_group", table_name="metric_digest_resets")
    op.drop_table("metric_digest_resets")
    op.drop_table("metric_digests")
    op.drop_table("metric_digest_marks")
