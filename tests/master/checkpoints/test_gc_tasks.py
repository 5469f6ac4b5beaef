"""Checkpoint GC as a task on an agent: where a deletion runs (the pure rule), the task a user's delete,
file removal or a collection starts (0 slots, the experiment's pool and owner, its spec holding only
resolved directories and exact entries, run as a process), its listing, what its failure means, and its
checkpoints leaving COMPLETED for every reader before it may delete anything."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.checkpoints.gc_tasks import on_agent
from tests.master.fakes import FakeAgent, StartedTask, create_experiment, post
from tests.master.gc_task_world import delete, report, shown, spec_of, start_trial, storage_of, stored


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    return start_trial(client, user, agent)


@pytest.mark.parametrize(
    ("storage", "agent_up", "want"),
    [
        ({"type": "shared_fs", "host_path": "/c"}, True, True),
        ({"type": "directory", "container_path": "/c"}, True, True),
        ({"host_path": "/c"}, True, True),  # shared_fs is the default type
        ({"type": "shared_fs", "host_path": "/c"}, False, False),  # pedl boots no instance to delete files
        ({"type": "s3", "bucket": "b"}, True, False),  # the master deletes from a bucket itself
        ({"type": "s3", "bucket": "b"}, False, False),
    ],
)
def test_a_deletion_runs_on_an_agent_only_on_a_filesystem_with_an_agent_up(
    storage: dict, agent_up: bool, want: bool
) -> None:
    assert on_agent(storage, agent_up) is want


def test_a_users_delete_answers_at_once_and_queues_a_gc_task(
    client: TestClient, user: dict, agent: FakeAgent, task: StartedTask
) -> None:
    first, second = stored(client, task, 2), stored(client, task, 4)
    r = delete(client, user, first)
    assert r.status_code == 200, r.text
    assert shown(client, user, first)["state"] == "STATE_PARTIALLY_DELETED"  # held before the task may run
    [gc] = agent.start_all()
    spec = spec_of(client, gc)
    storage = client.app.state.ctx.config.effective_checkpoint_storage()
    assert spec == {
        "checkpoints": [{"uuid": first, "dir": f"{storage.host_path}/{first}", "delete": True, "entries": []}]
    }
    m = gc.message
    assert m["entrypoint"] == ["python3", ".pedl/checkpoint_gc.py", ".pedl/checkpoint_gc.json"]
    assert m["container"] is None and m["env"]["DET_TASK_TYPE"] == "CHECKPOINT_GC"
    exp_id = shown(client, user, first)["training"]["experimentId"]
    described = client.get(f"/api/v1/tasks/{gc.task_id}", headers=user).json()["task"]
    assert described["taskType"] == "TASK_TYPE_CHECKPOINT_GC"
    names = [t["name"] for t in client.get("/tasks", headers=user).json().values()]
    assert f"Checkpoint GC (Experiment {exp_id})" in names
    summary = client.get("/api/v1/tasks", headers=user).json()["allocationIdToSummary"][gc.allocation_id]
    assert summary["slotsNeeded"] == 0 and summary["resourcePool"] == "default"
    assert client.get("/api/v1/commands", headers=user).json()["commands"] == []  # not a command
    assert shown(client, user, second)["state"] == "STATE_COMPLETED"
    agent.exit(gc.allocation_id, 0)
    names = [t["name"] for t in client.get("/tasks", headers=user).json().values()]
    assert f"Checkpoint GC (Experiment {exp_id})" not in names  # gone from the live list the suite polls


def test_a_file_removal_gives_the_task_the_exact_entries_the_globs_match(
    client: TestClient, user: dict, agent: FakeAgent, task: StartedTask
) -> None:
    name = stored(client, task, 2)
    r = post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": [name], "checkpointGlobs": ["logs/**"]}, user)
    assert r.status_code == 200, r.text
    [gc] = agent.start_all()
    [item] = spec_of(client, gc)["checkpoints"]
    assert (item["delete"], sorted(item["entries"])) == (False, ["logs/", "logs/events.txt"])
    r = post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": [name], "checkpointGlobs": ["**/*"]}, user)
    [gc2] = agent.start_all()
    assert spec_of(client, gc2)["checkpoints"][0]["delete"] is True


def test_refusals_stay_in_the_request_and_start_no_task(
    client: TestClient, user: dict, admin: dict, agent: FakeAgent, task: StartedTask
) -> None:
    name = stored(client, task, 2)
    r = post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": [name], "checkpointGlobs": ["../x"]}, user)
    assert r.status_code == 400 and "checkpointGlobs" in r.text
    r = post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": ["nope"], "checkpointGlobs": []}, user)
    assert r.status_code == 400 and "checkpointUuids[0]" in r.text
    assert post(client, "/api/v1/models", {"name": "m"}, user).status_code == 200
    assert post(client, "/api/v1/models/m/versions", {"checkpointUuid": name}, user).status_code == 200
    r = delete(client, user, name)
    assert r.status_code == 400 and "model version" in r.text
    assert agent.start_all() == []


def test_a_failed_task_of_a_users_request_releases_the_rows_and_warns(
    client: TestClient, user: dict, agent: FakeAgent, task: StartedTask
) -> None:
    """Which of its files the task deleted is unknown: the checkpoint stays PARTIALLY_DELETED, no longer held
    (what is left is served again, as a partial deletion's is), and the experiment says to ask again."""
    name = stored(client, task, 2)
    assert delete(client, user, name).status_code == 200
    [gc] = agent.start_all()
    agent.exit(gc.allocation_id, 1, "boom")
    c = shown(client, user, name)
    assert (c["state"], c["deleting"]) == ("STATE_PARTIALLY_DELETED", False)
    assert client.get(f"/api/v1/checkpoints/{name}/download", headers=user).status_code == 200
    exp_id = shown(client, user, name)["training"]["experimentId"]
    events = client.get(f"/api/v1/experiments/{exp_id}/events", headers=user).json()["events"]
    warnings = [e["message"] for e in events if e["level"] == "warning"]
    assert any(gc.task_id in w and "did not report" in w for w in warnings), warnings


def test_the_context_ships_the_script_and_its_stdlib_modules(app: FastAPI) -> None:
    tgz = checkpoint_gc_tasks._context({"checkpoints": []})
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
        spec = json.load(tar.extractfile(".pedl/checkpoint_gc.json"))
    assert names == [
        ".pedl/checkpoint_gc.json",
        ".pedl/checkpoint_gc.py",
        ".pedl/pedl_checkpoint_files.py",
        ".pedl/pedl_local_removal.py",
    ]
    assert spec == {"checkpoints": []}


COLLECTED = """\
name: gc-window
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
checkpoint_storage: {save_trial_best: 0, save_trial_latest: 1, save_experiment_best: 0}
"""


def test_every_reader_sees_a_checkpoint_leave_completed_before_its_gc_task_starts(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    """The collection's GC task held at its start (queued, then started, nothing deleted or reported yet):
    the checkpoint it will delete is no longer COMPLETED for any reader, and no download is offered."""
    exp = create_experiment(client, user, COLLECTED)
    [trial] = agent.start_all()
    old, new = stored(client, trial, 2), stored(client, trial, 4)
    agent.exit(trial.allocation_id, 0)
    app.state.checkpoint_gc.run_pending()  # the collection queues its task

    def readers_agree() -> None:
        assert storage_of(client).path_of(old).is_dir()  # its files are all there still
        c = shown(client, user, old)
        assert (c["state"], c["deleting"]) == ("STATE_PARTIALLY_DELETED", True)
        assert (shown(client, user, new)["state"], shown(client, user, new)["deleting"]) == ("STATE_COMPLETED", False)
        for path in (f"/api/v1/checkpoints/{old}/download", f"/checkpoints/{old}"):  # det's --mode master too
            r = client.get(path, headers=user)
            assert r.status_code == 409 and "is being deleted by checkpoint GC task" in r.json()["message"], r.text
            assert "not served" in r.json()["message"]
        completed = {"states": "STATE_COMPLETED"}
        for path in (f"/api/v1/experiments/{exp['id']}/checkpoints", f"/api/v1/trials/{trial.trial_id}/checkpoints"):
            listed = client.get(path, params=completed, headers=user).json()["checkpoints"]
            assert [c["uuid"] for c in listed] == [new], path
        work = client.get(f"/api/v1/trials/{trial.trial_id}/workloads", headers=user).json()["workloads"]
        assert {w["checkpoint"]["uuid"]: w["checkpoint"]["state"] for w in work if "checkpoint" in w} == {
            old: "STATE_DELETED",
            new: "STATE_COMPLETED",
        }  # det trial describe: none of its files offered
        assert (
            client.get(f"/api/v1/trials/{trial.trial_id}", headers=user).json()["trial"]["latestCheckpointUuid"] == new
        )
        if client.get("/api/v1/models/keeper", headers=user).status_code == 404:
            assert post(client, "/api/v1/models", {"name": "keeper"}, user).status_code == 200
        r = post(client, "/api/v1/models/keeper/versions", {"checkpointUuid": old}, user)
        assert r.status_code == 400 and "checkpointUuid" in r.text and "STATE_PARTIALLY_DELETED" in r.text

    readers_agree()  # queued
    [gc] = agent.start_all()
    assert [c["uuid"] for c in spec_of(client, gc)["checkpoints"]] == [old]
    readers_agree()  # started: the task may delete from now on
    storage_of(client).delete(old)  # as the task does, then reports
    assert report(client, gc, {old: {}}).status_code == 200
    c = shown(client, user, old)
    assert (c["state"], c["deleting"]) == ("STATE_DELETED", False)
    assert client.get(f"/api/v1/checkpoints/{old}/download", headers=user).status_code == 404
    agent.exit(gc.allocation_id, 0)
