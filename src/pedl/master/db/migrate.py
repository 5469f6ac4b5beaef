"""Run Alembic migrations programmatically (the master does this at start). A database that a newer
pedl has migrated, at a revision this pedl does not know, is refused: pedl never downgrades."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from pedl.errors import Conflict
from pedl.version import __version__

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


class DatabaseNewerThanMaster(Conflict):
    """The database's schema revision is unknown to this pedl: a newer pedl has upgraded it."""


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


@functools.cache
def _scripts() -> tuple[frozenset[str], str | None]:
    """(every revision this pedl knows, the newest): read from the migration files once per process
    (Alembic parses all of them each time it is asked)."""
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    return frozenset(rev.revision for rev in script.walk_revisions()), script.get_current_head()


def head_revision(engine: Engine | None = None) -> str | None:
    """The newest schema revision this pedl knows."""
    return _scripts()[1]


def database_revisions(engine: Engine) -> tuple[str, ...]:
    """The revisions stamped in the database's alembic_version; () for a database never migrated."""
    with engine.connect() as conn:
        return tuple(MigrationContext.configure(conn).get_current_heads())


def refuse_unknown_revision(engine: Engine) -> None:
    """Raise DatabaseNewerThanMaster, naming both revisions, when the database is at a revision this
    pedl has no migration for (Alembic itself would fail with "Can't locate revision")."""
    _refuse_unknown(database_revisions(engine))


def _refuse_unknown(stamped: tuple[str, ...]) -> None:
    known, head = _scripts()
    unknown = [rev for rev in stamped if rev not in known]
    if unknown:
        raise DatabaseNewerThanMaster(
            f"the database is at schema revision {', '.join(unknown)}, which this pedl ({__version__}, newest "
            f"schema revision {head}) does not know: a newer pedl has upgraded it. Run that "
            "newer pedl (or a later one) on this database; pedl does not downgrade a database's schema"
        )


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate to `revision`; a database already at the head is left as it is without Alembic's run
    (which parses every migration file: most of a test's master start)."""
    stamped = database_revisions(engine)
    _refuse_unknown(stamped)
    if revision == "head" and stamped == (_scripts()[1],):
        return
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    refuse_unknown_revision(engine)
    command.downgrade(alembic_config(engine), revision)
