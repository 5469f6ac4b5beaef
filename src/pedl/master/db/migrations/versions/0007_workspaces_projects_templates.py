"""workspaces_projects_templates (placeholder, filled in by the change that adds the tables)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 16:30:00.000000
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
