"""The authorization matrix: every route of the master against every kind of caller, with the answer
each cell must get written down in one table. A route missing from the table fails the test, so a
new route cannot land without its row."""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.identity.passwords import client_hash
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    bearer,
    create_experiment,
    login,
    post,
)

# The callers, in the order each row's cells run (those that may change state come last).
COLUMNS = ("none", "garbage", "other", "task_other", "task_revoked", "task_own", "owner", "admin")

R = (401, 401, 200, 200, 401, 200, 200, 200)  # any user, and any live task, may read
PUBLIC = (200,) * 8
TASK = (401, 401, 403, 403, 401, 200, 403, 403)  # only the task token of that allocation
OWNER = (401, 401, 403, 403, 401, 403, 200, 200)  # the owner or an admin, never a task
USER = (401, 401, 200, 403, 401, 403, 200, 200)  # any logged-in user, never a task
ADMIN = (401, 401, 403, 403, 401, 403, 403, 200)
ANY_TASK = (401, 401, 403, 200, 401, 200, 403, 403)  # any live task
# the proxy to a task's service: its owner or an admin (503 here: the task registered no port yet); another
# user gets the 404 of an unknown task; task tokens never pass
PROXY = (401, 401, 404, 403, 401, 403, 503, 503)
TASK_OR_OWNER = (401, 401, 403, 403, 401, 200, 200, 200)  # that allocation's task token, the owner or an admin
# a checkpoint GC task's own token only: the world's task_own is a trial's, refused too (403); the GC task's
# own token and its uuids: tests/master/api/test_checkpoint_gc_reports.py
GC_TASK = (401, 401, 403, 403, 401, 403, 403, 403)


@dataclass
class World:
    """alice owns two experiments: `exp` runs three trials on a fake agent (task A of trial 1 is the
    target of task routes, task B is another live allocation, task C has ended, so its token is
    revoked); `side` is the target of kill/pause/activate. bob is another user."""

    client: TestClient
    app: FastAPI
    tokens: dict[str, dict[str, str]]
    ids: dict[str, Any]
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def relogin(self) -> None:
        for column, name in (("owner", "alice"), ("other", "bob"), ("admin", "admin")):
            self.tokens[column] = bearer(login(self.client, name, "pw-" + name))


def _world(client: TestClient, app: FastAPI) -> World:
    admin = bearer(login(client, "admin"))
    ids: dict[str, Any] = {}
    for name in ("alice", "bob"):
        body = {
            "user": {"username": name, "admin": False, "active": True},
            "password": client_hash("pw-" + name),
            "isHashed": True,
        }
        r = post(client, "/api/v1/users", body, admin)
        assert r.status_code == 200, r.text
        ids[name] = r.json()["user"]["id"]
    admin_id = next(
        u["id"] for u in client.get("/api/v1/users", headers=admin).json()["users"] if u["username"] == "admin"
    )
    r = post(
        client, f"/api/v1/users/{admin_id}/password", {"password": client_hash("pw-admin"), "isHashed": True}, admin
    )
    assert r.status_code == 200, r.text
    alice = bearer(login(client, "alice", "pw-alice"))
    agent = FakeAgent(app, "agent-1", slots=3)
    three = GRID_CONFIG.replace("vals: [0.1, 0.2]", "vals: [0.1, 0.2, 0.3]")
    exp = create_experiment(client, alice, three)
    tasks = sorted(agent.start_all(), key=lambda t: t.trial_id)
    assert len(tasks) == 3
    task_a, task_b, task_c = tasks
    agent.exit(task_c.allocation_id, 1, "crashed")  # its token is revoked from here on
    side = create_experiment(client, alice, SINGLE_CONFIG, activate=False)
    side_trial = client.get(f"/api/v1/experiments/{side['id']}/trials", headers=alice).json()["trials"][0]
    # a validation metric and a checkpoint with a file, so the read routes have something to read
    body = {
        "group": "validation",
        "metrics": {
            "trialId": task_a.trial_id,
            "trialRunId": 1,
            "stepsCompleted": 1,
            "metrics": {"avgMetrics": {"loss": 0.5}},
        },
    }
    assert post(client, f"/api/v1/trials/{task_a.trial_id}/metrics", body, bearer(task_a.token)).status_code == 200
    ckpt = str(uuid.uuid4())
    storage = app.state.ctx.config.effective_checkpoint_storage()
    path = storage.host_path.rstrip("/") + "/" + ckpt
    import os

    os.makedirs(path)
    with open(os.path.join(path, "weights"), "wb") as f:
        f.write(b"w")
    r = post(client, "/api/v1/checkpoints", _checkpoint_body(ckpt, task_a), bearer(task_a.token))
    assert r.status_code == 200, r.text
    ids.update(
        exp=exp["id"],
        side=side["id"],
        side_trial=side_trial["id"],
        trial=task_a.trial_id,
        task=task_a.task_id,
        alloc=task_a.allocation_id,
        ckpt=ckpt,
        task_a=task_a,
    )
    # alice's model, with the checkpoint as version 1 (the matrix registers versions 2 and 3)
    assert post(client, "/api/v1/models", {"name": "alice-model", "labels": ["l"]}, alice).status_code == 200
    assert post(client, "/api/v1/models/alice-model/versions", {"checkpointUuid": ckpt}, alice).status_code == 200
    ids.update(model="alice-model", version=1, last_version=3, doomed_model="doomed-model")
    # alice's workspace, project and template
    ws = post(client, "/api/v1/workspaces", {"name": "alice-ws"}, alice).json()["workspace"]["id"]
    project = post(client, f"/api/v1/workspaces/{ws}/projects", {"name": "alice-project"}, alice).json()["project"]
    assert post(client, "/api/v1/templates/alice-tpl", {"config": {}}, alice).status_code == 200
    ids.update(ws=ws, project=project["id"], tpl="alice-tpl", new_tpl="new-tpl", doomed_tpl="doomed-tpl")
    tokens = {
        "none": {},
        "garbage": bearer("not-a-token"),
        "other": bearer(login(client, "bob", "pw-bob")),
        "owner": alice,
        "admin": bearer(login(client, "admin", "pw-admin")),
        "task_other": bearer(task_b.token),
        "task_revoked": bearer(task_c.token),
        "task_own": bearer(task_a.token),
    }
    return World(client, app, tokens, ids)


def _checkpoint_body(ckpt: str, task: Any) -> dict:
    return {
        "checkpoint": {
            "uuid": ckpt,
            "allocationId": task.allocation_id,
            "taskId": task.task_id,
            "metadata": {"steps_completed": 1},
            "resources": {"weights": "1"},
            "state": "STATE_COMPLETED",
        }
    }


def _metrics(w: World) -> dict:
    return {
        "group": "training",
        "metrics": {
            "trialId": w.ids["trial"],
            "trialRunId": 1,
            "stepsCompleted": next(w.counter) + 10,
            "metrics": {"avgMetrics": {"loss": 1.0}},
        },
    }


def _new_user(w: World) -> dict:
    return {"user": {"username": f"new-{next(w.counter)}", "admin": False}, "password": "", "isHashed": True}


def _experiment(w: World) -> dict:
    return {"activate": False, "config": SINGLE_CONFIG, "modelDefinition": [], "validateOnly": False}


def _ended(w: World) -> None:
    """A fresh ended (killed) single-trial experiment of alice's as {ended}, for the cells that delete
    or continue one: each cell gets its own."""
    exp = create_experiment(w.client, w.tokens["owner"], SINGLE_CONFIG, activate=False)
    assert post(w.client, f"/api/v1/experiments/{exp['id']}/kill", None, w.tokens["owner"]).status_code == 200
    w.ids["ended"] = exp["id"]


def _ended_once(w: World) -> None:
    """One ended experiment of alice's as {streamed}, for the metric streams' cells (a stream of a running
    one stays open until it ends)."""
    if "streamed" not in w.ids:
        _ended(w)
        w.ids["streamed"] = w.ids["ended"]


def _continued(w: World) -> dict:
    _ended(w)
    return {"id": w.ids["ended"], "overrideConfig": "searcher:\n  max_length: 20\n"}


def _fresh_checkpoint(w: World) -> str:
    """A checkpoint of alice's (files `weights` and `extra`) for each cell that deletes or trims one."""
    ckpt = str(uuid.uuid4())
    path = w.app.state.ctx.config.effective_checkpoint_storage().host_path.rstrip("/") + "/" + ckpt
    os.makedirs(path)
    for name in ("weights", "extra"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"w")
    body = _checkpoint_body(ckpt, w.ids["task_a"])
    body["checkpoint"]["resources"] = {"weights": "1", "extra": "1"}
    r = post(w.client, "/api/v1/checkpoints", body, w.tokens["task_own"])
    assert r.status_code == 200, r.text
    return ckpt


def _doomed_model(w: World) -> None:
    """The model the DELETE row deletes, made again (by alice) before each cell: the owner's cell deletes it."""
    if w.client.get("/api/v1/models/doomed-model", headers=w.tokens["owner"]).status_code == 404:
        assert post(w.client, "/api/v1/models", {"name": "doomed-model"}, w.tokens["owner"]).status_code == 200


def _last_version(w: World) -> None:
    """The version the DELETE row deletes, registered again before each cell (the next number is one
    past the highest, so it comes back under the same number)."""
    url = "/api/v1/models/{model}/versions".format(**w.ids)
    if w.client.get(f"{url}/{w.ids['last_version']}", headers=w.tokens["owner"]).status_code == 404:
        r = post(w.client, url, {"checkpointUuid": w.ids["ckpt"]}, w.tokens["owner"])
        assert r.json()["modelVersion"]["version"] == w.ids["last_version"], r.text


def _new_template(w: World) -> dict:
    """The template the POST row creates, removed (by an admin) before each cell, so each cell makes it."""
    w.client.delete("/api/v1/templates/{new_tpl}".format(**w.ids), headers=w.tokens["admin"])
    return {"name": w.ids["new_tpl"], "config": {"max_restarts": 1}}


def _doomed_template(w: World) -> None:
    """The template the DELETE row deletes, made again (by alice) before each cell."""
    url = "/api/v1/templates/{doomed_tpl}".format(**w.ids)
    if w.client.get(url, headers=w.tokens["owner"]).status_code == 404:
        assert post(w.client, url, {"config": {}}, w.tokens["owner"]).status_code == 200


def _doomed_workspace(w: World) -> None:
    """The workspace the DELETE row deletes (with a project), made again (by alice) before each cell."""
    owner = w.tokens["owner"]
    if (
        "doomed_ws" not in w.ids
        or w.client.get("/api/v1/workspaces/{doomed_ws}".format(**w.ids), headers=owner).status_code == 404
    ):
        r = post(w.client, "/api/v1/workspaces", {"name": f"doomed-ws-{next(w.counter)}"}, owner)
        w.ids["doomed_ws"] = r.json()["workspace"]["id"]
        post(w.client, "/api/v1/workspaces/{doomed_ws}/projects".format(**w.ids), {"name": "p"}, owner)


def _doomed_project(w: World) -> None:
    """The project the DELETE row deletes, made again (by alice, in her workspace) before each cell."""
    owner = w.tokens["owner"]
    if (
        "doomed_project" not in w.ids
        or w.client.get("/api/v1/projects/{doomed_project}".format(**w.ids), headers=owner).status_code == 404
    ):
        r = post(
            w.client,
            "/api/v1/workspaces/{ws}/projects".format(**w.ids),
            {"name": f"doomed-project-{next(w.counter)}"},
            owner,
        )
        w.ids["doomed_project"] = r.json()["project"]["id"]


def _project_move(w: World) -> dict:
    """Alice's project goes to her second workspace and back, cell by cell."""
    if "ws2" not in w.ids:
        r = post(w.client, "/api/v1/workspaces", {"name": "alice-ws-2"}, w.tokens["owner"])
        w.ids["ws2"] = r.json()["workspace"]["id"]
    return {"destinationWorkspaceId": w.ids["ws2"] if next(w.counter) % 2 else w.ids["ws"]}


def _live_task(w: World, plural: str) -> None:
    """A fresh live task of alice's of this kind as {ntsc}, for the cells that kill one: each cell gets its own."""
    r = post(
        w.client,
        f"/api/v1/{plural}",
        {"config": {"entrypoint": "sleep 1000", "resources": {"slots": 0}}, **_shown(w, plural)},
        w.tokens["owner"],
    )
    assert r.status_code == 200, r.text
    w.ids["ntsc"] = r.json()[plural[:-1]]["id"]


def _shown(w: World, plural: str) -> dict[str, Any]:
    """What a TensorBoard shows (it needs an experiment or a trial); nothing for the other kinds."""
    return {"experimentIds": [w.ids["exp"]]} if plural == "tensorboards" else {}


def _alices_task(w: World, plural: str) -> None:
    """Alice's live task of this kind that the read and priority rows act on, as {ntsc}."""
    key = f"ntsc_{plural}"
    if key not in w.ids:
        _live_task(w, plural)
        w.ids[key] = w.ids["ntsc"]
    w.ids["ntsc"] = w.ids[key]


def _ntsc_rows(plural: str) -> list[tuple[str, str, tuple[int, ...], Any]]:
    return [
        (
            "POST",
            f"/api/v1/{plural}",
            USER,
            lambda w: {"config": {"entrypoint": "true", "resources": {"slots": 0}}, **_shown(w, plural)},
        ),
        ("GET", f"/api/v1/{plural}", R, lambda w: _alices_task(w, plural)),
        ("GET", f"/api/v1/{plural}/{{ntsc}}", R, lambda w: _alices_task(w, plural)),
        (
            "POST",
            f"/api/v1/{plural}/{{ntsc}}/set_priority",
            OWNER,
            lambda w: _alices_task(w, plural) or {"priority": 10 + next(w.counter) % 9},
        ),
        ("POST", f"/api/v1/{plural}/{{ntsc}}/kill", OWNER, lambda w: _live_task(w, plural)),
    ]


Body = Callable[[World], Any] | None

# (method, path, expected per column, body). Paths take {names} from World.ids. Rows run in order.
MATRIX: list[tuple[str, str, tuple[int, ...], Body]] = [
    ("GET", "/info", PUBLIC, None),
    (
        "POST",
        "/api/v1/auth/login",
        PUBLIC,
        lambda w: {"username": "bob", "password": client_hash("pw-bob"), "isHashed": True},
    ),
    ("POST", "/api/v1/auth/session", PUBLIC, lambda w: {"username": "bob", "password": "pw-bob"}),  # the WebUI's
    ("GET", "/api/v1/master", PUBLIC, None),  # as Determined's: det's SDK asks before it logs in
    ("GET", "/api/v1/master/config", ADMIN, None),
    ("GET", "/metrics", R, None),
    ("GET", "/api/v1/pedl/package", R, None),  # and the agent token (tests/master/api/test_package.py)
    ("GET", "/api/v1/me", R, None),
    ("GET", "/api/v1/users", R, None),
    ("GET", "/api/v1/users/{username}/by-username", R, None),
    ("GET", "/api/v1/users/{alice}", R, None),
    ("POST", "/api/v1/users", ADMIN, _new_user),
    ("GET", "/api/v1/agents", R, None),
    ("GET", "/api/v1/agents/{agent}", R, None),
    ("GET", "/api/v1/agents/{agent}/slots", R, None),
    ("GET", "/api/v1/agents/{agent}/slots/0", R, None),
    ("GET", "/api/v1/resource-pools", R, None),
    ("GET", "/api/v1/resource-pools/default", R, None),
    ("GET", "/api/v1/instances", R, None),
    ("GET", "/api/v1/experiments", R, None),
    ("GET", "/api/v1/experiments/{exp}", R, None),
    ("GET", "/api/v1/experiments/{exp}/trials", R, None),
    ("GET", "/api/v1/experiments/{exp}/checkpoints", R, None),
    ("GET", "/api/v1/experiments/{exp}/model_def", R, None),
    ("GET", "/api/v1/experiments/{exp}/events", R, None),
    ("GET", "/api/v1/experiments/{exp}/searcher/best_searcher_validation_metric", R, None),
    ("GET", "/api/v1/trials/{trial}", R, None),
    ("GET", "/api/v1/trials/{trial}/workloads", R, None),
    ("GET", "/api/v1/trials/{trial}/allocations", R, None),
    ("GET", "/api/v1/trials/metrics/trial_metrics?group=training&trialIds={trial}", R, None),
    ("GET", "/api/v1/trials/metrics/training_metrics?trialIds={trial}", R, None),
    ("GET", "/api/v1/trials/metrics/validation_metrics?trialIds={trial}", R, None),
    ("GET", "/api/v1/trials/{trial}/checkpoints?sortByAttr=SORT_BY_SEARCHER_METRIC", R, None),
    ("GET", "/api/v1/trials/{trial}/metric-series?group=training", R, None),
    ("GET", "/api/v1/experiments/{exp}/metric-series?group=validation", R, None),
    # Determined's metric streams, of an ended experiment (one message, then the end)
    ("GET", "/api/v1/experiments/metrics-stream/metric-names?ids={streamed}", R, _ended_once),
    (
        "GET",
        "/api/v1/experiments/{streamed}/metrics-stream/batches?metric_name=loss&metric_type=METRIC_TYPE_TRAINING",
        R,
        _ended_once,
    ),
    (
        "GET",
        "/api/v1/experiments/{streamed}/metrics-stream/trials-snapshot?metric_name=loss&group=validation",
        R,
        _ended_once,
    ),
    (
        "GET",
        "/api/v1/experiments/{streamed}/metrics-stream/trials-sample?metric_name=loss&group=validation",
        R,
        _ended_once,
    ),
    ("GET", "/api/v1/trials/{trial}/metrics", R, None),
    ("GET", "/api/v1/trials/time-series?trialIds={trial}&metricIds=validation.loss", R, None),
    ("GET", "/api/v1/trials/{trial}/metrics/csv?group=training", R, None),
    ("GET", "/api/v1/trials/{trial}/logs", R, None),
    ("GET", "/api/v1/trials/{trial}/logs/fields", R, None),
    ("GET", "/api/v1/tasks", R, None),
    ("GET", "/tasks", R, None),  # Determined's legacy map of /api/v1/tasks' allocationIdToSummary
    ("GET", "/api/v1/tasks/{task}", R, None),
    ("GET", "/api/v1/tasks/{task}/logs", R, None),
    ("GET", "/api/v1/tasks/{task}/logs/fields", R, None),
    ("GET", "/api/v1/job-queues-v2", R, None),
    ("GET", "/proxy/{task}/", PROXY, None),  # every method and WebSocket alike (tests/master/api/test_proxy.py)
    (
        "GET",
        "/api/v1/resources/allocation/raw?timestampAfter=2023-01-01T00:00:00Z&timestampBefore=2024-01-01T00:00:00Z",
        USER,
        None,
    ),  # a user's own, an admin's everyone's
    ("GET", "/api/v1/master/logs", ADMIN, None),  # they name users, hosts and paths
    ("GET", "/api/v1/checkpoints", R, None),
    ("GET", "/api/v1/checkpoints/{ckpt}", R, None),
    ("GET", "/api/v1/checkpoints/{ckpt}/download", R, None),
    ("GET", "/checkpoints/{ckpt}", R, None),  # Determined's gzipped download (det checkpoint download --mode master)
    ("GET", "/api/v1/checkpoints/{ckpt}/metrics", R, None),
    ("GET", "/api/v1/workspaces", R, None),
    ("GET", "/api/v1/workspaces/{ws}", R, None),
    ("GET", "/api/v1/workspaces/{ws}/projects", R, None),
    ("GET", "/api/v1/projects/{project}", R, None),
    ("GET", "/api/v1/templates", R, None),
    ("GET", "/api/v1/templates/{tpl}", R, None),
    ("GET", "/api/v1/models", R, None),
    ("GET", "/api/v1/models/{model}", R, None),
    ("GET", "/api/v1/models/{model}/versions", R, None),
    ("GET", "/api/v1/models/{model}/versions/{version}", R, None),
    ("GET", "/api/v1/models/{model}/versions/{version}/metrics", R, None),
    ("GET", "/api/v1/model/labels", R, None),
    # what a task reports about itself
    ("POST", "/api/v1/trials/{trial}/metrics", TASK_OR_OWNER, _metrics),  # a user: as Determined's SDK
    (
        "POST",
        "/api/v1/trials/{trial}/metrics/batch",
        TASK,
        lambda w: {
            "reports": [
                {"group": "training", "stepsCompleted": 2, "trialRunId": 1, "metrics": {"avgMetrics": {"loss": 1.0}}}
            ]
        },
    ),
    ("POST", "/api/v1/trials/{trial}/progress", TASK, lambda w: {"progress": 0.5}),
    ("POST", "/api/v1/trials/{trial}/searcher/completed_operation", TASK, lambda w: {"op": {"length": 1}}),
    ("POST", "/api/v1/trials/{trial}/runner/metadata", TASK, lambda w: {}),
    ("POST", "/api/v1/trials/{trial}/early_exit", TASK, lambda w: {"reason": "EXITED_REASON_UNSPECIFIED"}),
    ("POST", "/api/v1/runs/start", ANY_TASK, lambda w: {}),
    ("GET", "/api/v1/tasks/{task}/context_directory", TASK, None),
    ("POST", "/api/v1/task/logs", TASK, lambda w: {"logs": [{"taskId": w.ids["task"], "log": "line"}]}),
    ("GET", "/api/v1/allocations/{alloc}/signals/preemption", TASK, None),
    ("POST", "/api/v1/allocations/{alloc}/signals/ack_preemption", TASK, lambda w: {}),
    ("POST", "/api/v1/allocations/{alloc}/proxy_port", TASK, lambda w: {"port": 20000 + next(w.counter)}),
    ("POST", "/api/v1/allocations/{alloc}/activity", TASK, lambda w: {}),
    ("POST", "/api/v1/allocations/{alloc}/checkpoint_gc", GC_TASK, lambda w: {"checkpoints": []}),
    ("POST", "/api/v1/checkpoints", TASK, lambda w: _checkpoint_body(str(uuid.uuid4()), w.ids["task_a"])),
    (
        "POST",
        "/api/v1/trial-source-info",
        TASK,
        lambda w: {
            "trialSourceInfo": {
                "trialId": w.ids["trial"],
                "checkpointUuid": w.ids["ckpt"],
                "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
            }
        },
    ),
    # what users do
    ("POST", "/api/v1/experiments", USER, _experiment),
    *_ntsc_rows("commands"),
    *_ntsc_rows("notebooks"),
    *_ntsc_rows("shells"),
    *_ntsc_rows("tensorboards"),
    ("POST", "/api/v1/agents/{agent}/disable", ADMIN, lambda w: {"drain": True}),  # its tasks run on
    ("POST", "/api/v1/agents/{agent}/enable", ADMIN, None),
    ("POST", "/api/v1/agents/{agent}/forget", ADMIN, None),  # its credential (the fake agent has none)
    ("POST", "/api/v1/agents/{agent}/slots/2/disable", ADMIN, lambda w: {"drain": True}),  # its task runs on
    ("POST", "/api/v1/agents/{agent}/slots/2/enable", ADMIN, None),
    ("POST", "/api/v1/experiments/{side}/pause", OWNER, None),
    ("POST", "/api/v1/experiments/{side}/activate", OWNER, None),
    ("POST", "/api/v1/trials/{side_trial}/kill", OWNER, None),
    ("POST", "/api/v1/experiments/{side}/kill", OWNER, None),
    ("POST", "/api/v1/experiments/{side}/archive", OWNER, None),  # once it has ended
    ("POST", "/api/v1/experiments/{side}/unarchive", OWNER, None),
    ("PATCH", "/api/v1/experiments/{side}", OWNER, lambda w: {"description": f"set {next(w.counter)}"}),
    ("PATCH", "/api/v1/experiments/{side}", OWNER, lambda w: {"resources": {"priority": 40 + next(w.counter) % 9}}),
    (
        "POST",
        "/api/v1/job-queues",
        OWNER,
        lambda w: {"updates": [{"jobId": f"job-{w.ids['side']}", "priority": 40 + next(w.counter) % 9}]},
    ),
    ("PUT", "/api/v1/experiments/{side}/labels/{label}", OWNER, None),
    ("DELETE", "/api/v1/experiments/{side}/labels/{label}", OWNER, None),
    (
        "POST",
        "/api/v1/experiments/{side}/move",
        OWNER,  # into alice's project and back, cell by cell
        lambda w: {"destinationProjectId": w.ids["project"] if next(w.counter) % 2 else 1},
    ),
    ("DELETE", "/api/v1/experiments/{side}/tensorboard-files", OWNER, None),
    ("DELETE", "/api/v1/experiments/{ended}", OWNER, _ended),
    ("POST", "/api/v1/experiments/continue", OWNER, _continued),
    (
        "POST",
        "/api/v1/checkpoints/{ckpt}/metadata",
        OWNER,
        lambda w: {"checkpoint": {"uuid": w.ids["ckpt"], "metadata": {"steps_completed": 1, "n": next(w.counter)}}},
    ),
    ("DELETE", "/api/v1/checkpoints", OWNER, lambda w: {"checkpointUuids": [_fresh_checkpoint(w)]}),
    (
        "POST",
        "/api/v1/checkpoints/rm",
        OWNER,
        lambda w: {"checkpointUuids": [_fresh_checkpoint(w)], "checkpointGlobs": ["extra"]},
    ),
    ("POST", "/api/v1/models", USER, lambda w: {"name": f"model-{next(w.counter)}"}),
    ("PATCH", "/api/v1/models/{model}", OWNER, lambda w: {"description": f"set {next(w.counter)}"}),
    ("POST", "/api/v1/models/{model}/archive", OWNER, None),
    ("POST", "/api/v1/models/{model}/unarchive", OWNER, None),
    ("POST", "/api/v1/models/{model}/versions", OWNER, lambda w: {"checkpointUuid": w.ids["ckpt"]}),
    ("PATCH", "/api/v1/models/{model}/versions/{version}", OWNER, lambda w: {"notes": f"n{next(w.counter)}"}),
    ("DELETE", "/api/v1/models/{model}/versions/{last_version}", OWNER, _last_version),
    ("DELETE", "/api/v1/models/{doomed_model}", OWNER, _doomed_model),
    ("POST", "/api/v1/workspaces", USER, lambda w: {"name": f"ws-{next(w.counter)}"}),
    ("POST", "/api/v1/workspaces/{ws}/projects", USER, lambda w: {"name": f"project-{next(w.counter)}"}),
    ("POST", "/api/v1/templates/{new_tpl}", USER, _new_template),
    ("PATCH", "/api/v1/templates/{tpl}", OWNER, lambda w: {"max_restarts": next(w.counter) % 5}),
    ("DELETE", "/api/v1/templates/{doomed_tpl}", OWNER, _doomed_template),
    # workspaces and projects: their creator or an admin edits them; any user pins; bulk actions answer
    # 200 to any user, with an error per experiment the caller may not change (Determined's results)
    ("PATCH", "/api/v1/workspaces/{ws}", OWNER, lambda w: {"name": f"alice-ws-{next(w.counter)}"}),
    ("POST", "/api/v1/workspaces/{ws}/archive", OWNER, None),
    ("POST", "/api/v1/workspaces/{ws}/unarchive", OWNER, None),
    ("POST", "/api/v1/workspaces/{ws}/pin", USER, None),
    ("POST", "/api/v1/workspaces/{ws}/unpin", USER, None),
    ("DELETE", "/api/v1/workspaces/{doomed_ws}", OWNER, _doomed_workspace),
    ("PATCH", "/api/v1/projects/{project}", OWNER, lambda w: {"description": f"d{next(w.counter)}"}),
    ("POST", "/api/v1/projects/{project}/archive", OWNER, None),
    ("POST", "/api/v1/projects/{project}/unarchive", OWNER, None),
    ("POST", "/api/v1/projects/{project}/move", OWNER, _project_move),
    ("POST", "/api/v1/projects/{project}/notes", OWNER, lambda w: {"name": "n", "contents": "c"}),
    ("PUT", "/api/v1/projects/{project}/notes", OWNER, lambda w: {"notes": [{"name": "n", "contents": "c"}]}),
    ("DELETE", "/api/v1/projects/{doomed_project}", OWNER, _doomed_project),
    ("GET", "/api/v1/projects/{project}/columns", R, None),
    ("GET", "/api/v1/projects/{project}/experiments/metric-ranges", R, None),
    ("POST", "/api/v1/projects/{project}/experiments/kill", USER, lambda w: {"experimentIds": []}),
    ("POST", "/api/v1/projects/{project}/experiments/cancel", USER, lambda w: {"experimentIds": []}),
    ("POST", "/api/v1/projects/{project}/experiments/pause", USER, lambda w: {"experimentIds": [w.ids["side"]]}),
    ("POST", "/api/v1/projects/{project}/experiments/activate", USER, lambda w: {"experimentIds": []}),
    ("POST", "/api/v1/projects/{project}/experiments/archive", USER, lambda w: {"experimentIds": []}),
    ("POST", "/api/v1/projects/{project}/experiments/unarchive", USER, lambda w: {"experimentIds": []}),
    ("DELETE", "/api/v1/projects/{project}/experiments/delete", USER, lambda w: {"experimentIds": []}),
    (
        "POST",
        "/api/v1/projects/{project}/experiments/move",
        USER,
        lambda w: {"experimentIds": [], "destinationProjectId": 1},
    ),
    # a user edits their own display name; linking an agent user is for admins, even one's own
    ("PATCH", "/api/v1/users/{alice}", OWNER, lambda w: {"displayName": f"Alice {next(w.counter)}"}),
    (
        "PATCH",
        "/api/v1/users/{alice}",
        ADMIN,
        lambda w: {
            "agentUserGroup": {
                "agentUid": 1000 + next(w.counter),
                "agentGid": 1000,
                "agentUser": "alice",
                "agentGroup": "alice",
            }
        },
    ),
    ("POST", "/api/v1/auth/logout", USER, None),  # run with fresh logins: see below
    ("DELETE", "/api/v1/auth/session", USER, None),  # the WebUI's logout: the same, by any token
    # alice changes her own password (a fresh login), then an admin resets it, revoking her sessions; last:
    # a new password also ends the tokens of alice's tasks (task_own, task_other), which the other rows use
    (
        "POST",
        "/api/v1/users/{alice}/password",
        OWNER,
        lambda w: {"password": client_hash("pw-alice"), "isHashed": True},
    ),
]


def _run_matrix(w: World) -> list[str]:
    wrong = []
    for method, path, expected, body in MATRIX:
        if (method, path) in (
            ("POST", "/api/v1/auth/logout"),
            ("DELETE", "/api/v1/auth/session"),
            ("POST", "/api/v1/users/{alice}/password"),
        ):
            w.relogin()
        for column, want in zip(COLUMNS, expected, strict=True):
            payload = body(w) if body else None
            url = path.format(**w.ids)  # after the body: it may make the cell's own target (_ended)
            if method == "GET":
                r = w.client.get(url, headers=w.tokens[column])
            elif method == "POST" and path == "/api/v1/auth/session":  # a browser's JSON login
                r = w.client.post(url, json=payload, headers=w.tokens[column])
            elif method == "POST":
                r = post(w.client, url, payload, w.tokens[column])
            else:
                r = w.client.request(
                    method, url, content=None if payload is None else json.dumps(payload), headers=w.tokens[column]
                )
            w.client.cookies.clear()  # a browser login's cookie must not authenticate the next cells
            if r.status_code != want:
                wrong.append(f"{method} {path} as {column}: {r.status_code} (expected {want}) {r.text[:160]}")
    return wrong


def test_every_route_is_in_the_matrix(app: FastAPI) -> None:
    listed = {(m, p.split("?")[0]) for m, p, _, _ in MATRIX}
    routes = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    routes.add(("GET", "/metrics"))  # served outside the OpenAPI document (Prometheus text)

    def shape(path: str) -> str:  # compare paths by shape: {trial_id} and {trial} are one parameter
        return "/".join(
            "{}" if part.startswith("{") or part in ("default",) or part.isdigit() else part for part in path.split("/")
        )

    missing = {(m, p) for m, p in routes if (m, shape(p)) not in {(lm, shape(lp)) for lm, lp in listed}}
    missing = {(m, p) for m, p in missing if p != "/api/v1/experiments/{experiment_id}/{action}"}
    assert not missing, f"routes without a row in the authorization matrix: {sorted(missing)}"


@pytest.mark.slow
def test_authorization_matrix(client: TestClient, app: FastAPI) -> None:
    world = _world(client, app)
    world.ids["alice"] = json.loads(client.get("/api/v1/me", headers=world.tokens["owner"]).text)["user"]["id"]
    world.ids["label"] = "matrix"
    world.ids["username"] = "bob"
    world.ids["agent"] = "agent-1"
    wrong = _run_matrix(world)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("action", ["pause", "activate", "kill"])
def test_another_users_action_changes_nothing(client: TestClient, app: FastAPI, action: str) -> None:
    world = _world(client, app)
    before = client.get(f"/api/v1/experiments/{world.ids['exp']}", headers=world.tokens["owner"]).json()
    r = post(client, f"/api/v1/experiments/{world.ids['exp']}/{action}", None, world.tokens["other"])
    assert r.status_code == 403
    assert "owner" in r.json()["message"]
    after = client.get(f"/api/v1/experiments/{world.ids['exp']}", headers=world.tokens["owner"]).json()
    assert after["experiment"]["state"] == before["experiment"]["state"]
