"""Alembic environment: the engine comes from the caller (pedl.master.db.migrate).

On SQLite the migrations run with foreign keys off, as SQLite's own recipe for changing a table says:
a batch migration that rebuilds a table drops the old one, and with foreign keys on that drop deletes
every child row through ON DELETE CASCADE. The keys are checked once the migrations are done, and back
on before the connection returns to the pool."""

from alembic import context

from pedl.master.db.models import Base

config = context.config
engine = config.attributes["engine"]


def _foreign_keys(connection, on: bool) -> None:
    # the driver's own connection, outside any transaction: inside one SQLite ignores this pragma
    connection.connection.driver_connection.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _foreign_keys(connection, False)
    try:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=sqlite)
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"a migration left rows whose parents are gone: {broken[:10]}")
        connection.commit()
    finally:
        if sqlite:
            _foreign_keys(connection, True)
