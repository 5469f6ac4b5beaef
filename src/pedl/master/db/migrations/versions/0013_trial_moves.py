"""instances.draining_since, drain_reason and cordoned_since; trial_moves: consolidation and spot first move trials

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 01:00:00.000000

The provisioner's move planner (provisioner/consolidation.py) empties an instance by moving its
checkpointed trials through the preemption path: the instance drains (no new work), each move is
recorded (the pool's disruption budget is counted from these rows, so a restart does not reset it;
`pedl resource-pool describe` and the trial's timeline show them), and the instance ends once empty.
Spot first cordons an on-demand instance while spot capacity is available: it takes no new work.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("draining_since", sa.Float(), nullable=True))
        batch.add_column(sa.Column("drain_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("cordoned_since", sa.Float(), nullable=True))
    op.create_table(
        "trial_moves",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("resource_pool", sa.String(length=255), nullable=False),
        sa.Column("allocation_id", sa.String(length=160), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("saving_per_hour", sa.Float(), nullable=False),
        sa.Column("saving", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("planned_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("trial_moves") as batch:
        batch.create_index("ix_trial_moves_resource_pool_planned_at", ["resource_pool", "planned_at"])
        batch.create_index("ix_trial_moves_trial_id", ["trial_id"])
        batch.create_index("ix_trial_moves_allocation_id", ["allocation_id"])


def downgrade() -> None:
    op.drop_table("trial_moves")
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("cordoned_since")
        batch.drop_column("drain_reason")
        batch.drop_column("draining_since")
