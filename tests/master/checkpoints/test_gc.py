"""Checkpoint garbage collection: the pure selection (every save_* rule, ties, metric-less and
running trials), then the worker against a real master app: it runs when a trial ends and when the
experiment ends, deletes files outside the cluster lock, marks rows STATE_DELETED with events, and
retries failed deletions. It acts only inside the master's storage roots and never follows a symlink."""

from __future__ import annotations

import random
import shutil
import threading
import uuid as uuid_lib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.common.checkpoint_storage import SharedFSStorage, storage_from_config
from pedl.config.master_config import MasterConfig
from pedl.errors import Unavailable
from pedl.master.checkpoints.retention import CheckpointFacts, RetentionPolicy, metric_value, select_deletions
from pedl.master.db import models
from pedl.master.wiring import attach_checkpoint_gc
from pedl.master.workers.checkpoint_gc import CheckpointGC
from tests.master.factories import legacy_checkpoint
from tests.master.fakes import FakeAgent, StartedTask, bearer, create_experiment, ctx_of, post
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401


@pytest.fixture
def master_config(master_config: MasterConfig, moto_server: str) -> MasterConfig:
    """The shared config, with the bucket of the s3 test (on moto) allowed as a storage root."""
    security = master_config.security.model_copy(
        update={"checkpoint_storage_roots": ["s3://gc-bucket"], "s3_endpoint_urls": [moto_server]}
    )
    # the fake agent runs no checkpoint GC task: these tests drive the master-side path
    return master_config.model_copy(update={"security": security, "checkpoint_gc_tasks": False})


# -- the decision ---------------------------------------------------------------------------------


def ck(name: str, trial: int, steps: int, metric: float | None = None, t: float | None = None) -> CheckpointFacts:
    return CheckpointFacts(name, trial, steps, float(steps) if t is None else t, metric)


def policy(experiment_best: int = 0, trial_best: int = 1, trial_latest: int = 1) -> RetentionPolicy:
    return RetentionPolicy(experiment_best, trial_best, trial_latest)


def deleted(
    checkpoints: list[CheckpointFacts], p: RetentionPolicy, *, smaller: bool = True, closed: set[int] | None = None
) -> list[str]:
    closed = {c.trial_id for c in checkpoints} if closed is None else closed
    return select_deletions(checkpoints, p, smaller_is_better=smaller, closed_trials=closed)


ONE_TRIAL = [ck("a5", 1, 5, 0.5), ck("a10", 1, 10, 0.1), ck("a15", 1, 15, 0.3), ck("a20", 1, 20, 0.4)]


def test_defaults_keep_the_best_and_the_latest_of_a_trial() -> None:
    assert deleted(ONE_TRIAL, policy()) == ["a5", "a15"]


def test_larger_is_better_flips_the_best() -> None:
    assert deleted(ONE_TRIAL, policy(), smaller=False) == ["a10", "a15"]  # best 0.5 (a5), latest a20


@pytest.mark.parametrize(
    ("p", "kept"),
    [
        (policy(trial_best=0, trial_latest=1), {"a20"}),
        (policy(trial_best=0, trial_latest=2), {"a15", "a20"}),
        (policy(trial_best=2, trial_latest=0), {"a10", "a15"}),
        (policy(trial_best=2, trial_latest=1), {"a10", "a15", "a20"}),
        (policy(trial_best=0, trial_latest=0), set()),
        (policy(trial_best=10, trial_latest=10), {"a5", "a10", "a15", "a20"}),
        (policy(experiment_best=1, trial_best=0, trial_latest=0), {"a10"}),
    ],
)
def test_each_number_keeps_that_many(p: RetentionPolicy, kept: set[str]) -> None:
    assert set(deleted(ONE_TRIAL, p)) == {c.uuid for c in ONE_TRIAL} - kept


def test_a_checkpoint_kept_by_several_rules_is_kept_once() -> None:
    run = [ck("x5", 1, 5, 0.9), ck("x10", 1, 10, 0.1)]  # the latest is also the best
    assert deleted(run, policy(experiment_best=1)) == ["x5"]


def test_experiment_best_looks_across_trials() -> None:
    checkpoints = [
        ck("a1", 1, 1, 0.9),
        ck("a2", 1, 2, 0.3),
        ck("b1", 2, 1, 0.2),
        ck("b2", 2, 2, 0.8),
        ck("c1", 3, 1, 0.25),
        ck("c2", 3, 2, 0.7),
    ]
    p = policy(experiment_best=2, trial_best=0, trial_latest=0)
    assert set(deleted(checkpoints, p)) == {"a1", "a2", "b2", "c2"}  # b1 (0.2) and c1 (0.25) stay
    assert set(deleted(checkpoints, p, smaller=False)) == {"a2", "b1", "c1", "c2"}  # a1 (0.9), b2 (0.8)


def test_checkpoints_without_a_metric_are_only_kept_as_latest() -> None:
    checkpoints = [ck("n5", 1, 5), ck("m10", 1, 10, 0.4), ck("n15", 1, 15), ck("n20", 1, 20)]
    assert deleted(checkpoints, policy()) == ["n5", "n15"]  # m10 is the only scored one; n20 the latest
    assert deleted(checkpoints, policy(experiment_best=3, trial_best=3, trial_latest=0)) == ["n5", "n15", "n20"]


def test_a_trial_without_any_metric_keeps_its_latest() -> None:
    checkpoints = [ck("n1", 1, 1), ck("n2", 1, 2), ck("n3", 1, 3)]
    assert deleted(checkpoints, policy(experiment_best=5, trial_best=5, trial_latest=1)) == ["n1", "n2"]


def test_running_trials_are_never_touched_but_compete_for_experiment_best() -> None:
    checkpoints = [ck("done", 1, 10, 0.2), ck("live", 2, 10, 0.1), ck("live-old", 2, 5, 0.9)]
    p = policy(experiment_best=1, trial_best=0, trial_latest=0)
    assert deleted(checkpoints, p, closed={1}) == ["done"]  # the running trial holds the best
    assert deleted(checkpoints, p, closed=set()) == []
    assert deleted(checkpoints, p, closed={1, 2}) == ["done", "live-old"]


def test_ties_favour_the_later_checkpoint() -> None:
    same = [ck("early", 1, 5, 0.1), ck("late", 1, 10, 0.1)]
    assert deleted(same, policy(trial_best=1, trial_latest=0)) == ["early"]
    same_steps = [ck("first", 1, 5, t=1.0), ck("again", 1, 5, t=2.0)]  # a restart re-reported step 5
    assert deleted(same_steps, policy(trial_best=0, trial_latest=1)) == ["first"]


def test_latest_is_by_steps_not_by_report_time() -> None:
    # a restarted trial may report an older step after a newer one; steps decide what is latest
    checkpoints = [ck("s20", 1, 20, t=1.0), ck("s10", 1, 10, t=5.0)]
    assert deleted(checkpoints, policy(trial_best=0, trial_latest=1)) == ["s10"]


def test_output_is_in_trial_and_step_order() -> None:
    checkpoints = [
        ck("b9", 2, 9),
        ck("a3", 1, 3),
        ck("b1", 2, 1),
        ck("a1", 1, 1),
        ck("keep", 1, 99),
        ck("keepb", 2, 99),
    ]
    assert deleted(checkpoints, policy(trial_best=0)) == ["a1", "a3", "b1", "b9"]


def test_nothing_to_do() -> None:
    assert deleted([], policy()) == []
    assert deleted([ck("only", 1, 1, 0.5)], policy(0, 0, 1)) == []


def test_collecting_after_each_trial_agrees_with_collecting_at_the_end() -> None:
    """Deleting at trial ends (with other trials still running) never removes a checkpoint the
    end-of-experiment collection would keep, and together they reach the same final set."""
    rng = random.Random(7)
    for _ in range(300):
        trials = rng.randint(1, 4)
        checkpoints = [
            ck(f"t{t}-{s}", t, s * 5, rng.choice([None, round(rng.random(), 2)]))
            for t in range(1, trials + 1)
            for s in range(1, rng.randint(1, 6) + 1)
        ]
        p = policy(rng.randint(0, 3), rng.randint(0, 2), rng.randint(0, 2))
        smaller = rng.random() < 0.5
        at_end = set(deleted(checkpoints, p, smaller=smaller))
        gone: set[str] = set()
        order = list(range(1, trials + 1))
        rng.shuffle(order)
        for i in range(len(order)):  # trials end one by one; each end collects what it can
            alive = [c for c in checkpoints if c.uuid not in gone]
            gone |= set(deleted(alive, p, smaller=smaller, closed=set(order[: i + 1])))
            assert gone <= at_end
        assert gone == at_end


def test_metric_value_accepts_only_finite_numbers() -> None:
    assert metric_value({"loss": 0.5}, "loss") == 0.5
    assert metric_value({"loss": 3}, "loss") == 3.0
    for bad in ("NaN", "Infinity", float("nan"), float("inf"), True, None, "0.5", [1]):
        assert metric_value({"loss": bad}, "loss") is None
    assert metric_value({"acc": 1.0}, "loss") is None
    assert metric_value(None, "loss") is None
    assert metric_value({"loss": 1.0}, None) is None


def test_retention_policy_of_a_storage_section() -> None:
    assert RetentionPolicy.of({}) == RetentionPolicy(0, 1, 1)
    assert RetentionPolicy.of(
        {"save_trial_best": None, "save_experiment_best": 2, "host_path": "/x"}
    ) == RetentionPolicy(2, 1, 1)
    assert "save_trial_latest=1" in RetentionPolicy().describe()


# -- the worker against a master --------------------------------------------------------------

GRID = """\
name: gc-exp
entrypoint: python train.py
searcher: {name: grid, metric: loss, max_length: 10}
hyperparameters:
  lr: {type: categorical, vals: [0.1, 0.2]}
checkpoint_storage: {save_trial_best: 1, save_trial_latest: 1, save_experiment_best: 0}
"""


@pytest.fixture
def agent2(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    fake = FakeAgent(app, "agent-2", slots=2)
    yield fake
    fake.close()


@pytest.fixture
def gc(app: FastAPI) -> CheckpointGC:
    return app.state.checkpoint_gc


def storage_of(app: FastAPI) -> SharedFSStorage:
    storage = storage_from_config(ctx_of(app).config.effective_checkpoint_storage().model_dump())
    assert isinstance(storage, SharedFSStorage)
    return storage


def report(client: TestClient, app: FastAPI, task: StartedTask, steps: int, loss: float | None) -> str:
    """Write a checkpoint's files, report its validation (if any) and the checkpoint itself."""
    name = str(uuid_lib.uuid4())
    with storage_of(app).store_path(name) as path:
        (path / "state.json").write_text(f'{{"step": {steps}}}')
    headers = bearer(task.token)
    if loss is not None:
        body = {
            "group": "validation",
            "metrics": {
                "trialId": task.trial_id,
                "trialRunId": 1,
                "stepsCompleted": steps,
                "metrics": {"avgMetrics": {"loss": loss}},
            },
        }
        assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, headers).status_code == 200
    ckpt = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "metadata": {"steps_completed": steps},
        "resources": {"state.json": "13"},
        "state": "STATE_COMPLETED",
        "training": {},
    }
    assert post(client, "/api/v1/checkpoints", ckpt, headers).status_code == 200
    return name


def states(app: FastAPI, experiment_id: int) -> dict[str, str]:
    with ctx_of(app).db.session() as s:
        return {
            c.uuid: c.state
            for c in s.scalars(select(models.Checkpoint).where(models.Checkpoint.experiment_id == experiment_id))
        }


def events(app: FastAPI, entity_type: str) -> list[models.Event]:
    with ctx_of(app).db.session() as s:
        rows = list(
            s.scalars(select(models.Event).where(models.Event.entity_type == entity_type).order_by(models.Event.id))
        )
        s.expunge_all()
        return rows


@pytest.fixture
def running(client: TestClient, user: dict, agent2: FakeAgent) -> tuple[int, list[StartedTask]]:
    exp = create_experiment(client, user, GRID)
    tasks = agent2.start_all()
    assert len(tasks) == 2
    return exp["id"], sorted(tasks, key=lambda t: t.trial_id)


def test_trial_end_collects_that_trial_and_experiment_end_the_rest(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
) -> None:
    exp_id, (t1, t2) = running
    a = [report(client, app, t1, steps, loss) for steps, loss in ((2, 0.5), (4, 0.1), (6, 0.3), (8, None))]
    b = [report(client, app, t2, steps, loss) for steps, loss in ((2, 0.9), (4, 0.8))]
    storage = storage_of(app)

    agent2.exit(t1.allocation_id, 0)  # trial 1 completes; trial 2 still runs
    gc.run_pending()
    st = states(app, exp_id)
    assert [st[u] for u in a] == ["STATE_DELETED", "STATE_COMPLETED", "STATE_DELETED", "STATE_COMPLETED"]
    assert [st[u] for u in b] == ["STATE_COMPLETED", "STATE_COMPLETED"]  # running: untouched
    assert [storage.exists(u) for u in a] == [False, True, False, True]
    assert all(storage.exists(u) for u in b)

    agent2.exit(t2.allocation_id, 0)  # the experiment completes
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
    assert exp["state"] == "STATE_COMPLETED"
    gc.run_pending()
    st = states(app, exp_id)
    assert [st[u] for u in b] == ["STATE_DELETED", "STATE_COMPLETED"]  # b4 is both best and latest
    assert not storage.exists(b[0]) and storage.exists(b[1])

    ck_events = [e for e in events(app, "checkpoint") if e.to_state == "STATE_DELETED"]
    assert sorted(e.entity_id for e in ck_events) == sorted([a[0], a[2], b[0]])
    # each left COMPLETED (held) before its files were deleted
    assert all(e.from_state == "STATE_PARTIALLY_DELETED" and "save_trial_best=1" in e.message for e in ck_events)
    held = [e for e in events(app, "checkpoint") if e.to_state == "STATE_PARTIALLY_DELETED"]
    assert sorted(e.entity_id for e in held) == sorted([a[0], a[2], b[0]])
    assert all(
        e.from_state == "STATE_COMPLETED" and "being deleted by the master's checkpoint garbage collection" in e.message
        for e in held
    )
    summaries = [e.message for e in events(app, "trial") if "garbage collection" in e.message]
    assert len(summaries) == 2 and "deleted 2 checkpoint(s)" in summaries[0] and a[0] in summaries[0]


def test_deleted_checkpoints_show_as_deleted_over_the_api(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
) -> None:
    exp_id, (t1, t2) = running
    old, new = report(client, app, t1, 2, 0.5), report(client, app, t1, 4, 0.1)
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    listed = client.get(f"/api/v1/experiments/{exp_id}/checkpoints", headers=user).json()["checkpoints"]
    assert {c["uuid"]: c["state"] for c in listed} == {old: "STATE_DELETED", new: "STATE_COMPLETED"}
    work = client.get(f"/api/v1/trials/{t1.trial_id}/workloads", headers=user).json()["workloads"]
    assert {w["checkpoint"]["uuid"]: w["checkpoint"]["state"] for w in work if "checkpoint" in w} == {
        old: "STATE_DELETED",
        new: "STATE_COMPLETED",
    }


def test_a_deleted_checkpoint_keeps_its_file_list_but_counts_in_no_size_and_is_not_served(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
) -> None:
    """As Determined's: a DELETED checkpoint still lists the files it had (its state says they are
    gone); the trial's and experiment's checkpoint count and size leave it out."""
    exp_id, (t1, _t2) = running
    old, new = report(client, app, t1, 2, 0.5), report(client, app, t1, 4, 0.1)
    trial = client.get(f"/api/v1/trials/{t1.trial_id}", headers=user).json()["trial"]
    assert (trial["checkpointCount"], trial["totalCheckpointSize"]) == (2, "26")
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    by_experiment = client.get(f"/api/v1/experiments/{exp_id}/checkpoints", headers=user).json()["checkpoints"]
    listed = client.get("/api/v1/checkpoints", params={"experimentId": exp_id}, headers=user).json()["checkpoints"]
    work = client.get(f"/api/v1/trials/{t1.trial_id}/workloads", headers=user).json()["workloads"]
    for shown in (by_experiment, listed, [w["checkpoint"] for w in work if "checkpoint" in w]):
        assert {c["uuid"]: (c["state"], c["resources"]) for c in shown} == {
            old: ("STATE_DELETED", {"state.json": "13"}),
            new: ("STATE_COMPLETED", {"state.json": "13"}),
        }
    described = client.get(f"/api/v1/checkpoints/{old}", headers=user).json()["checkpoint"]
    assert (described["state"], described["resources"]) == ("STATE_DELETED", {"state.json": "13"})
    assert client.get(f"/api/v1/checkpoints/{old}/download", headers=user).status_code == 404
    trial = client.get(f"/api/v1/trials/{t1.trial_id}", headers=user).json()["trial"]
    assert (trial["checkpointCount"], trial["totalCheckpointSize"]) == (1, "13")
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
    assert (exp["checkpointCount"], exp["checkpointSize"]) == (1, "13")


def test_the_background_worker_runs_without_being_driven(
    client: TestClient, app: FastAPI, agent2: FakeAgent, running: tuple[int, list[StartedTask]]
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    agent2.exit(t1.allocation_id, 0)
    from pedl.devcluster import wait_for

    wait_for(lambda: states(app, exp_id)[old] == "STATE_DELETED", 10, interval=0.05, what="the worker")


def test_killing_the_experiment_collects_paused_trials(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
) -> None:
    exp_id, (t1, t2) = running
    a = [report(client, app, t1, steps, 0.5) for steps in (2, 4, 6)]
    assert post(client, f"/api/v1/experiments/{exp_id}/pause", None, user).status_code == 200
    agent2.exit(t1.allocation_id, 0)  # they checkpointed and left
    agent2.exit(t2.allocation_id, 0)
    gc.run_pending()
    assert set(states(app, exp_id).values()) == {"STATE_COMPLETED"}  # paused trials are not over
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, user).status_code == 200
    gc.run_pending()
    st = states(app, exp_id)
    # same metric everywhere: the latest is both the best and the latest
    assert [st[u] for u in a] == ["STATE_DELETED", "STATE_DELETED", "STATE_COMPLETED"]


def test_failed_deletions_stay_held_and_are_retried(
    client: TestClient,
    app: FastAPI,
    user: dict,
    clock: ManualClock,
    agent2: FakeAgent,
    running: tuple[int, list[StartedTask]],
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    broken = {"on": True}

    class Flaky(SharedFSStorage):
        def delete(self, uuid: str) -> None:
            if broken["on"]:
                raise Unavailable(f"cannot delete s3://bucket/{uuid}/: S3 is unavailable (SlowDown)")
            super().delete(uuid)

    storage = storage_of(app)
    gc = attach_checkpoint_gc(ctx_of(app), storage_for=lambda _cfg: Flaky(storage.host_path))  # not the app's
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    assert states(app, exp_id)[old] == "STATE_PARTIALLY_DELETED"  # left COMPLETED before the deletion was tried
    assert storage.exists(old)
    assert client.get(f"/api/v1/checkpoints/{old}/download", headers=user).status_code == 409
    [warning] = [e for e in events(app, "experiment") if e.level == "warning"]
    assert "could not delete 1 checkpoint(s)" in warning.message and "S3 is unavailable" in warning.message
    due = gc.pending()[exp_id]
    assert due == pytest.approx(clock.now() + 30)
    assert gc.run_pending() == due  # not yet
    assert states(app, exp_id)[old] == "STATE_PARTIALLY_DELETED"

    clock.advance(31)
    gc.run_pending()  # still failing: the delay doubles
    assert gc.pending()[exp_id] == pytest.approx(clock.now() + 60)

    broken["on"] = False
    clock.advance(61)
    gc.run_pending()
    assert states(app, exp_id)[old] == "STATE_DELETED"
    assert not storage.exists(old)
    assert exp_id not in gc.pending()


def test_storage_is_deleted_outside_the_cluster_lock_after_the_checkpoint_left_completed(
    client: TestClient, app: FastAPI, user: dict, agent2: FakeAgent, running: tuple[int, list[StartedTask]]
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    ctl = ctx_of(app).controller
    seen: list[bool] = []
    held: list[tuple[str, str]] = []

    class Watching(SharedFSStorage):
        def delete(self, uuid: str) -> None:
            # another thread (an API request, the scheduler) gets the lock while storage is busy
            got = []
            probe = threading.Thread(target=lambda: got.append(ctl.lock.acquire(timeout=2)) or ctl.lock.release())
            probe.start()
            probe.join()
            seen.append(bool(got and got[0]))
            held.append(
                (
                    states(app, exp_id)[uuid],
                    client.get(f"/api/v1/checkpoints/{uuid}/download", headers=user).json().get("message", ""),
                )
            )
            super().delete(uuid)

    storage = storage_of(app)
    gc = attach_checkpoint_gc(ctx_of(app), storage_for=lambda _cfg: Watching(storage.host_path))  # not the app's
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    assert seen == [True]
    # while its files went, it was no longer COMPLETED, and download said why it refused
    why = (
        f"checkpoint {old} is being deleted by the master's checkpoint garbage collection "
        "(STATE_PARTIALLY_DELETED): its files are not served"
    )
    assert held == [("STATE_PARTIALLY_DELETED", why)]
    assert states(app, exp_id)[old] == "STATE_DELETED"


def test_the_startup_sweep_finds_collections_that_were_not_done(
    client: TestClient, app: FastAPI, agent2: FakeAgent, running: tuple[int, list[StartedTask]]
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    ctl = ctx_of(app).controller
    ctl.set_checkpoint_gc(lambda _e: None)  # as if the master died before collecting
    agent2.exit(t1.allocation_id, 0)
    fresh = CheckpointGC(ctx_of(app))  # a restarted master's worker
    assert fresh.pending() == {}
    fresh.sweep()
    assert exp_id in fresh.pending()
    fresh.run_pending()
    assert states(app, exp_id)[old] == "STATE_DELETED"


def test_a_missing_experiment_is_nothing_to_do(app: FastAPI, client: TestClient, gc: CheckpointGC) -> None:
    assert gc.collect(12345).deleted == []


def test_checkpoints_of_an_s3_experiment_are_deleted_from_the_bucket(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    gc: CheckpointGC,
    moto_endpoint: str,
    tmp_path: Path,
) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="gc-bucket")
    config = GRID.replace(
        "checkpoint_storage: {",
        f"checkpoint_storage: {{type: s3, bucket: gc-bucket, prefix: exp, endpoint_url: '{moto_endpoint}', ",
    )
    exp = create_experiment(client, user, config)
    t1, _t2 = sorted(agent2.start_all(), key=lambda t: t.trial_id)
    storage = storage_from_config(exp["config"]["checkpoint_storage"])
    names = {steps: str(uuid_lib.uuid4()) for steps in (2, 4, 6)}
    for steps, loss in ((2, 0.5), (4, 0.1), (6, 0.3)):
        with storage.store_path(names[steps]) as path:
            (path / "w.bin").write_bytes(b"w" * steps)
        body = {
            "group": "validation",
            "metrics": {
                "trialId": t1.trial_id,
                "trialRunId": 1,
                "stepsCompleted": steps,
                "metrics": {"avgMetrics": {"loss": loss}},
            },
        }
        post(client, f"/api/v1/trials/{t1.trial_id}/metrics", body, bearer(t1.token))
        r = post(
            client,
            "/api/v1/checkpoints",
            {
                "uuid": names[steps],
                "allocationId": t1.allocation_id,
                "metadata": {"steps_completed": steps},
                "resources": storage.resources(names[steps]),
            },
            bearer(t1.token),
        )
        assert r.status_code == 200, r.text
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    assert states(app, exp["id"]) == {
        names[2]: "STATE_DELETED",
        names[4]: "STATE_COMPLETED",
        names[6]: "STATE_COMPLETED",
    }
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="gc-bucket").get("Contents", []))
    assert keys == sorted([f"exp/{names[4]}/w.bin", f"exp/{names[6]}/w.bin"])


# -- only inside the storage roots, never following a symlink ------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory of the master's host outside every storage root, holding `data/`."""
    victim = tmp_path / "some" / "dir"
    (victim / "data").mkdir(parents=True)
    (victim / "data" / "precious.txt").write_text("do not delete")
    return victim


@pytest.fixture
def own_gc(app: FastAPI, client: TestClient) -> CheckpointGC:
    """A worker driven by the test alone (the app's own would race it for the collection)."""
    return attach_checkpoint_gc(ctx_of(app))


def kill_and_end(client: TestClient, user: dict, agent: FakeAgent, exp_id: int, tasks: list[StartedTask]) -> None:
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, user).status_code == 200
    for t in tasks:
        agent.exit(t.allocation_id, None, "killed")


def test_a_user_cannot_make_gc_delete_a_directory(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    own_gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
    victim: Path,
) -> None:
    """Two checkpoints attached to a trial of one's own experiment, one named `data` in `/some/dir`, the
    other newer, are refused, so killing the experiment cannot make GC remove /some/dir/data."""
    exp_id, (t1, t2) = running
    storage = {"type": "shared_fs", "host_path": str(victim)}
    for name, steps in (("data", 0), (str(uuid_lib.uuid4()), 10)):
        body = {
            "uuid": name,
            "metadata": {"steps_completed": steps},
            "storage": storage,
            "training": {"trialId": t1.trial_id},
        }
        assert post(client, "/api/v1/checkpoints", body, user).status_code in (400, 403)
        assert post(client, "/api/v1/checkpoints", body, bearer(t1.token)).status_code == 400
    kill_and_end(client, user, agent2, exp_id, [t1, t2])
    own_gc.run_pending()
    assert (victim / "data" / "precious.txt").read_text() == "do not delete"


def test_legacy_rows_outside_the_roots_are_left_alone(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    own_gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
    victim: Path,
) -> None:
    """Rows stored before storage roots were checked, outside the roots: GC neither deletes their files
    nor marks them."""
    exp_id, (t1, t2) = running
    legacy_checkpoint(app, t1, "data", {"type": "shared_fs", "host_path": str(victim)}, steps=0)
    legacy_checkpoint(app, t1, str(uuid_lib.uuid4()), {"type": "shared_fs", "host_path": str(victim)}, steps=10)
    kill_and_end(client, user, agent2, exp_id, [t1, t2])
    outcome = own_gc.collect(exp_id)
    assert outcome.deleted == [] and list(outcome.refused) == ["data"]
    assert "outside the master's checkpoint storage roots" in outcome.refused["data"]
    assert (victim / "data" / "precious.txt").read_text() == "do not delete"
    assert states(app, exp_id)["data"] == "STATE_COMPLETED"
    [warning] = [e for e in events(app, "experiment") if e.level == "warning"]
    assert "left 1 checkpoint(s) alone" in warning.message
    assert own_gc.pending() == {exp_id: pytest.approx(own_gc.ctx.clock.now())}  # asked for by the kill
    own_gc.run_pending()
    assert own_gc.pending() == {}  # not retried: nothing will change until an operator acts


def test_an_experiment_stored_outside_the_roots_is_left_alone(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent2: FakeAgent,
    own_gc: CheckpointGC,
    running: tuple[int, list[StartedTask]],
    victim: Path,
) -> None:
    exp_id, (t1, t2) = running
    with ctx_of(app).db.session() as s:  # an experiment created before the roots were checked
        exp = s.get(models.Experiment, exp_id)
        exp.config = {
            **exp.config,
            "checkpoint_storage": {**exp.config["checkpoint_storage"], "host_path": str(victim)},
        }
    legacy_checkpoint(app, t1, "data", {}, steps=0)
    legacy_checkpoint(app, t1, str(uuid_lib.uuid4()), {}, steps=10)
    kill_and_end(client, user, agent2, exp_id, [t1, t2])
    outcome = own_gc.collect(exp_id)
    assert outcome.deleted == [] and "checkpoint_storage.host_path" in outcome.refused["data"]
    assert (victim / "data" / "precious.txt").read_text() == "do not delete"


def test_a_symlink_inside_a_checkpoint_is_removed_not_its_target(
    client: TestClient,
    app: FastAPI,
    gc: CheckpointGC,
    agent2: FakeAgent,
    running: tuple[int, list[StartedTask]],
    victim: Path,
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    path = storage_of(app).path_of(old)
    (path / "to-a-file").symlink_to(victim / "data" / "precious.txt")
    (path / "to-a-dir").symlink_to(victim / "data", target_is_directory=True)
    (path / "dangling").symlink_to(victim / "nowhere")
    agent2.exit(t1.allocation_id, 0)
    gc.run_pending()
    assert states(app, exp_id)[old] == "STATE_DELETED"
    assert not path.exists() and not path.is_symlink()
    assert (victim / "data" / "precious.txt").read_text() == "do not delete"


def test_a_checkpoint_directory_that_is_a_symlink_is_left_alone(
    client: TestClient,
    app: FastAPI,
    own_gc: CheckpointGC,
    agent2: FakeAgent,
    running: tuple[int, list[StartedTask]],
    victim: Path,
) -> None:
    exp_id, (t1, _t2) = running
    old = report(client, app, t1, 2, 0.5)
    report(client, app, t1, 4, 0.1)
    path = storage_of(app).path_of(old)
    shutil.rmtree(path)
    path.symlink_to(victim / "data", target_is_directory=True)
    agent2.exit(t1.allocation_id, 0)
    outcome = own_gc.collect(exp_id)
    assert outcome.deleted == [] and "symbolic link" in outcome.refused[old]
    assert states(app, exp_id)[old] == "STATE_COMPLETED"
    assert (victim / "data" / "precious.txt").read_text() == "do not delete"
