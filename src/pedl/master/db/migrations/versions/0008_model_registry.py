"""model_registry (placeholder, filled in by the change that adds the tables)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 16:30:00.000000
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
