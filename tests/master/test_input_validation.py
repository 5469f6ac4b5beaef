"""One validation for both databases: each bad input gets the same 400 (or 413) naming its field on
SQLite and on PostgreSQL, before the database sees it, and nothing is stored. Each table runs once per
database; every failing row is reported together."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, file_entry, post

CK = "3f1e2d4c-0b5a-4c6d-8e7f-9a0b1c2d3e4f"


@pytest.fixture(autouse=True)
def _no_database_refusals(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The DataError/OverflowError handler is a safety net: none of these inputs may reach it."""
    with caplog.at_level(logging.WARNING, logger="pedl.master.api.errors"):
        yield
    refused = [r.getMessage() for r in caplog.records if "database cannot store" in r.getMessage()]
    assert refused == []


def problem_with(r, field: str, status: int = 400) -> str | None:
    """Why `r` is not a `status` answer naming `field` in its message and its fields, or None."""
    if r.status_code != status:
        return f"status {r.status_code}: {r.text[:300]}"
    body = r.json()
    if field not in body["message"]:
        return f"message does not name {field!r}: {body['message'][:300]!r}"
    if not any(field in f["field"] or field in f["message"] for f in body.get("fields", [])):
        return f"fields {body.get('fields')} do not name {field!r}"
    return None


def create_body(config: str, files: list | None = None) -> dict:
    return {
        "activate": False,
        "config": config,
        "modelDefinition": files if files is not None else [file_entry("train.py", b"print(1)\n")],
    }


def with_line(line: str) -> str:
    return SINGLE_CONFIG + line + "\n"


def named(name: str) -> str:
    return SINGLE_CONFIG.replace("name: single-exp", f"name: {name}")


def alias_bomb(levels: int = 9) -> str:
    """Billion laughs: 9 levels of 9 aliases each, under 0.6 KB of text, 9**9 strings expanded."""
    lines = ["a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return SINGLE_CONFIG + "data:\n" + "\n".join(" " + line for line in lines) + "\n"


# (what, config text, the field or limit the 400 must name)
BAD_CONFIGS = [
    ("slots_per_trial 1e30 (float)", with_line("resources: {slots_per_trial: 1.0e+30}"), "resources.slots_per_trial"),
    ("slots_per_trial 10**30", with_line(f"resources: {{slots_per_trial: {10**30}}}"), "resources.slots_per_trial"),
    ("slots_per_trial over the bound", with_line("resources: {slots_per_trial: 10001}"), "resources.slots_per_trial"),
    ("max_restarts 1e30", with_line("max_restarts: 1.0e+30"), "max_restarts"),
    ("max_restarts over the bound", with_line("max_restarts: 1001"), "max_restarts"),
    (
        "experiment_seed 1e30",
        with_line("reproducibility: {experiment_seed: 1.0e+30}"),
        "reproducibility.experiment_seed",
    ),
    (
        "experiment_seed 2**31",
        with_line(f"reproducibility: {{experiment_seed: {2**31}}}"),
        "reproducibility.experiment_seed",
    ),
    ("priority 0", with_line("resources: {priority: 0}"), "resources.priority"),
    ("weight 1e400", with_line("resources: {weight: 1e400}"), "resources.weight"),
    ("weight .inf", with_line("resources: {weight: .inf}"), "resources.weight"),
    (
        "double hparam -inf..inf",
        with_line("hyperparameters: {x: {type: double, minval: -.inf, maxval: .inf}}"),
        "hyperparameters.x.minval",
    ),
    (
        "double hparam range overflows",
        with_line("hyperparameters: {x: {type: double, minval: -1.7e+308, maxval: 1.7e+308}}"),
        "hyperparameters.x",
    ),
    (
        "log hparam overflows",
        with_line("hyperparameters: {x: {type: log, minval: 0, maxval: 400}}"),
        "hyperparameters.x",
    ),
    ("NUL in the name", named('"a\\0b"'), "name"),
    ("name of 256 characters", named("n" * 256), "name"),
    ("NUL in the description", with_line('description: "a\\0b"'), "description"),
    ("NUL in a label", with_line('labels: [ok, "a\\0b"]'), "labels[1]"),
    ("NUL in the entrypoint", SINGLE_CONFIG.replace("python train.py", '"python\\0 train.py"'), "entrypoint"),
    ("NUL in an entrypoint list", SINGLE_CONFIG.replace("python train.py", '[python, "a\\0"]'), "entrypoint[1]"),
    ("NUL in an hparam value", with_line('hyperparameters: {x: "a\\0b"}'), "hyperparameters.x"),
    (
        "NUL in a categorical value",
        with_line('hyperparameters: {x: {type: categorical, vals: [a, "b\\0"]}}'),
        "hyperparameters.x.vals[1]",
    ),
    (
        "NUL in an environment variable",
        with_line('environment: {environment_variables: ["A=\\0"]}'),
        "environment.environment_variables[0]",
    ),
    ("lone surrogate in data", with_line('data: {k: "\\ud800"}'), "data.k"),
    ("lone surrogate in a key", with_line('data: {"k\\udfff": {x: "\\0"}}'), "data"),
    ("lone surrogate in an unknown key", with_line('environment: {"x\\udfff": 1}'), "environment"),
    ("infinity in data", with_line("data: {k: .nan}"), "data.k"),
    ("integer beyond 64 bits in data", with_line(f"data: {{k: {2**64}}}"), "data.k"),
    ("string over limits.max_string_length", with_line("description: " + "d" * 70_000), "description"),
    ("YAML nested 5,000 deep", with_line("data: " + "[" * 5000 + "]" * 5000), "limits.max_nesting_depth"),
    ("YAML alias bomb", alias_bomb(), "limits.max_config_bytes"),
    ("recursive YAML alias", with_line("data: &a [1, *a]"), "recursive alias"),
    (
        "a variable the master alone sets",
        with_line("environment: {environment_variables: ['DET_EXPERIMENT_CONFIG={}']}"),
        "environment.environment_variables[0]",
    ),
    (
        "one of a device's",
        with_line("environment: {environment_variables: {gpu: {DET_CLUSTER_ID: x}}}"),
        "environment.environment_variables.gpu.DET_CLUSTER_ID",
    ),
]


def test_bad_configs_are_400_naming_the_field_and_store_nothing(client: TestClient, admin: dict) -> None:
    assert len(alias_bomb()) - len(SINGLE_CONFIG) < 600  # the report's bomb: 0.6 KB, 9.4 MB once stored
    failures = []
    for what, config, field in BAD_CONFIGS:
        r = post(client, "/api/v1/experiments", create_body(config), admin)  # paused: activate false
        if problem := problem_with(r, field):
            failures.append((what, problem))
    assert failures == []
    assert client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"] == 0


def test_paused_create_refuses_what_activate_would(client: TestClient, admin: dict) -> None:
    """slots_per_trial: 1e30 was accepted paused and refused only at activate."""
    r = post(client, "/api/v1/experiments", create_body(with_line(f"resources: {{slots_per_trial: {10**30}}}")), admin)
    assert problem_with(r, "resources.slots_per_trial") is None
    good = post(client, "/api/v1/experiments", create_body(with_line("resources: {slots_per_trial: 2}")), admin)
    assert good.status_code == 200, good.text


# (what, modelDefinition, field)
BAD_FILES = [
    ("mtime 1e30", [{**file_entry("a.py", b"x"), "mtime": 1e30}], "modelDefinition[0].mtime"),
    ("mtime '1e30'", [{**file_entry("a.py", b"x"), "mtime": "1e30"}], "modelDefinition[0].mtime"),
    ("mtime 2**33", [{**file_entry("a.py", b"x"), "mtime": str(2**33)}], "modelDefinition[0].mtime"),
    ("negative mtime", [{**file_entry("a.py", b"x"), "mtime": -1}], "modelDefinition[0].mtime"),
    ("mode 2**40", [file_entry("ok.py"), {**file_entry("a.py", b"x"), "mode": 2**40}], "modelDefinition[1].mode"),
    ("NUL in a path", [file_entry("a\x00b", b"x")], "modelDefinition[0].path"),
    ("control character in a path", [file_entry("a\nb", b"x")], "modelDefinition[0].path"),
    ("backslash in a path", [file_entry("a\\b", b"x")], "modelDefinition[0].path"),
]


def test_bad_model_files_are_400_naming_the_entry(client: TestClient, admin: dict) -> None:
    failures = []
    for what, files, field in BAD_FILES:
        r = post(client, "/api/v1/experiments", create_body(SINGLE_CONFIG, files), admin)
        if problem := problem_with(r, field):
            failures.append((what, problem))
    assert failures == []
    assert client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"] == 0


# (what, body of POST /api/v1/users as raw JSON text, field)
BAD_USERS = [
    ("NUL in the username", json.dumps({"user": {"username": "a\x00b"}}), "user.username"),
    ("control character in the username", json.dumps({"user": {"username": "a\x01b"}}), "user.username"),
    ("lone surrogate in the username", '{"user": {"username": "\\ud800"}}', "user.username"),
    ("256-character username", json.dumps({"user": {"username": "u" * 256}}), "user.username"),
    (
        "1 MB display name",
        json.dumps({"user": {"username": "bob", "displayName": "x" * 1_000_000}}),
        "user.displayName",
    ),
    (
        "256-character display name",
        json.dumps({"user": {"username": "bob", "displayName": "x" * 256}}),
        "user.displayName",
    ),
    ("NUL in the display name", json.dumps({"user": {"username": "bob", "displayName": "a\x00b"}}), "user.displayName"),
]


def test_bad_users_are_400_naming_the_field_and_store_nothing(client: TestClient, admin: dict) -> None:
    failures = []
    for what, raw, field in BAD_USERS:
        if problem := problem_with(post(client, "/api/v1/users", raw=raw, headers=admin), field):
            failures.append((what, problem))
    assert failures == []
    names = {u["username"] for u in client.get("/api/v1/users", headers=admin).json()["users"]}
    assert names == {"admin", "determined"}


DEEP_JSON = "[" * 100_000 + "]" * 100_000

# (what, route, raw body, field): JSON the parser must refuse before any route looks at it
BAD_JSON = [
    ("JSON nested 100,000 deep", "/api/v1/experiments", DEEP_JSON, "limits.max_nesting_depth"),
    ("JSON nested 100,000 deep", "/api/v1/users/1/password", DEEP_JSON, "limits.max_nesting_depth"),
    (
        "JSON object nested 100,000 deep",
        "/api/v1/experiments",
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        "limits.max_nesting_depth",
    ),
    ("lone surrogate in a login username", "/api/v1/auth/login", '{"username": "\\ud800"}', "username"),
    ("NUL in a login username", "/api/v1/auth/login", '{"username": "a\\u0000b"}', "username"),
    ("NaN", "/api/v1/auth/login", '{"username": "admin", "password": NaN}', "password"),
    (
        "Infinity",
        "/api/v1/checkpoints",
        f'{{"checkpoint": {{"uuid": "{CK}", "metadata": {{"x": Infinity}}}}}}',
        "checkpoint.metadata.x",
    ),
    (
        "1e400",
        "/api/v1/checkpoints",
        f'{{"checkpoint": {{"uuid": "{CK}", "metadata": {{"x": 1e400}}}}}}',
        "checkpoint.metadata.x",
    ),
    (
        "integer beyond 64 bits",
        "/api/v1/checkpoints",
        f'{{"checkpoint": {{"uuid": "{CK}", "metadata": {{"steps_completed": {10**30}}}}}}}',
        "checkpoint.metadata.steps_completed",
    ),
    ("integer of 5,000 digits", "/api/v1/users/1/password", '{"password": "", "n": ' + "9" * 5000 + "}", "n"),
    (
        "string over limits.max_string_length",
        "/api/v1/users/1/password",
        json.dumps({"password": "p" * 70_000}),
        "password",
    ),
    # (a login's body is held to limits.max_anonymous_body_bytes first: tests/master/api/test_body_limit.py)
]


def test_bad_json_is_400_naming_the_field(client: TestClient, admin: dict) -> None:
    failures = []
    for what, path, raw, field in BAD_JSON:
        if problem := problem_with(post(client, path, raw=raw, headers=admin), field):
            failures.append((what, path, problem))
    assert failures == []
    assert client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"] == 0


def test_nul_in_the_url_is_400_naming_the_parameter(client: TestClient, admin: dict) -> None:
    """PostgreSQL refused these with an error, SQLite answered 200 or 404."""
    failures = [
        (url, problem)
        for url, field in [
            ("/api/v1/experiments?users=a%00b", "users"),
            ("/api/v1/experiments?states=%00", "states"),
            ("/api/v1/checkpoints/a%00b", "path"),
            ("/api/v1/trials/1/logs?x=1&y=%00", "y"),
        ]
        if (problem := problem_with(client.get(url, headers=admin), field))
    ]
    assert failures == []
    assert client.get("/api/v1/experiments?users=admin", headers=admin).status_code == 200


def test_the_same_answer_on_both_databases(client: TestClient, admin: dict, db_kind: str) -> None:
    """The inputs that gave 200 on SQLite and 400 on PostgreSQL, answered exactly alike."""
    answers = {
        "weight": post(client, "/api/v1/experiments", create_body(with_line("resources: {weight: 1e400}")), admin),
        "hparam": post(
            client,
            "/api/v1/experiments",
            create_body(with_line("hyperparameters: {x: {type: double, minval: -.inf, maxval: .inf}}")),
            admin,
        ),
        "name": post(client, "/api/v1/experiments", create_body(named('"a\\0b"')), admin),
        "username": post(client, "/api/v1/users", {"user": {"username": "a\x00b"}}, admin),
        "displayName": post(client, "/api/v1/users", {"user": {"username": "b", "displayName": "x" * 10**6}}, admin),
    }
    got = {k: (r.status_code, r.json()["message"]) for k, r in answers.items()}
    assert got == {
        "weight": (400, "invalid experiment config: resources.weight: Input should be a finite number"),
        "hparam": (
            400,
            "invalid experiment config: hyperparameters.x.minval: must be a finite number; "
            "hyperparameters.x.maxval: must be a finite number",
        ),
        "name": (400, "invalid experiment config: name: contains a NUL character"),
        "username": (400, "invalid request: user.username: contains a NUL character"),
        "displayName": (
            400,
            "invalid request: user.displayName: is 1000000 characters long, more than the limit of 65536",
        ),
    }, db_kind


def test_ids_and_counts_past_64_bits_are_400_naming_the_parameter(client: TestClient, admin: dict) -> None:
    """They reached the database before: an overflow there was caught only by the safety net."""
    huge = str(10**30)
    failures = [
        (url, problem)
        for url, field in [
            (f"/api/v1/experiments/{huge}", "experiment_id"),
            (f"/api/v1/trials/{huge}/metrics", "trial_id"),
            (f"/api/v1/experiments?offset={huge}", "offset"),
            (f"/api/v1/experiments?limit={huge}", "limit"),
        ]
        if (problem := problem_with(client.get(url, headers=admin), field))
    ]
    assert failures == []
    r = post(client, f"/api/v1/experiments/{huge}/kill", None, admin)
    assert problem_with(r, "experiment_id") is None


def test_inputs_the_fuzz_test_found(client: TestClient, admin: dict) -> None:
    """A lone surrogate as a hyperparameter name made pydantic fail to word its error (500); parent
    and project ids past 32 bits were 200 on SQLite and 400 on PostgreSQL."""
    surrogate_key = 'hyperparameters:\n  "\\uD800": {type: junk}'
    failures = [
        (what, problem)
        for what, body, field in [
            ("surrogate hparam", create_body(with_line(surrogate_key)), "hyperparameters"),
            ("parentId", {**create_body(SINGLE_CONFIG), "parentId": 2**31}, "parentId"),
            ("projectId", {**create_body(SINGLE_CONFIG), "projectId": 2**40}, "projectId"),
        ]
        if (problem := problem_with(post(client, "/api/v1/experiments", body, admin), field))
    ]
    assert failures == []
    assert client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"] == 0
