"""An id is handed out once: deleting the newest experiment, trial, model or workspace does not free
its id for the next one (SQLite's AUTOINCREMENT, migration 0019; PostgreSQL's sequences), and the
upgrade that adds AUTOINCREMENT keeps every row, children included."""

from __future__ import annotations

from alembic.script import ScriptDirectory
from sqlalchemy import Connection, delete, inspect, select, text
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.db import migrate, models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import ExperimentState, TrialState

AUTOINCREMENT = "0019"


def _user(s: Session) -> models.User:
    user = models.User(username="u", password_hash="x", admin=False, active=True, created_at=1.0, modified_at=1.0)
    s.add(user)
    s.flush()
    return user


def _experiment(s: Session, owner: models.User) -> models.Experiment:
    exp = models.Experiment(
        name="e",
        owner_id=owner.id,
        state=ExperimentState.COMPLETED,
        config={},
        original_config="",
        resource_pool="default",
        start_time=1.0,
    )
    s.add(exp)
    s.flush()
    return exp


def _trial(s: Session, exp: models.Experiment, n: int) -> models.Trial:
    trial = models.Trial(
        experiment_id=exp.id,
        request_id=f"r{n}",
        task_id=f"{exp.id}.{n}",
        hparams={},
        seed=0,
        state=TrialState.COMPLETED,
        start_time=1.0,
    )
    s.add(trial)
    s.flush()
    return trial


def test_the_newest_experiments_and_trials_id_is_not_handed_out_again(database: Database) -> None:
    with database.session() as s:
        user = _user(s)
        exp = _experiment(s, user)
        trial = _trial(s, exp, 1)
        s.commit()
        gone = (exp.id, trial.id)
    with database.session() as s:
        s.execute(delete(models.Experiment).where(models.Experiment.id == gone[0]))  # its trial goes with it
        s.commit()
    with database.session() as s:
        exp = _experiment(s, s.scalar(select(models.User).where(models.User.username == "u")))
        trial = _trial(s, exp, 2)
        s.commit()
        assert exp.id > gone[0] and trial.id > gone[1]


def _insert(c: Connection, table: str, **given: object) -> int:
    """A row of the schema as it is at this revision: the given values, and a plain one for each other
    column that must have one."""
    values = dict(given)
    for col in inspect(c).get_columns(table):
        if col["name"] in values or col["nullable"] or col["default"] is not None or col["name"] == "id":
            continue
        kind = str(col["type"]).upper()
        values[col["name"]] = (
            0
            if any(k in kind for k in ("INT", "FLOAT", "BOOL", "NUMERIC", "DOUBLE", "REAL"))
            else "{}"
            if "JSON" in kind
            else f"{table}-{len(values)}-{given.get('id', '')}"
        )
    names = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    return c.execute(text(f"INSERT INTO {table} ({names}) VALUES ({marks}) RETURNING id"), values).scalar_one()


def _count(c: Connection, table: str) -> int:
    return c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_adding_autoincrement_keeps_every_row_and_child_row(isolated_master_config: MasterConfig) -> None:
    db = Database(isolated_master_config.database_url())
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config(db.engine))
        migrate.upgrade(db.engine, script.get_revision(AUTOINCREMENT).down_revision)
        with db.engine.begin() as c:  # rows as the schema before the revision has them
            user = _insert(c, "users", username="u", admin=False, active=True)
            exps = [_insert(c, "experiments", owner_id=user, project_id=1, archived=False) for _ in range(3)]
            trials = [_insert(c, "trials", experiment_id=e, task_id=f"{e}.1") for e in exps]
            _insert(c, "metrics", trial_id=trials[-1], metrics="{}")
        migrate.upgrade(db.engine)
        with db.engine.begin() as c:
            assert [_count(c, t) for t in ("experiments", "trials", "metrics")] == [3, 3, 1]
            c.execute(text("DELETE FROM experiments WHERE id = :id"), {"id": exps[-1]})
            # foreign keys are on again after the migration: the trial and its metrics went with it
            assert [_count(c, t) for t in ("trials", "metrics")] == [2, 0]
            assert _insert(c, "experiments", owner_id=user, project_id=1, archived=False) > exps[-1]
    finally:
        db.dispose()
