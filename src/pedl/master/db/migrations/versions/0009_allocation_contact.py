"""allocations.contacted_at: when the task first called the master with its own token;
agents.container_runtime: "docker" when the agent runs tasks that name an image

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 17:00:00.000000

A trial whose process exits 0 without ever having called the master ran off-cluster (Determined's
dummy mode: its harness found no /run/determined/info): it fails instead of ending COMPLETED with
nothing reported. Allocations stored before this revision count as having called (NULL would read
as silence), so an upgrade mid-run judges no running trial wrongly.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("contacted_at", sa.Float(), nullable=True))
    op.execute("UPDATE allocations SET contacted_at = COALESCE(started_at, queued_at)")
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("container_runtime", sa.String(length=16), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("container_runtime")
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("contacted_at")
