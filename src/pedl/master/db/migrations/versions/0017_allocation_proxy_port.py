"""allocations.proxy_port: the port a task's service (a notebook, a TensorBoard) listens on, which the
master's proxy at /proxy/{task_id}/ relays to on the agent of the allocation

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 14:40:00.000000

The task registers it with its own token (POST /api/v1/allocations/{id}/proxy_port); the host is
always the address the allocation's agent registered with, never one a request names.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("proxy_port", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("proxy_port")
