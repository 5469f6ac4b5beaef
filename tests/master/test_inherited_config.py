"""What of one user's config reaches another user's task. A TensorBoard (lifecycle/tensorboard_tasks.py) and a
template (workspaces/templates.py) have their own tests; here: an experiment forked from another user's
(`parentId`) copies nothing of it, and one created in another user's workspace takes only the workspace's
checkpoint storage (inside the master's roots), never variables or mounts; continuing one is its owner's."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of, file_entry, post
from tests.master.other_users import make_user

BOBS = SINGLE_CONFIG + (
    "environment: {environment_variables: [PYTHONPATH=/home/bob/evil]}\n"
    "bind_mounts: [{host_path: /home/bob, container_path: /home/bob}]\n"
)


def test_a_fork_in_another_users_workspace_takes_only_the_workspaces_storage(
    client: TestClient, admin: dict, agent: FakeAgent
) -> None:
    bob, alice = make_user(client, admin, "bob"), make_user(client, admin, "alice")
    root = ctx_of(client.app).config.effective_checkpoint_storage().host_path
    storage = {"type": "shared_fs", "host_path": str(root), "storage_path": "bobs"}
    r = post(client, "/api/v1/workspaces", {"name": "bobs", "checkpointStorageConfig": storage}, bob)
    assert r.status_code == 200, r.text
    ws = r.json()["workspace"]["id"]
    project = post(client, f"/api/v1/workspaces/{ws}/projects", {"name": "p", "workspaceId": ws}, bob).json()
    parent = create_experiment(client, bob, BOBS, activate=False)
    r = post(
        client,
        "/api/v1/experiments",
        {
            "activate": True,
            "config": SINGLE_CONFIG,
            "parentId": parent["id"],
            "projectId": project["project"]["id"],
            "modelDefinition": [file_entry("train.py", b"x\n")],
        },
        alice,
    )
    assert r.status_code == 200, r.text
    config = r.json()["config"]
    assert config["checkpoint_storage"]["storage_path"] == "bobs"  # the workspace's, inside the roots
    assert config["environment"]["environment_variables"] == [] and config["bind_mounts"] == []
    assert r.json()["experiment"]["forkedFrom"] == parent["id"]
    [task] = agent.start_all()
    assert "PYTHONPATH" not in task.message["env"] and task.message["bind_mounts"] == []
    r = post(client, "/api/v1/experiments/continue", {"id": parent["id"]}, alice)
    assert r.status_code == 403, r.text  # bob's experiment runs on as bob, by him or an admin only
