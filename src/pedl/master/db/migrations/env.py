"""Alembic environment: the engine comes from the caller (pedl.master.db.migrate)."""

from alembic import context

from pedl.master.db.models import Base

config = context.config
engine = config.attributes["engine"]

with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
