"""Upgrading keeps the data: a database at the previous release's schema (revision 0003, the head
of that release), filled with SQL as that release wrote it, is migrated by the new master at start
with every row kept, on SQLite and PostgreSQL. The seeds upgrade by keeping the data volume."""

from __future__ import annotations

import json
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import Connection, inspect, text

from pedl.clock import ManualClock
from pedl.config.experiment_config import parse_experiment_config
from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.db import migrate
from pedl.master.db.engine import Database
from pedl.master.db.models import Base
from pedl.master.experiments.service import effective_config
from pedl.master.identity import passwords
from pedl.master.lifecycle import tokens
from tests.master.fakes import bearer, ctx_of, login

PREVIOUS_RELEASE = "0003"
NEW_ALLOCATION_COLUMNS = {"wait_kind", "wait_reason", "wait_since"}  # added by 0004
T0 = 1_699_000_000.0
SESSION_TOKEN = "a-login-token-from-before-the-upgrade"
CKPT = "7d9e4a8c-0b1f-4c55-9a1e-5f3c2d1b0a99"
# the tables as the previous release has them; each is compared column by column after the upgrade
KEYS = {
    "users": "id",
    "user_sessions": "id",
    "experiments": "id",
    "model_definitions": "experiment_id",
    "trials": "id",
    "allocations": "id",
    "metrics": "id",
    "checkpoints": "uuid",
    "instances": "id",
    "agents": "id",
    "events": "id",
    "task_logs": "id",
    "cluster_info": "id",
}
AUTO_IDS = {"users", "user_sessions", "experiments", "trials", "metrics", "events", "task_logs"}


def insert(conn: Connection, table: str, **row: Any) -> None:
    """One row, as the previous release inserted it: an autoincrement id comes from the database (a
    PostgreSQL sequence), so later inserts by the new master do not collide; it must be the id given."""
    values = {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in row.items()}
    given_id = values.pop("id") if table in AUTO_IDS else None
    sql = f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join(':' + k for k in values)})"
    if given_id is None:
        conn.execute(text(sql), values)
    else:
        assert conn.execute(text(sql + " RETURNING id"), values).scalar_one() == given_id


def fill_previous_release(conn: Connection, config: MasterConfig) -> None:
    """Two experiments as the previous release stored them: one COMPLETED with its metrics, checkpoint
    and ended allocation, one ACTIVE whose trial waits in the queue; instances, an agent, a login."""
    blank = passwords.hash_password(passwords.client_hash(""))
    for uid, name, admin in ((1, "admin", True), (2, "determined", False)):
        insert(
            conn,
            "users",
            id=uid,
            username=name,
            password_hash=blank,
            admin=admin,
            active=True,
            display_name=None,
            created_at=T0,
            modified_at=T0,
        )
    insert(
        conn,
        "users",
        id=3,
        username="alice",
        password_hash=passwords.hash_password(passwords.client_hash("pw")),
        admin=False,
        active=True,
        display_name="Alice",
        created_at=T0,
        modified_at=T0,
    )
    insert(
        conn,
        "user_sessions",
        id=1,
        user_id=3,
        token_hash=tokens.token_hash(SESSION_TOKEN),
        created_at=T0,
        expires_at=T0 + 10 * 86400,
    )
    insert(conn, "cluster_info", id=1, cluster_id="cluster-from-0003", created_at=T0)
    exp_config = effective_config(
        config,
        parse_experiment_config(
            "name: mnist\nentrypoint: python train.py\nsearcher: {name: single, metric: loss, max_length: 10}\n"
            "labels: [prod, mnist]\n"
        ),
    )
    for exp_id, state, live, progress in ((1, "STATE_COMPLETED", [], 1.0), (2, "STATE_ACTIVE", ["r0"], 0.0)):
        insert(
            conn,
            "experiments",
            id=exp_id,
            name=f"mnist-{exp_id}",
            description="",
            owner_id=3,
            state=state,
            config=exp_config,
            original_config="name: mnist\n",
            progress=progress,
            resource_pool="default",
            searcher_state={
                "seed": 7,
                "state": {"created": 1, "closed": [] if live else ["r0"], "live": live, "exhausted": True, "best": {}},
                "progress_total": 1.0,
                "progress_by_batches": True,
                "progress_version": 1,
            },
            start_time=T0 + exp_id,
            end_time=T0 + 600 if not live else None,
            archived=False,
            parent_id=None,
            project_id=1,
            notes=f"notes {exp_id}",
            end_reason=None,
        )
        insert(
            conn,
            "model_definitions",
            experiment_id=exp_id,
            archive=b"\x1f\x8b\x08\x00tgz" + bytes([exp_id]),
            size_bytes=9,
            file_count=1,
        )
    insert(
        conn,
        "trials",
        id=1,
        experiment_id=1,
        request_id="r0",
        task_id="1.1",
        hparams={"lr": 0.1},
        seed=7,
        state="STATE_COMPLETED",
        restarts=1,
        run_id=2,
        start_time=T0 + 1,
        end_time=T0 + 600,
        total_batches=10,
        latest_checkpoint=CKPT,
        best_metric=0.25,
        summary_metrics={"validation": {"loss": 0.25}},
        end_reason="searcher done",
        target_length=10,
    )
    insert(
        conn,
        "trials",
        id=2,
        experiment_id=2,
        request_id="r0",
        task_id="2.1",
        hparams={},
        seed=8,
        state="STATE_QUEUED",
        restarts=0,
        run_id=1,
        start_time=T0 + 2,
        end_time=None,
        total_batches=0,
        latest_checkpoint=None,
        best_metric=None,
        summary_metrics={},
        end_reason=None,
        target_length=10,
    )
    alloc = {
        "resource_pool": "default",
        "slots_needed": 1,
        "priority": 42,
        "owner_id": 3,
        "preempt_requested": False,
        "kill_requested": False,
    }
    insert(
        conn,
        "allocations",
        id="1.1.2",
        task_id="1.1",
        trial_id=1,
        name="Trial 1 (Experiment 1)",
        state="STATE_TERMINATED",
        assignment=[{"agent_id": "agent-1", "slot_ids": [0]}],
        session_token_hash="ab" * 32,
        queued_at=T0 + 1,
        assigned_at=T0 + 2,
        started_at=T0 + 3,
        ended_at=T0 + 600,
        exit_code=0,
        exit_reason="exited",
        **alloc,
    )
    insert(
        conn,
        "allocations",
        id="2.1.1",
        task_id="2.1",
        trial_id=2,
        name="Trial 2 (Experiment 2)",
        state="STATE_PENDING",
        assignment=[],
        session_token_hash="",
        queued_at=T0 + 2,
        assigned_at=None,
        started_at=None,
        ended_at=None,
        exit_code=None,
        exit_reason=None,
        **alloc,
    )
    for mid, group, steps, values in (
        (1, "training", 5, {"loss": 0.9}),
        (2, "training", 10, {"loss": 0.4}),
        (3, "validation", 10, {"loss": 0.25, "accuracy": 0.91}),
    ):
        insert(
            conn,
            "metrics",
            id=mid,
            trial_id=1,
            trial_run_id=2,
            metric_group=group,
            steps_completed=steps,
            report_time=T0 + 60 * steps,
            metrics=values,
        )
    insert(
        conn,
        "checkpoints",
        uuid=CKPT,
        trial_id=1,
        experiment_id=1,
        task_id="1.1",
        allocation_id="1.1.2",
        state="STATE_COMPLETED",
        report_time=T0 + 590,
        steps_completed=10,
        metadata={"steps_completed": 10},
        resources={"model.pt": 123},
        storage=exp_config["checkpoint_storage"],
        size_bytes=123,
    )
    insert(
        conn,
        "agents",
        id="agent-1",
        hostname="gpu-1",
        address="10.0.0.5",
        resource_pool="default",
        slots=[{"id": 0, "type": "cuda", "brand": "A100", "uuid": "GPU-1"}],
        state="CONNECTED",
        version="0.1.0",
        registered_at=T0,
        last_heartbeat=T0 + 600,
        disconnected_at=None,
        enabled=True,
        draining=False,
    )
    for inst_id, state, ended in (
        ("i-0aaaaaaaaaaaaaaa1", "RUNNING", None),
        ("i-0aaaaaaaaaaaaaaa2", "TERMINATED", T0 + 90),
    ):
        insert(
            conn,
            "instances",
            id=inst_id,
            resource_pool="default",
            provider="aws",
            instance_type="p3.2xlarge",
            spot=inst_id.endswith("2"),
            state=state,
            slots=1,
            price_per_hour=3.06,
            launch_token="tok-" + inst_id,
            spot_request_id=None,
            launched_at=T0,
            registered_at=T0 + 30,
            terminated_at=ended,
            termination_reason="idle" if ended else None,
            interrupted_at=None,
            adopted=False,
        )
    insert(
        conn,
        "events",
        id=1,
        entity_type="experiment",
        entity_id="1",
        time=T0,
        from_state=None,
        to_state="STATE_ACTIVE",
        level="info",
        message="created by alice",
    )
    insert(
        conn,
        "task_logs",
        id=1,
        task_id="1.1",
        trial_id=1,
        allocation_id="1.1.2",
        agent_id="agent-1",
        timestamp=T0 + 5,
        level="LOG_LEVEL_INFO",
        stdtype="stdout",
        source="task",
        message="epoch 1 done",
    )


def snapshot(db: Database, columns: dict[str, list[str]]) -> dict[str, list[tuple]]:
    with db.engine.connect() as conn:
        return {
            table: [
                tuple(row)
                for row in conn.execute(text(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {KEYS[table]}"))
            ]
            for table, cols in columns.items()
        }


def test_previous_release_database_upgrades_with_nothing_lost(isolated_master_config: MasterConfig) -> None:
    config = isolated_master_config
    config.data_dir.mkdir(parents=True, exist_ok=True)
    old = Database(config.database_url())
    migrate.upgrade(old.engine, PREVIOUS_RELEASE)
    assert migrate.database_revisions(old.engine) == (PREVIOUS_RELEASE,)
    old_columns = {t: [c["name"] for c in inspect(old.engine).get_columns(t)] for t in KEYS}
    assert not NEW_ALLOCATION_COLUMNS & set(old_columns["allocations"])  # really the old schema
    with old.engine.begin() as conn:
        fill_previous_release(conn, config)
    before = snapshot(old, old_columns)
    old.dispose()
    assert all(before.values()), "every table of the old schema holds rows"

    app = create_app(config, clock=ManualClock(T0 + 3600))  # the new master: opening the database migrates it
    db = ctx_of(app).db
    assert migrate.database_revisions(db.engine) == (migrate.head_revision(db.engine),)
    assert {c["name"] for c in inspect(db.engine).get_columns("allocations")} >= NEW_ALLOCATION_COLUMNS
    with db.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": False})
        assert compare_metadata(ctx, Base.metadata) == []  # the schema is today's, whole
    assert snapshot(db, old_columns) == before  # every row and value kept

    with TestClient(app) as client:  # and the new master serves them
        alice = bearer(SESSION_TOKEN)  # logged in before the upgrade, still logged in
        assert client.get("/api/v1/me", headers=alice).json()["user"]["username"] == "alice"
        assert login(client, "alice", "pw")
        assert client.get("/api/v1/master", headers=alice).json()["clusterId"] == "cluster-from-0003"
        exps = {e["id"]: e for e in client.get("/api/v1/experiments", headers=alice).json()["experiments"]}
        # experiment 2 is stored ACTIVE; its trial waits (no agent), so it reports QUEUED, as 0.38.1 does
        assert {i: e["state"] for i, e in exps.items()} == {1: "STATE_COMPLETED", 2: "STATE_QUEUED"}
        assert exps[1]["labels"] == ["prod", "mnist"]  # 0005 took them from the config into their column
        by_label = client.get("/api/v1/experiments", params={"labels": "mnist"}, headers=alice).json()
        assert [e["id"] for e in by_label["experiments"]] == [1, 2]
        metrics = client.get("/api/v1/trials/1/metrics", headers=alice).json()["metrics"]
        assert [(m["group"], m["stepsCompleted"], m["metrics"]) for m in metrics] == [
            ("training", 5, {"loss": 0.9}),
            ("training", 10, {"loss": 0.4}),
            ("validation", 10, {"loss": 0.25, "accuracy": 0.91}),
        ]
        ckpt = client.get(f"/api/v1/checkpoints/{CKPT}", headers=alice).json()["checkpoint"]
        assert ckpt["state"] == "STATE_COMPLETED" and ckpt["resources"] == {"model.pt": "123"}
        instances = client.get("/api/v1/instances?all=true", headers=alice).json()["instances"]
        assert sorted(i["id"] for i in instances) == ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"]

        ctx_of(app).controller.tick()  # a scheduling pass fills the new columns of the queued allocation
        with db.engine.connect() as conn:
            kind, reason = conn.execute(text("SELECT wait_kind, wait_reason FROM allocations WHERE id = '2.1.1'")).one()
        assert kind and reason
        task = client.get("/api/v1/tasks", headers=alice).json()
        assert "2.1" in json.dumps(task)
