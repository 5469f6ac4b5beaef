"""Experiments over the API: create (config and model definition checks, nothing stored on
error), list with pagination and filters, kill / pause / activate, events."""

from __future__ import annotations

import base64
import io
import tarfile

import pytest
from fastapi.testclient import TestClient

from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.master.app import create_app
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    bearer,
    create_experiment,
    file_entry,
    login,
    post,
)

REQUIRED_EXPERIMENT_FIELDS = (
    "archived",
    "config",
    "id",
    "jobId",
    "name",
    "numTrials",
    "originalConfig",
    "projectId",
    "projectOwnerId",
    "searcherType",
    "startTime",
    "state",
    "username",
)
REQUIRED_TRIAL_FIELDS = ("experimentId", "hparams", "id", "restarts", "startTime", "state", "totalBatchesProcessed")


def create_body(config: str = GRID_CONFIG, files: list | None = None, **kw: object) -> dict:
    body = {
        "activate": True,
        "config": config,
        "modelDefinition": files if files is not None else [],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    body.update(kw)
    return body


def experiment_total(client: TestClient, headers: dict) -> int:
    return client.get("/api/v1/experiments", headers=headers).json()["pagination"]["total"]


def trials_of(client: TestClient, headers: dict, exp_id: int) -> list[dict]:
    r = client.get(f"/api/v1/experiments/{exp_id}/trials", headers=headers)
    assert r.status_code == 200
    return r.json()["trials"]


def tasks(client: TestClient, headers: dict) -> dict[str, dict]:
    return client.get("/api/v1/tasks", headers=headers).json()["allocationIdToSummary"]


def experiment(client: TestClient, headers: dict, exp_id: int) -> dict:
    r = client.get(f"/api/v1/experiments/{exp_id}", headers=headers)
    assert r.status_code == 200
    return r.json()["experiment"]


# -- create -----------------------------------------------------------------------------------------


def test_create_makes_queued_trials_with_allocations(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/experiments", create_body(files=[file_entry("train.py", b"print(1)\n")]), user)
    assert r.status_code == 200, r.text
    body = r.json()
    exp = body["experiment"]
    for key in REQUIRED_EXPERIMENT_FIELDS:
        assert key in exp and exp[key] is not None, key
    assert exp["state"] == "STATE_QUEUED"  # active, as Determined reports it while no trial has started
    assert exp["name"] == "grid-exp"
    assert exp["searcherType"] == "grid"
    assert exp["username"] == "determined"
    assert exp["numTrials"] == 2
    assert exp["originalConfig"] == GRID_CONFIG
    assert body["config"]["searcher"]["metric"] == "loss"

    trials = trials_of(client, user, exp["id"])
    assert len(trials) == 2
    for t in trials:
        for key in REQUIRED_TRIAL_FIELDS:
            assert key in t and t[key] is not None, key
        assert t["state"] == "STATE_QUEUED"
        assert t["experimentId"] == exp["id"]
    assert sorted(t["hparams"]["lr"] for t in trials) == [0.1, 0.2]

    summaries = tasks(client, user)
    assert {s["taskId"] for s in summaries.values()} == {t["taskId"] for t in trials}
    for s in summaries.values():
        assert s["state"] == "STATE_QUEUED"
        assert s["slotsNeeded"] == 1
        assert s["resourcePool"] == "default"
        assert s["registeredTime"]


def test_stored_config_is_fully_defaulted(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    r = client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()
    config = r["config"]
    assert config == r["experiment"]["config"]
    assert config["resources"]["resource_pool"] == "default"
    assert config["resources"]["priority"] == 42
    assert config["resources"]["slots_per_trial"] == 1
    assert config["checkpoint_storage"]["type"] == "shared_fs"
    assert config["checkpoint_storage"]["host_path"]
    assert config["max_restarts"] == 5
    assert config["searcher"]["max_length"] == {"batches": 10, "epochs": None, "records": None}


def test_create_paused_makes_paused_trials_without_allocations(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, activate=False)
    assert exp["state"] == "STATE_PAUSED"
    assert {t["state"] for t in trials_of(client, user, exp["id"])} == {"STATE_PAUSED"}
    assert tasks(client, user) == {}


def test_unnamed_experiment_gets_a_name(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, "entrypoint: x\nsearcher: {name: single, metric: l}\n")
    assert exp["name"] == f"Experiment {exp['id']}"


def test_validate_only_stores_nothing(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/experiments", create_body(validateOnly=True), user)
    assert r.status_code == 200
    assert r.json()["config"]["searcher"]["name"] == "grid"
    # Determined's empty experiment, which det's --test-mode parses (every field it requires)
    assert (r.json()["experiment"]["id"], r.json()["experiment"]["state"]) == (0, "STATE_UNSPECIFIED")
    assert experiment_total(client, user) == 0


def test_model_definition_is_served_to_tasks(client: TestClient, user: dict, admin: dict, agent: FakeAgent) -> None:
    files = [
        file_entry("sub", directory=True),
        file_entry("sub/util.py", b"X = 1\n"),
        file_entry("train.py", b"print('hello')\n"),
    ]
    create_experiment(client, user, SINGLE_CONFIG, files=files)
    [task] = agent.start_all()
    # the code is the task's to fetch, not every user's (not even its owner's or an admin's)
    for headers in (user, admin):
        assert client.get(f"/api/v1/tasks/{task.task_id}/context_directory", headers=headers).status_code == 403
    r = client.get(f"/api/v1/tasks/{task.task_id}/context_directory", headers=bearer(task.token))
    assert r.status_code == 200
    tgz = base64.b64decode(r.json()["b64Tgz"])
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        names = {m.name: m for m in tar.getmembers()}
        assert names["sub"].isdir()
        assert tar.extractfile(names["train.py"]).read() == b"print('hello')\n"  # type: ignore[union-attr]
        assert tar.extractfile(names["sub/util.py"]).read() == b"X = 1\n"  # type: ignore[union-attr]
        assert names["train.py"].mode == 0o644


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ("entrypoint: x\nsearcher: {name: single\n", "malformed YAML"),
        ("entrypoint: [\n", "line"),
        ("- just\n- a list\n", "mapping"),
        ("", "config"),
        ("   \n", "config"),
    ],
)
def test_bad_yaml_is_400_and_stores_nothing(client: TestClient, user: dict, config: str, needle: str) -> None:
    r = post(client, "/api/v1/experiments", create_body(config), user)
    assert r.status_code == 400
    assert needle in r.json()["message"]
    assert experiment_total(client, user) == 0


def test_unknown_keys_and_wrong_types_are_all_listed(client: TestClient, user: dict) -> None:
    config = (
        "entrypoint: x\nsearcher: {name: single, metric: l, bogus: 1}\nresources: {slots_per_trial: many}\n"
        "max_restarts: -1\ncolour: blue\nhyperparameters: {lr: {type: int, minval: 3, maxval: 1}}\n"
    )
    r = post(client, "/api/v1/experiments", create_body(config), user)
    assert r.status_code == 400
    body = r.json()
    fields = {f["field"] for f in body["fields"]}
    assert fields >= {"searcher.bogus", "resources.slots_per_trial", "max_restarts", "colour", "hyperparameters.lr"}
    for field in fields:
        assert field in body["message"]
    assert experiment_total(client, user) == 0


def test_unknown_resource_pool_is_400(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/experiments", create_body(SINGLE_CONFIG + "resources: {resource_pool: gpu-xl}\n"), user)
    assert r.status_code == 400
    assert "resources.resource_pool" in r.json()["message"]
    assert "gpu-xl" in r.json()["message"]
    assert experiment_total(client, user) == 0


def test_pool_limits_and_defaults(master_config: MasterConfig) -> None:
    cfg = master_config.model_copy(
        update={
            "resource_pools": [
                ResourcePoolConfig(pool_name="gpu", max_slots_per_trial=2),
                ResourcePoolConfig(pool_name="cpu"),
            ],
            "default_compute_resource_pool": "gpu",
            "default_aux_resource_pool": "cpu",
        }
    )
    with TestClient(create_app(cfg)) as c:
        h = bearer(login(c, "determined"))
        r = post(c, "/api/v1/experiments", create_body(SINGLE_CONFIG + "resources: {slots_per_trial: 4}\n"), h)
        assert r.status_code == 400 and "resources.slots_per_trial" in r.json()["message"]
        gpu = create_experiment(c, h, SINGLE_CONFIG + "resources: {slots_per_trial: 2}\n")
        assert gpu["resourcePool"] == "gpu"
        aux = create_experiment(c, h, SINGLE_CONFIG + "resources: {slots_per_trial: 0}\n")
        assert aux["resourcePool"] == "cpu"
        explicit = create_experiment(c, h, SINGLE_CONFIG + "resources: {resource_pool: cpu}\n")
        assert explicit["resourcePool"] == "cpu"


BAD_FILES = [
    ([{"path": "a.py", "type": 48, "content": "!!!not base64!!!"}], "modelDefinition[0].content"),
    ([file_entry("ok.py", b"x"), {"path": "b.py", "type": 48, "content": "abc"}], "modelDefinition[1].content"),
    ([file_entry("../x", b"evil")], "modelDefinition[0].path"),
    ([file_entry("sub/../../x", b"evil")], "modelDefinition[0].path"),
    ([file_entry("/etc/passwd", b"evil")], "modelDefinition[0].path"),
    ([file_entry("..", directory=True)], "modelDefinition[0].path"),
    ([{"path": "", "type": 48, "content": ""}], "modelDefinition[0].path"),
    ([{"path": 5, "type": 48, "content": ""}], "modelDefinition[0].path"),
    (["train.py"], "modelDefinition[0]"),
    ([{"path": "link", "type": 50, "content": ""}], "modelDefinition[0].type"),
    ([{"path": "a", "type": "file", "content": ""}], "modelDefinition[0].type"),
    ([{"path": "a", "type": 48, "content": "", "mtime": "yesterday"}], "modelDefinition[0].mtime"),
    ([{"path": "a", "type": 48, "content": 12}], "modelDefinition[0].content"),
]


@pytest.mark.parametrize(("files", "field"), BAD_FILES, ids=[f for _, f in BAD_FILES])
def test_bad_model_definition_is_400_and_stores_nothing(
    client: TestClient, user: dict, files: list, field: str
) -> None:
    r = post(client, "/api/v1/experiments", create_body(SINGLE_CONFIG, files=files), user)
    assert r.status_code == 400, r.text
    assert field in r.json()["message"]
    assert experiment_total(client, user) == 0
    assert tasks(client, user) == {}


def test_too_large_model_definition_is_400_and_stores_nothing(
    client: TestClient, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client.app.state.ctx.config.limits, "max_model_definition_bytes", 1024)
    files = [file_entry("a.bin", b"a" * 600), file_entry("b.bin", b"b" * 600)]
    r = post(client, "/api/v1/experiments", create_body(SINGLE_CONFIG, files=files), user)
    assert r.status_code == 400
    assert "modelDefinition" in r.json()["message"]
    assert experiment_total(client, user) == 0
    # just under the limit is fine
    ok = create_experiment(client, user, SINGLE_CONFIG, files=[file_entry("a.bin", b"a" * 1000)])
    assert ok["id"] > 0


# -- list ---------------------------------------------------------------------------------------------


def test_list_pagination(client: TestClient, user: dict) -> None:
    ids = [create_experiment(client, user, SINGLE_CONFIG)["id"] for _ in range(5)]
    page = client.get("/api/v1/experiments?offset=0&limit=2", headers=user).json()
    assert [e["id"] for e in page["experiments"]] == ids[:2]
    assert page["pagination"] == {"offset": 0, "limit": 2, "startIndex": 0, "endIndex": 2, "total": 5}
    page = client.get("/api/v1/experiments?offset=4&limit=2", headers=user).json()
    assert [e["id"] for e in page["experiments"]] == ids[4:]
    assert page["pagination"]["endIndex"] == 5 and page["pagination"]["total"] == 5
    page = client.get("/api/v1/experiments?offset=10&limit=2", headers=user).json()
    assert page["experiments"] == [] and page["pagination"]["endIndex"] == 5
    page = client.get("/api/v1/experiments", headers=user).json()
    assert [e["id"] for e in page["experiments"]] == ids
    assert page["pagination"]["endIndex"] == page["pagination"]["total"] == 5
    newest = client.get("/api/v1/experiments?orderBy=ORDER_BY_DESC&limit=1", headers=user).json()
    assert newest["experiments"][0]["id"] == ids[-1]


def test_paging_like_det_reaches_every_experiment(client: TestClient, user: dict) -> None:
    ids = [create_experiment(client, user, SINGLE_CONFIG)["id"] for _ in range(7)]
    seen, offset = [], 0
    while True:  # det's read_paginated: ask again from endIndex while endIndex < total
        page = client.get(f"/api/v1/experiments?offset={offset}&limit=3", headers=user).json()
        seen += [e["id"] for e in page["experiments"]]
        offset = page["pagination"]["endIndex"]
        if offset >= page["pagination"]["total"]:
            break
    assert seen == ids


def test_list_users_filter(client: TestClient, user: dict, admin: dict) -> None:
    mine = [create_experiment(client, user, SINGLE_CONFIG)["id"] for _ in range(2)]
    theirs = [create_experiment(client, admin, SINGLE_CONFIG)["id"]]

    def listed(query: str) -> list[int]:
        page = client.get(f"/api/v1/experiments?{query}", headers=user).json()
        assert page["pagination"]["total"] == len(page["experiments"])
        return [e["id"] for e in page["experiments"]]

    assert listed("users=determined") == mine
    assert listed("users=admin") == theirs
    assert listed("users=determined&users=admin") == sorted(mine + theirs)
    assert listed("users=nobody") == []
    assert listed("archived=false&limit=200&offset=0&users=determined") == mine
    assert listed("archived=true") == []
    assert {e["username"] for e in client.get("/api/v1/experiments", headers=user).json()["experiments"]} == {
        "determined",
        "admin",
    }


def test_list_states_filter(client: TestClient, user: dict) -> None:
    active = create_experiment(client, user, SINGLE_CONFIG)["id"]
    paused = create_experiment(client, user, SINGLE_CONFIG, activate=False)["id"]
    page = client.get("/api/v1/experiments?states=STATE_PAUSED", headers=user).json()
    assert [e["id"] for e in page["experiments"]] == [paused]
    page = client.get("/api/v1/experiments?states=STATE_ACTIVE&states=STATE_PAUSED", headers=user).json()
    assert [e["id"] for e in page["experiments"]] == [active, paused]


def test_trials_list_pagination(client: TestClient, user: dict) -> None:
    config = GRID_CONFIG.replace("vals: [0.1, 0.2]", "vals: [1, 2, 3, 4, 5]")
    exp = create_experiment(client, user, config)
    page = client.get(f"/api/v1/experiments/{exp['id']}/trials?offset=2&limit=2", headers=user).json()
    assert [t["hparams"]["lr"] for t in page["trials"]] == [3, 4]
    assert page["pagination"]["endIndex"] == 4 and page["pagination"]["total"] == 5


# -- kill / pause / activate -------------------------------------------------------------------------


def test_kill_cancels_queued_trials(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user)
    r = post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user)
    assert r.status_code == 200
    got = experiment(client, user, exp["id"])
    assert got["state"] == "STATE_CANCELED"
    assert got["endTime"]
    trials = trials_of(client, user, exp["id"])
    assert {t["state"] for t in trials} == {"STATE_CANCELED"}
    assert all(t["endTime"] for t in trials)
    assert tasks(client, user) == {}
    # killing again is harmless
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    assert experiment(client, user, exp["id"])["state"] == "STATE_CANCELED"


def test_pause_then_activate_requeues(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user)
    before = set(tasks(client, user))
    assert len(before) == 2
    assert post(client, f"/api/v1/experiments/{exp['id']}/pause", None, user).status_code == 200
    assert experiment(client, user, exp["id"])["state"] == "STATE_PAUSED"
    assert {t["state"] for t in trials_of(client, user, exp["id"])} == {"STATE_PAUSED"}
    assert tasks(client, user) == {}
    # pausing twice is harmless
    assert post(client, f"/api/v1/experiments/{exp['id']}/pause", None, user).status_code == 200

    assert post(client, f"/api/v1/experiments/{exp['id']}/activate", None, user).status_code == 200
    assert experiment(client, user, exp["id"])["state"] == "STATE_QUEUED"  # active, its trials queued
    assert {t["state"] for t in trials_of(client, user, exp["id"])} == {"STATE_QUEUED"}
    after = tasks(client, user)
    assert len(after) == 2 and not (set(after) & before)  # new allocations
    assert {s["state"] for s in after.values()} == {"STATE_QUEUED"}


def test_activate_a_paused_created_experiment(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, activate=False)
    assert post(client, f"/api/v1/experiments/{exp['id']}/activate", None, user).status_code == 200
    assert len(tasks(client, user)) == 2


@pytest.mark.parametrize("action", ["pause", "activate"])
def test_pause_or_activate_of_a_terminal_experiment_is_409(client: TestClient, user: dict, action: str) -> None:
    exp = create_experiment(client, user)
    post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user)
    r = post(client, f"/api/v1/experiments/{exp['id']}/{action}", None, user)
    assert r.status_code == 409
    # said by the action itself, not by an illegal lifecycle edge (that would be the master's bug)
    assert f"experiment {exp['id']} is CANCELED: only ACTIVE or PAUSED" in r.json()["message"]
    assert experiment(client, user, exp["id"])["state"] == "STATE_CANCELED"


def test_actions_on_unknown_experiment_are_404(client: TestClient, user: dict) -> None:
    for action in ("kill", "pause", "activate"):
        assert post(client, f"/api/v1/experiments/424242/{action}", None, user).status_code == 404


def test_kill_with_a_running_trial_waits_for_the_process(client: TestClient, user: dict, agent: FakeAgent) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    assert trials_of(client, user, exp["id"])[0]["state"] == "STATE_RUNNING"
    post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user)
    assert experiment(client, user, exp["id"])["state"] == "STATE_STOPPING_CANCELED"
    kills = [m for m in agent.messages() if m["type"] == "kill_task"]
    assert [m["allocation_id"] for m in kills] == [task.allocation_id]
    agent.exit(task.allocation_id, -15)
    assert experiment(client, user, exp["id"])["state"] == "STATE_CANCELED"
    assert trials_of(client, user, exp["id"])[0]["state"] == "STATE_CANCELED"


def test_experiment_completes_when_its_trials_do(client: TestClient, user: dict, agent: FakeAgent) -> None:
    exp = create_experiment(client, user)
    for _ in range(2):  # one slot: the trials run one after the other
        [task] = agent.start_all()
        r = post(
            client,
            f"/api/v1/trials/{task.trial_id}/metrics",
            {
                "group": "validation",
                "metrics": {
                    "trialId": task.trial_id,
                    "trialRunId": 1,
                    "stepsCompleted": 10,
                    "metrics": {"avgMetrics": {"loss": 0.1 * task.trial_id}},
                },
            },
            bearer(task.token),
        )
        assert r.status_code == 200
        agent.exit(task.allocation_id, 0)
    got = experiment(client, user, exp["id"])
    assert got["state"] == "STATE_COMPLETED"
    assert got["progress"] == 1.0
    assert {t["state"] for t in trials_of(client, user, exp["id"])} == {"STATE_COMPLETED"}
    best = client.get(f"/api/v1/experiments/{exp['id']}/searcher/best_searcher_validation_metric", headers=user)
    assert best.json()["metric"] == pytest.approx(0.1 * min(t["id"] for t in trials_of(client, user, exp["id"])))


# -- events ---------------------------------------------------------------------------------------------


def test_events_record_transitions(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    post(client, f"/api/v1/experiments/{exp['id']}/pause", None, user)
    post(client, f"/api/v1/experiments/{exp['id']}/activate", None, user)
    post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user)
    events = client.get(f"/api/v1/experiments/{exp['id']}/events", headers=user).json()["events"]
    # transitions only: with no agent registered, the create also records a warning (no agent can hold a trial)
    exp_moves = [(e["fromState"], e["toState"]) for e in events if e["entityType"] == "experiment" and e["toState"]]
    assert exp_moves == [
        (None, "STATE_ACTIVE"),
        ("STATE_ACTIVE", "STATE_PAUSED"),
        ("STATE_PAUSED", "STATE_ACTIVE"),
        ("STATE_ACTIVE", "STATE_STOPPING_CANCELED"),
        ("STATE_STOPPING_CANCELED", "STATE_CANCELED"),
    ]
    trial_moves = [(e["fromState"], e["toState"]) for e in events if e["entityType"] == "trial"]
    assert trial_moves[0] == (None, "STATE_QUEUED")
    assert ("STATE_QUEUED", "STATE_PAUSED") in trial_moves
    assert ("STATE_PAUSED", "STATE_QUEUED") in trial_moves
    assert trial_moves[-1][1] == "STATE_CANCELED"
    for e in events:
        assert e["time"] and e["message"] and e["id"] > 0
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    # `after` returns only newer events
    later = client.get(f"/api/v1/experiments/{exp['id']}/events?after={events[2]['id']}", headers=user).json()
    assert [e["id"] for e in later["events"]] == [e["id"] for e in events[3:]]


def test_events_only_for_this_experiment(client: TestClient, user: dict) -> None:
    a = create_experiment(client, user, SINGLE_CONFIG)
    b = create_experiment(client, user, SINGLE_CONFIG)
    post(client, f"/api/v1/experiments/{b['id']}/kill", None, user)
    events = client.get(f"/api/v1/experiments/{a['id']}/events", headers=user).json()["events"]
    assert all(e["toState"] != "STATE_CANCELED" for e in events)
