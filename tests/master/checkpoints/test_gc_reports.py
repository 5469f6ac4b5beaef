"""What a checkpoint GC task reports, marked as the master-side path marks rows: a user's delete and file
removal (DELETED, PARTIALLY_DELETED with the files left and their size, unchanged), a collection
(DELETED per the save_* policy), the totals and the trial's latest checkpoint following, a report twice
changing nothing; and a collection whose task failed retried with backoff. On both databases."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.lifecycle.checkpoint_gc_task_rows import RUN_LIMIT, WAIT_LIMIT
from pedl.master.workers import checkpoint_gc as checkpoint_gc_worker
from pedl.master.workers.checkpoint_gc import CheckpointGC
from tests.master.fakes import FakeAgent, StartedTask, create_experiment, post
from tests.master.gc_task_world import delete, report, shown, spec_of, start_trial, storage_of, stored


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    return start_trial(client, user, agent)


def sizes(client: TestClient, user: dict, task: StartedTask) -> tuple[int, int]:
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    exp = client.get(f"/api/v1/experiments/{trial['experimentId']}", headers=user).json()["experiment"]
    return int(exp["checkpointSize"]), int(trial["totalCheckpointSize"])


def test_a_users_requests_are_marked_from_the_report(
    client: TestClient, user: dict, agent: FakeAgent, task: StartedTask
) -> None:
    first, kept = stored(client, task, 2), stored(client, task, 4)
    before = shown(client, user, first)["resources"]
    total = sum(int(v) for v in before.values())
    assert sizes(client, user, task) == (2 * total, 2 * total)
    # nothing removed, nothing changed: unchanged
    assert (
        post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": [first], "checkpointGlobs": []}, user).status_code
        == 200
    )
    [gc] = agent.start_all()
    assert report(client, gc, {first: {k: int(v) for k, v in before.items()}}).status_code == 200
    agent.exit(gc.allocation_id, 0)
    assert shown(client, user, first)["state"] == "STATE_COMPLETED"
    # a file gone: PARTIALLY_DELETED with what is left, the sizes shrink
    left = {k: int(v) for k, v in before.items() if k != "state"}
    assert (
        post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": [first], "checkpointGlobs": []}, user).status_code
        == 200
    )
    [gc] = agent.start_all()
    assert report(client, gc, {first: left}).status_code == 200
    assert report(client, gc, {first: left}).status_code == 200  # again (a retried POST): no change
    c = shown(client, user, first)
    assert c["state"] == "STATE_PARTIALLY_DELETED" and {k: int(v) for k, v in c["resources"].items()} == left
    assert sizes(client, user, task) == (total + sum(left.values()),) * 2
    agent.exit(gc.allocation_id, 0)
    # the whole latest checkpoint deleted: DELETED, its listing kept, the trial resumes from the other
    assert delete(client, user, kept).status_code == 200
    [gc] = agent.start_all()
    assert report(client, gc, {kept: {}}).status_code == 200
    c = shown(client, user, kept)
    assert c["state"] == "STATE_DELETED" and c["resources"] != {}
    assert sizes(client, user, task) == (sum(left.values()),) * 2
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert not trial["latestCheckpointUuid"]  # none left with all its files


def test_a_row_already_deleted_is_left_alone(
    client: TestClient, user: dict, agent: FakeAgent, task: StartedTask
) -> None:
    name = stored(client, task, 2)
    assert delete(client, user, name).status_code == 200
    assert delete(client, user, name).status_code == 200  # a second task for the same checkpoint
    first, second = agent.start_all()
    assert report(client, first, {name: {}}).status_code == 200
    size = sizes(client, user, task)
    assert report(client, second, {name: {"model.pt": 100}}).status_code == 200  # late, stale: ignored
    assert shown(client, user, name)["state"] == "STATE_DELETED" and sizes(client, user, task) == size


CONFIG = """\
name: gc-task
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
checkpoint_storage: {save_trial_best: 0, save_trial_latest: 1, save_experiment_best: 0}
"""


def test_a_collection_runs_as_a_task_and_a_failed_one_is_retried(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    gc: CheckpointGC = app.state.checkpoint_gc
    exp = create_experiment(client, user, CONFIG)
    [trial] = agent.start_all()
    old, new = stored(client, trial, 2), stored(client, trial, 4)
    agent.exit(trial.allocation_id, 0)
    gc.run_pending()
    [task] = agent.start_all()
    assert [c["uuid"] for c in spec_of(client, task)["checkpoints"]] == [old]
    assert shown(client, user, old)["state"] == "STATE_PARTIALLY_DELETED"  # held while the task may delete
    agent.exit(task.allocation_id, 1, "killed")  # never reported: the row stays held, the collection is retried
    gc.run_pending()  # (or the master's own worker did it first: the end of the task asked for it)
    assert (shown(client, user, old)["state"], shown(client, user, old)["deleting"]) == (
        "STATE_PARTIALLY_DELETED",
        True,
    )
    assert gc.pending() == {exp["id"]: app.state.ctx.clock.now() + checkpoint_gc_worker.RETRY_FIRST}
    assert agent.start_all() == []  # not before the backoff
    events = client.get(f"/api/v1/experiments/{exp['id']}/events", headers=user).json()["events"]
    assert any(
        e["level"] == "warning" and task.task_id in e["message"] and "will retry" in e["message"] for e in events
    )
    app.state.ctx.clock.advance(checkpoint_gc_worker.RETRY_FIRST + 1)
    agent.conn.last_heartbeat = app.state.ctx.clock.now()  # the agent stayed (its heartbeat, as the clock moved)
    gc.run_pending()
    [again] = agent.start_all()
    assert [c["uuid"] for c in spec_of(client, again)["checkpoints"]] == [old]  # what the failed one left
    assert report(client, again, {old: {}}).status_code == 200
    assert shown(client, user, old)["state"] == "STATE_DELETED"  # marked when the report arrives
    assert shown(client, user, new)["state"] == "STATE_COMPLETED"
    agent.exit(again.allocation_id, 0)
    gc.run_pending()
    assert agent.start_all() == [] and gc.pending() == {}  # nothing left to collect


def test_a_task_no_agent_takes_is_ended_and_the_master_deletes_once_none_is_up(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's one agent leaves just as a collection decides to run on it: its GC task waits, ended after
    WAIT_LIMIT (no instance is booted for it: the provisioner's test), and the retry is the master's."""
    gc: CheckpointGC = app.state.checkpoint_gc
    clock = app.state.ctx.clock
    exp = create_experiment(client, user, CONFIG)
    [trial] = agent.start_all()
    old, new = stored(client, trial, 2), stored(client, trial, 4)
    app.state.ctx.hub.detach(agent.conn)
    with monkeypatch.context() as m:
        m.setattr(checkpoint_gc_tasks, "runs_on_agent", lambda *_: True)  # decided while the agent was up
        agent.exit(trial.allocation_id, 0)
        gc.run_pending()
        clock.advance(WAIT_LIMIT - 1)
        gc.run_pending()  # not yet overdue
        assert gc.pending() == {}
        clock.advance(2)
        gc.run_pending()  # overdue: ended; its collection, asked again at once, notes the failure
        assert gc.pending() == {exp["id"]: clock.now() + checkpoint_gc_worker.RETRY_FIRST}
    events = [
        e["message"] for e in client.get(f"/api/v1/experiments/{exp['id']}/events", headers=user).json()["events"]
    ]
    assert any("no agent took it within 120 s" in m for m in events), events
    assert shown(client, user, old)["state"] == "STATE_PARTIALLY_DELETED"
    clock.advance(checkpoint_gc_worker.RETRY_FIRST + 1)
    gc.run_pending()  # no agent up: the master deletes
    assert shown(client, user, old)["state"] == "STATE_DELETED"
    assert not storage_of(client).path_of(old).exists() and shown(client, user, new)["state"] == "STATE_COMPLETED"


def test_a_users_delete_no_agent_takes_ends_with_a_warning(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, task: StartedTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc: CheckpointGC = app.state.checkpoint_gc
    name = stored(client, task, 2)
    agent.exit(task.allocation_id, 0)
    gc.run_pending()  # (save_trial_latest keeps it)
    app.state.ctx.hub.detach(agent.conn)
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]
    with monkeypatch.context() as m:
        m.setattr(checkpoint_gc_tasks, "runs_on_agent", lambda *_: True)
        assert delete(client, user, name).status_code == 200
    app.state.ctx.clock.advance(WAIT_LIMIT)
    gc.run_pending()
    events = client.get(f"/api/v1/experiments/{exp_id}/events", headers=user).json()["events"]
    assert any(
        e["level"] == "warning" and "no agent took it within 120 s" in e["message"] and "ask again" in e["message"]
        for e in events
    ), events
    c = shown(client, user, name)
    assert (c["state"], c["deleting"]) == ("STATE_PARTIALLY_DELETED", False)
    assert delete(client, user, name).status_code == 200  # asked again: held again


def test_a_task_still_running_after_the_limit_is_killed_once(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    gc: CheckpointGC = app.state.checkpoint_gc
    clock = app.state.ctx.clock
    create_experiment(client, user, CONFIG)
    [trial] = agent.start_all()
    for steps in (2, 4):
        stored(client, trial, steps)
    agent.exit(trial.allocation_id, 0)
    gc.run_pending()
    [task] = agent.start_all()
    clock.advance(RUN_LIMIT - 1)
    agent.conn.last_heartbeat = clock.now()
    gc.run_pending()
    assert [m for m in agent.messages() if m["type"] == "kill_task"] == []
    for _ in range(2):  # killed once, however often the worker looks
        clock.advance(2)
        agent.conn.last_heartbeat = clock.now()
        gc.run_pending()
    kills = [m for m in agent.messages() if m["type"] == "kill_task"]
    assert [m["allocation_id"] for m in kills] == [task.allocation_id]
    assert "it was still running after 3600 s" in kills[0]["reason"]


def test_a_collection_whose_task_left_files_is_retried_with_backoff(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    """A collection deletes whole checkpoints: one the task reports with files left stays held and the
    collection counts as failed (retried with backoff, not at once)."""
    gc: CheckpointGC = app.state.checkpoint_gc
    exp = create_experiment(client, user, CONFIG)
    [trial] = agent.start_all()
    old, _new = stored(client, trial, 2), stored(client, trial, 4)
    agent.exit(trial.allocation_id, 0)
    gc.run_pending()
    [task] = agent.start_all()
    assert report(client, task, {old: {"model.pt": 100}}).status_code == 200
    agent.exit(task.allocation_id, 0)
    gc.run_pending()
    c = shown(client, user, old)
    assert (c["state"], c["deleting"]) == ("STATE_PARTIALLY_DELETED", True)
    assert gc.pending() == {exp["id"]: app.state.ctx.clock.now() + checkpoint_gc_worker.RETRY_FIRST}
    assert agent.start_all() == []
    app.state.ctx.clock.advance(checkpoint_gc_worker.RETRY_FIRST + 1)
    agent.conn.last_heartbeat = app.state.ctx.clock.now()
    gc.run_pending()
    [again] = agent.start_all()
    assert report(client, again, {old: {}}).status_code == 200
    assert shown(client, user, old)["state"] == "STATE_DELETED"


def test_a_restarted_master_deletes_again_what_a_collection_left(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    """The master stopped while a collection's task ran (or while it deleted on its own): a restarted
    worker's sweep finds the held checkpoints and deletes them; a user's request on the master that held
    checkpoints when it stopped is released (PARTIALLY_DELETED, served again, for the user to ask again)."""
    from pedl.master.lifecycle import checkpoint_gc_holds

    exp = create_experiment(client, user, CONFIG)
    [trial] = agent.start_all()
    old, by_master, asked, _new = (stored(client, trial, n) for n in (1, 2, 3, 4))
    ctx = app.state.ctx
    ctx.controller.set_checkpoint_gc(lambda _e: None)  # the master's worker is gone: nothing collects
    agent.exit(trial.allocation_id, 0)
    gc_task = checkpoint_gc_tasks.start(
        ctx, checkpoint_gc_tasks.Job(exp["id"], [checkpoint_gc_tasks.Item(old, str(storage_of(client).path_of(old)))])
    )
    [task] = agent.start_all()
    agent.exit(task.allocation_id, None, "agent lost")  # it ended without a report
    with ctx.db.session() as s:
        checkpoint_gc_holds.hold(s, ctx.clock.now(), [by_master], checkpoint_gc_holds.BY_MASTER_GC, "deleted")
        checkpoint_gc_holds.hold(s, ctx.clock.now(), [asked], checkpoint_gc_holds.BY_REQUEST, "deleted by x")
    assert task.task_id == gc_task
    fresh = CheckpointGC(ctx)  # a restarted master's worker
    fresh.sweep()
    assert exp["id"] in fresh.pending()
    c = shown(client, user, asked)
    assert (c["state"], c["deleting"]) == ("STATE_PARTIALLY_DELETED", False)
    fresh.run_pending()
    [again] = agent.start_all()
    assert sorted(c["uuid"] for c in spec_of(client, again)["checkpoints"]) == sorted([old, by_master])
    assert report(client, again, {old: {}, by_master: {}}).status_code == 200
    assert [shown(client, user, u)["state"] for u in (old, by_master)] == ["STATE_DELETED"] * 2
    assert storage_of(client).path_of(asked).is_dir()
