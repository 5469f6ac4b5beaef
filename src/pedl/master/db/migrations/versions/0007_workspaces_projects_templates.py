"""workspaces, projects, templates: Determined's workspaces and projects, and config templates

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 16:30:00.000000

Every database gets workspace 1 and project 1, both "Uncategorized" and immutable as in Determined,
owned by the admin user where one exists already (a new database has none yet: the master fills
the owner in when it creates the default users). Experiments claimed project 1 before; one that
named a project that does not exist (pedl accepted any projectId) is moved to project 1.

experiments.project_id gets an index, not a foreign key: the master checks the project when it
creates an experiment (workspaces/projects.py), and a default project that goes missing (a database
emptied table by table) must not make every experiment insert fail.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEFAULT_NAME = "Uncategorized"


def upgrade() -> None:
    op.create_table(
        "workspaces",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("name_key", sa.String(length=1024), nullable=False),
        sa.Column("owner_id", ID, nullable=True),
        sa.Column("immutable", sa.Boolean(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name_key"),
    )
    op.create_table(
        "projects",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("workspace_id", ID, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("name_key", sa.String(length=1024), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("owner_id", ID, nullable=True),
        sa.Column("immutable", sa.Boolean(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"]),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workspace_id", "name_key"),
    )
    op.create_table(
        "templates",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("workspace_id", ID, nullable=False),
        sa.Column("owner_id", ID, nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"]),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_index("ix_experiments_project_id", "experiments", ["project_id"])

    conn = op.get_bind()
    users = sa.table(
        "users", sa.column("id", sa.Integer), sa.column("username", sa.String), sa.column("created_at", sa.Float)
    )
    admin_id = conn.execute(sa.select(users.c.id).where(users.c.username == "admin")).scalar()
    created = conn.execute(sa.select(sa.func.min(users.c.created_at))).scalar()
    common = {
        "id": 1,
        "name": DEFAULT_NAME,
        "name_key": DEFAULT_NAME.casefold(),
        "owner_id": admin_id,
        "immutable": True,
        "archived": False,
        "created_at": created or 0.0,
    }
    conn.execute(sa.table("workspaces", *(sa.column(k) for k in common)).insert().values(**common))
    project = {**common, "workspace_id": 1, "description": "", "key": "UNCAT"}
    conn.execute(sa.table("projects", *(sa.column(k) for k in project)).insert().values(**project))
    if conn.dialect.name == "postgresql":  # the rows took id 1 by hand: the sequences go on from there
        for table in ("workspaces", "projects"):
            conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 1)"))
    experiments = sa.table("experiments", sa.column("project_id", sa.Integer))
    conn.execute(experiments.update().where(experiments.c.project_id != 1).values(project_id=1))


def downgrade() -> None:
    op.drop_index("ix_experiments_project_id", table_name="experiments")
    op.drop_table("templates")
    op.drop_table("projects")
    op.drop_table("workspaces")
