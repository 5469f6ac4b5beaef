"""experiments.labels: the experiment's labels as a column the listing can filter on

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 12:00:00.000000

Labels were only inside the config JSON, which neither database can filter on portably and fast.
The column holds them between unit separators ("\x1fa\x1fb\x1f"), so a label is matched whole with
LIKE; existing experiments get theirs from their config.
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SEP = "\x1f"


def joined(labels: object) -> str:
    if not isinstance(labels, list):
        return ""
    kept = [str(x) for x in labels if isinstance(x, str) and SEP not in x]
    return SEP + SEP.join(kept) + SEP if kept else ""


def upgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("labels", sa.Text(), nullable=False, server_default=""))
    conn = op.get_bind()
    experiments = sa.table(
        "experiments", sa.column("id", sa.Integer), sa.column("config", sa.Text), sa.column("labels", sa.Text)
    )
    rows = conn.execute(sa.select(experiments.c.id, experiments.c.config)).all()
    for exp_id, config in rows:
        try:
            labels = (json.loads(config) if isinstance(config, str) else config or {}).get("labels")
        except (ValueError, AttributeError):
            continue
        value = joined(labels)
        if value:
            conn.execute(experiments.update().where(experiments.c.id == exp_id).values(labels=value))


def downgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_column("labels")
