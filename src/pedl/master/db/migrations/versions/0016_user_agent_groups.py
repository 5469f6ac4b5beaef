"""users.agent_uid/agent_gid/agent_user/agent_group: the agent user group a user's tasks run as

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 14:40:00.000000

Determined's `det user link-with-agent-user` (PATCH /api/v1/users/{id} with agentUserGroup): an
admin links a user to a uid, gid, user name and group name on the agents, and the user's tasks run
as them. Kept on the user's row, all four set or all four null (not linked).
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("agent_uid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("agent_gid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("agent_user", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("agent_group", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("agent_group")
        batch.drop_column("agent_user")
        batch.drop_column("agent_gid")
        batch.drop_column("agent_uid")
