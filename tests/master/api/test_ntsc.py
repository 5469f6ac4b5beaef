"""Commands, notebooks, shells and TensorBoards over the API (Determined's NTSC routes), with a fake
agent: launch, what the agent is asked to start, list, describe, kill, priority, workspaces, and the
errors bad input gets."""

from __future__ import annotations

import base64
import io
import tarfile

from fastapi.testclient import TestClient

from pedl.config.security_config import TASK_UID_BASE
from tests.master.fakes import FakeAgent, bearer, file_entry, login, post


def launch(client: TestClient, headers: dict, kind: str = "commands", **body) -> dict:
    r = post(client, f"/api/v1/{kind}", body, headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_command_runs_its_entrypoint_with_its_files_as_a_task_of_its_own(
    client: TestClient, user: dict, agent: FakeAgent, clock
) -> None:
    out = launch(
        client,
        user,
        config={"entrypoint": ["echo", "hi"], "description": "say hi"},
        files=[file_entry("data.txt", b"payload")],
    )
    cmd = out["command"]
    assert cmd["description"] == "say hi" and cmd["state"] == "STATE_QUEUED" and cmd["username"] == "determined"
    assert out["config"]["resources"] == {**out["config"]["resources"], "slots": 1, "resource_pool": "default"}
    [task] = agent.start_all()
    assert task.task_id == cmd["id"] and task.allocation_id == f"{cmd['id']}.1"
    msg = task.message
    assert msg["entrypoint"] == ["echo", "hi"]
    assert msg["env"]["DET_TASK_TYPE"] == "COMMAND" and msg["env"]["DET_TASK_ID"] == cmd["id"]
    assert "DET_TRIAL_ID" not in msg["env"]
    # the task downloads its own files with its token
    r = client.get(f"/api/v1/tasks/{cmd['id']}/context_directory", headers=bearer(task.token))
    assert r.status_code == 200, r.text
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.json()["b64Tgz"]))) as tar:
        assert tar.extractfile("data.txt").read() == b"payload"
    got = client.get(f"/api/v1/commands/{cmd['id']}", headers=user).json()["command"]
    assert got["state"] == "STATE_RUNNING" and got["isReady"] is True
    task_view = client.get(f"/api/v1/tasks/{cmd['id']}", headers=user).json()["task"]
    assert task_view["taskType"] == "TASK_TYPE_COMMAND" and task_view["allocations"][0]["isReady"] is True
    assert task_view["endTime"] is None
    agent.exit(task.allocation_id, 0)
    task_view = client.get(f"/api/v1/tasks/{cmd['id']}", headers=user).json()["task"]
    assert task_view["endTime"] is not None
    assert client.get(f"/api/v1/commands/{cmd['id']}", headers=user).json()["command"]["state"] == "STATE_TERMINATED"
    # an ended task stays listed, TERMINATED, for a day after its end (as Determined lists them), then leaves
    [listed] = client.get("/api/v1/commands", headers=user).json()["commands"]
    assert listed["id"] == cmd["id"] and listed["state"] == "STATE_TERMINATED"
    clock.advance(24 * 3600 + 1)
    assert client.get("/api/v1/commands", headers=user).json()["commands"] == []
    assert client.get(f"/api/v1/commands/{cmd['id']}", headers=user).json()["command"]["state"] == "STATE_TERMINATED"


def test_lists_are_by_kind_and_filter_by_user_and_workspace(client: TestClient, user: dict, admin: dict) -> None:
    mine = launch(client, user, config={"entrypoint": "sleep 100"})["command"]["id"]
    theirs = launch(client, admin, config={"entrypoint": "sleep 100"})["command"]["id"]
    nb = launch(client, user, "notebooks")["notebook"]
    assert nb["serviceAddress"] == f"/proxy/{nb['id']}/" and nb["description"].startswith("JupyterLab (")
    listed = client.get("/api/v1/commands", headers=user).json()["commands"]
    assert {c["id"] for c in listed} == {mine, theirs}  # anyone may list, as in Determined
    only = client.get("/api/v1/commands", params={"users": ["determined"]}, headers=user).json()["commands"]
    assert [c["id"] for c in only] == [mine]
    assert [n["id"] for n in client.get("/api/v1/notebooks", headers=user).json()["notebooks"]] == [nb["id"]]
    assert client.get("/api/v1/commands", params={"workspaceId": 999}, headers=user).status_code == 404
    # a task of one kind is not found as another
    assert client.get(f"/api/v1/notebooks/{mine}", headers=user).status_code == 404


def test_only_the_owner_or_an_admin_kills_or_reprioritises(client: TestClient, user: dict, admin: dict) -> None:
    cmd = launch(client, user, config={"entrypoint": "sleep 100"})["command"]["id"]
    post(client, "/api/v1/users", {"user": {"username": "eve", "active": True}, "password": ""}, admin)
    eve = bearer(login(client, "eve"))
    assert post(client, f"/api/v1/commands/{cmd}/kill", None, eve).status_code == 403
    assert post(client, f"/api/v1/commands/{cmd}/set_priority", {"priority": 5}, eve).status_code == 403
    r = post(client, f"/api/v1/commands/{cmd}/set_priority", {"priority": 5}, user)
    assert r.status_code == 200, r.text
    assert client.get(f"/api/v1/commands/{cmd}", headers=user).json()["config"]["resources"]["priority"] == 5
    r = post(client, f"/api/v1/commands/{cmd}/kill", None, admin)
    assert r.status_code == 200 and r.json()["command"]["state"] == "STATE_TERMINATED", r.text
    assert post(client, f"/api/v1/commands/{cmd}/set_priority", {"priority": 5}, user).status_code == 409


def test_bad_input_is_refused_naming_the_field(client: TestClient, user: dict) -> None:
    cases = [
        ({"config": {"entrypoint": "x", "resources": {"slots": -1}}}, "resources.slots"),
        ({"config": {"entrypoint": "x", "resources": {"resource_pool": "nope"}}}, "resource_pool"),
        ({"config": {"entrypoint": "x", "no_such_key": 1}}, "no_such_key"),
        ({"config": {"entrypoint": "x", "idle_timeout": "soon"}}, "idle_timeout"),
        ({"config": {"entrypoint": "x"}, "files": [{"path": "../escape", "type": 48, "content": ""}]}, "files[0].path"),
        ({"config": {"entrypoint": "x"}, "workspaceId": 12345}, "workspaceId"),
        ({"config": {"entrypoint": "x"}, "templateName": "missing"}, "templateName"),
        ({"config": {"entrypoint": "x", "resources": {"slots": 10485}}}, "request unfulfillable"),
        ({"config": {"entrypoint": "x", "environment": {"environment_variables": ["=v"]}}}, "environment_variables"),
    ]
    for body, field in cases:
        r = post(client, "/api/v1/commands", body, user)
        assert r.status_code in (400, 404), (body, r.text)
        assert field in r.text, (field, r.text)
    assert client.get("/api/v1/commands", headers=user).json()["commands"] == []  # nothing was started


def test_variables_the_master_alone_sets_are_refused_naming_the_field(client: TestClient, user: dict) -> None:
    host = '{"checkpoint_storage": {"type": "shared_fs", "host_path": "/root"}}'
    for variables, field in (
        ([f"DET_EXPERIMENT_CONFIG={host}"], "environment.environment_variables[0]"),
        ({"A": "1", "DET_EXPERIMENT_CONFIG": host}, "environment.environment_variables.DET_EXPERIMENT_CONFIG"),
        ({"cpu": ["A=1", f"DET_EXPERIMENT_CONFIG={host}"]}, "environment.environment_variables.cpu[1]"),
        ({"gpu": {"DET_EXPERIMENT_CONFIG": host}}, "environment.environment_variables.gpu.DET_EXPERIMENT_CONFIG"),
        (["DET_CLUSTER_ID=x"], "environment.environment_variables[0]"),
    ):
        for kind in ("commands", "notebooks", "shells"):
            r = post(client, f"/api/v1/{kind}", {"config": {"environment": {"environment_variables": variables}}}, user)
            assert r.status_code == 400 and field in r.text and "set by the master" in r.text, (kind, r.text)
    assert client.get("/api/v1/commands", headers=user).json()["commands"] == []  # nothing was started


def test_no_task_starts_in_an_archived_workspace(client: TestClient, user: dict) -> None:
    ws = post(client, "/api/v1/workspaces", {"name": "ws-a"}, user).json()["workspace"]["id"]
    assert launch(client, user, config={"entrypoint": "true"}, workspaceId=ws)["command"]["workspaceId"] == ws
    assert post(client, f"/api/v1/workspaces/{ws}/archive", None, user).status_code == 200
    r = post(client, "/api/v1/notebooks", {"workspaceId": ws}, user)
    assert r.status_code == 404 and "archived" in r.text


def test_deleting_a_workspace_kills_its_tasks_and_no_others(client: TestClient, user: dict) -> None:
    ws = post(client, "/api/v1/workspaces", {"name": "ws-doomed"}, user).json()["workspace"]["id"]
    inside = launch(client, user, "notebooks", workspaceId=ws)["notebook"]["id"]
    outside = launch(client, user, "notebooks")["notebook"]["id"]
    r = client.delete(f"/api/v1/workspaces/{ws}", headers=user)
    assert r.status_code == 200, r.text
    assert client.get(f"/api/v1/notebooks/{inside}", headers=user).json()["notebook"]["state"] == "STATE_TERMINATED"
    assert client.get(f"/api/v1/notebooks/{outside}", headers=user).json()["notebook"]["state"] == "STATE_QUEUED"
    listed = {n["id"]: n["state"] for n in client.get("/api/v1/notebooks", headers=user).json()["notebooks"]}
    assert listed == {outside: "STATE_QUEUED"}  # a deleted workspace's tasks leave the lists (Determined's too)
    assert client.get("/api/v1/notebooks", params={"workspaceId": ws}, headers=user).status_code == 404


def test_a_command_without_an_entrypoint_is_taken_and_its_agent_says_why_it_ends(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    """Determined takes it (its e2e test_workspaceid_set launches one); the agent ends it at once with
    'the entrypoint is empty' (tests/agent)."""
    cmd = launch(client, user)["command"]
    [task] = agent.start_all()
    assert task.task_id == cmd["id"] and task.message["entrypoint"] == []


def test_a_shells_key_is_its_owners_and_it_names_the_user_det_logs_in_as(client: TestClient, admin: dict) -> None:
    group = {"agentUid": 1000, "agentGid": 1001, "agentUser": "alice", "agentGroup": "staff"}
    r = post(
        client,
        "/api/v1/users",
        {"user": {"username": "alice", "active": True, "agentUserGroup": group}, "password": ""},
        admin,
    )
    assert r.status_code == 200, r.text
    post(client, "/api/v1/users", {"user": {"username": "eve", "active": True}, "password": ""}, admin)
    alice, eve = bearer(login(client, "alice")), bearer(login(client, "eve"))
    mine = launch(client, alice, "shells")["shell"]
    assert mine["privateKey"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert mine["publicKey"].startswith("ssh-ed25519 ") and mine["description"].startswith("Shell (")
    assert mine["agentUserGroup"] == {"uid": 1000, "gid": 1001, "user": "alice", "group": "staff"}
    for headers, sees in ((alice, True), (admin, True), (eve, False)):
        got = client.get(f"/api/v1/shells/{mine['id']}", headers=headers).json()["shell"]
        assert ("privateKey" in got) is sees and got["publicKey"] == mine["publicKey"]
        listed = client.get("/api/v1/shells", headers=headers).json()["shells"]
        assert [("privateKey" in s) for s in listed] == [sees]
    # a user with no agent user group: a uid of their own (security.task_uid_base), named for them
    theirs = launch(client, eve, "shells")["shell"]
    eve_id = client.get("/api/v1/me", headers=eve).json()["user"]["id"]
    assert theirs["agentUserGroup"] == {
        "uid": TASK_UID_BASE + eve_id,
        "gid": TASK_UID_BASE + eve_id,
        "user": "pedl-user-eve",
        "group": "pedl-user-eve",
    }
    assert theirs["privateKey"] != mine["privateKey"]


def test_one_word_is_shell_text_and_the_end_is_logged_in_determineds_words(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    """`det cmd run 'env | grep X'` sends one word: the agent gets shell text; several stay an argv. A bare
    NAME among the variables (Determined passes it to Docker) sets nothing. The task's log ends with
    Determined's "resources exited successfully" or "resources failed with non-zero exit code"."""
    env = {"environment": {"environment_variables": ["THISISTRUE=true", "WONTCAUSEPANIC"]}}
    none = {"resources": {"slots": 0}}  # both at once on the one-slot agent
    one = launch(client, user, config={"entrypoint": ["env | grep -q THISISTRUE=true"], **env, **none})["command"]
    many = launch(client, user, config={"entrypoint": ["bash", "-c", "set -e\necho a b"], **none})["command"]
    started = {t.task_id: t for t in agent.start_all()}
    assert started[one["id"]].message["entrypoint"] == "env | grep -q THISISTRUE=true"
    assert started[one["id"]].message["env"]["THISISTRUE"] == "true"
    assert "WONTCAUSEPANIC" not in started[one["id"]].message["env"]
    assert started[many["id"]].message["entrypoint"] == ["bash", "-c", "set -e\necho a b"]
    agent.exit(started[one["id"]].allocation_id, 0)
    agent.exit(started[many["id"]].allocation_id, 2)

    def logged(task_id: str) -> str:
        r = client.get(f"/api/v1/tasks/{task_id}/logs", headers=user)
        assert r.status_code == 200, r.text
        return r.text

    assert "resources exited successfully with a zero exit code" in logged(one["id"])
    assert "exited with code 2: resources failed with non-zero exit code" in logged(many["id"])


def test_tasks_get_their_pools_task_container_defaults_and_startup_hook(
    app, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    from pedl.config.task_container import TaskContainerDefaults
    from tests.master.fakes import SINGLE_CONFIG, create_experiment

    config = app.state.ctx.config
    config.task_container_defaults = TaskContainerDefaults(startup_hook="echo master", environment_variables=["A=1"])
    # nothing set for the pool: the master's; once the pool sets its hook, the pool's, with the master's rest
    launch(client, user, config={"entrypoint": "true"})
    [task] = agent.start_all()
    assert task.message["startup_hook"] == "echo master" and task.message["env"]["A"] == "1"
    agent.exit(task.allocation_id, 0)
    config.resource_pools[0].task_container_defaults = TaskContainerDefaults(startup_hook="echo pool")
    launch(client, user, config={"entrypoint": "true"})
    create_experiment(client, user, SINGLE_CONFIG)
    tasks = agent.start_all()
    assert len(tasks) == 1  # one slot: the trial waits
    assert tasks[0].message["startup_hook"] == "echo pool" and tasks[0].message["env"]["A"] == "1"
    agent.exit(tasks[0].allocation_id, 0)
    [trial] = agent.start_all()
    assert trial.trial_id and trial.message["startup_hook"] == "echo pool" and trial.message["env"]["A"] == "1"


def test_resources_shm_size_reaches_the_agent_for_a_process_and_a_container(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    launch(client, user, config={"entrypoint": "true", "resources": {"shm_size": "1.5g"}})
    [task] = agent.start_all()
    assert task.message["shm_size_bytes"] == 1536 * 2**20 and task.message["container"] is None
    agent.exit(task.allocation_id, 0)
    launch(client, user, config={"entrypoint": "true"})
    [task] = agent.start_all()
    assert task.message["shm_size_bytes"] is None  # a process shares the host's /dev/shm
    agent.exit(task.allocation_id, 0)
    r = post(client, "/api/v1/commands", {"config": {"entrypoint": "true", "resources": {"shm_size": "lots"}}}, user)
    assert r.status_code == 400 and "resources.shm_size" in r.text, r.text


def test_a_containers_shm_size_is_the_tasks_over_the_defaults() -> None:
    from pedl.config.task_config import TaskConfig
    from pedl.config.task_container import TaskContainerDefaults, container_spec

    cfg = TaskConfig.model_validate({"environment": {"image": "img:1"}, "resources": {"shm_size": "512m"}})
    defaults = TaskContainerDefaults(shm_size_bytes=2**30)
    assert container_spec(defaults, cfg.environment, [], cfg.resources.shm_size)["shm_size_bytes"] == 512 * 2**20
    assert container_spec(defaults, cfg.environment, [])["shm_size_bytes"] == 2**30


def test_a_process_tasks_bind_mounts_reach_its_agent_and_a_containers_stay_in_its_container(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    mounts = [
        {"host_path": "/data", "container_path": "/data", "read_only": True},
        {"host_path": "/srv/x", "container_path": "rel/x"},
    ]
    launch(client, user, config={"entrypoint": "true", "bind_mounts": mounts})
    [task] = agent.start_all()
    got = task.message["bind_mounts"]
    assert [(m["host_path"], m["container_path"], m["read_only"]) for m in got] == [
        ("/data", "/data", True),
        ("/srv/x", "rel/x", False),
    ]
    agent.exit(task.allocation_id, 0)
    for bad, words in (("../up", "no '..'"), ("a/../../b", "no '..'"), ("x:y", "':'")):
        r = post(
            client,
            "/api/v1/commands",
            {"config": {"entrypoint": "true", "bind_mounts": [{"host_path": "/data", "container_path": bad}]}},
            user,
        )
        assert r.status_code == 400 and "bind_mounts" in r.text and words in r.text, r.text


def test_a_relative_mount_goes_under_the_tasks_working_directory() -> None:
    from pedl.agent.containers import WORKDIR, mount_target

    assert mount_target("/data") == "/data"
    assert mount_target("rel/x") == f"{WORKDIR}/rel/x"
    assert mount_target("rel", "/w/alloc-1") == "/w/alloc-1/rel"
