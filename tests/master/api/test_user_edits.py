"""PATCH /api/v1/users/{userId} (Determined's PatchUser), GET /api/v1/users/{userId}, the users
list's filters, and agent user groups on users: each field, each refusal."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.config.security_config import TASK_UID_BASE, TASK_UIDS
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import bearer, login, post

GROUP = {"agentUid": 1000, "agentGid": 1001, "agentUser": "username", "agentGroup": "groupname"}


def patch(client: TestClient, user_id: int, body: dict, headers: dict):
    return client.patch(f"/api/v1/users/{user_id}", content=json.dumps(body), headers=headers)


def make_user(client: TestClient, admin: dict, name: str, password: str = "pw-" + "x", **fields) -> int:
    body = {"user": {"username": name, **fields}, "password": client_hash(password), "isHashed": True}
    r = post(client, "/api/v1/users", body, admin)
    assert r.status_code == 200, r.text
    return r.json()["user"]["id"]


def get(client: TestClient, user_id: int, headers: dict) -> dict:
    r = client.get(f"/api/v1/users/{user_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["user"]


def login_status(client: TestClient, username: str, password: str) -> int:
    r = post(client, "/api/v1/auth/login", {"username": username, "password": client_hash(password), "isHashed": True})
    return r.status_code


@pytest.fixture
def alice(client: TestClient, admin: dict) -> int:
    return make_user(client, admin, "alice", "pw-alice")


@pytest.fixture
def alice_headers(client: TestClient, alice: int) -> dict:
    return bearer(login(client, "alice", "pw-alice"))


def test_get_user_by_id(client: TestClient, admin: dict, alice: int, user: dict) -> None:
    got = get(client, alice, user)
    assert got["username"] == "alice" and got["agentUserGroup"] is None
    assert client.get("/api/v1/users/9999", headers=admin).status_code == 404
    assert client.get(f"/api/v1/users/{alice}").status_code == 401


def test_create_user_with_an_agent_user_group(client: TestClient, admin: dict) -> None:
    r = post(client, "/api/v1/users", {"user": {"username": "linked", "agentUserGroup": GROUP}, "password": ""}, admin)
    assert r.status_code == 200, r.text
    assert r.json()["user"]["agentUserGroup"] == GROUP
    assert get(client, r.json()["user"]["id"], admin)["agentUserGroup"] == GROUP
    taken = {"user": {"username": "taken", "agentUserGroup": {**GROUP, "agentUid": TASK_UID_BASE + 7}}, "password": ""}
    r = post(client, "/api/v1/users", taken, admin)
    assert r.status_code == 400 and "user.agentUserGroup.agentUid" in r.json()["message"], r.text
    assert "security.task_uid_base" in r.json()["message"]
    half = {"user": {"username": "half", "agentUserGroup": {"agentUid": 1000, "agentGid": 1001}}, "password": ""}
    r = post(client, "/api/v1/users", half, admin)
    assert r.status_code == 400
    assert "user.agentUserGroup.agentUser" in r.json()["message"]
    assert login_status(client, "half", "") == 401  # not created


def test_admin_links_and_unlinks_an_agent_user_group(client: TestClient, admin: dict, alice: int) -> None:
    r = patch(client, alice, {"agentUserGroup": GROUP}, admin)
    assert r.status_code == 200, r.text
    assert r.json()["user"]["agentUserGroup"] == GROUP
    big = {"agentUid": 2_000_000_000, "agentGid": 2_000_000_000, "agentUser": "det-nobody", "agentGroup": "det.nobody"}
    assert patch(client, alice, {"agentUserGroup": big}, admin).json()["user"]["agentUserGroup"] == big
    assert patch(client, alice, {"agentUserGroup": None}, admin).json()["user"]["agentUserGroup"] == big  # left alone
    assert patch(client, alice, {"agentUserGroup": {}}, admin).json()["user"]["agentUserGroup"] is None  # unlinked


@pytest.mark.parametrize(
    ("group", "field"),
    [
        ({"agentUid": 1000, "agentGid": 1000}, "agentUserGroup.agentUser"),
        ({**GROUP, "agentUser": ""}, "agentUserGroup.agentUser"),
        ({**GROUP, "agentUid": -1}, "agentUserGroup.agentUid"),
        ({**GROUP, "agentGid": 2**31}, "agentUserGroup.agentGid"),
        ({**GROUP, "agentUser": "-dash"}, "agentUserGroup.agentUser"),
        ({**GROUP, "agentUser": "has space"}, "agentUserGroup.agentUser"),
        ({**GROUP, "agentGroup": "a:b"}, "agentUserGroup.agentGroup"),
        ({**GROUP, "agentGroup": "1234"}, "agentUserGroup.agentGroup"),
        # another user's own uid and gid (security.task_uid_base + their id)
        ({**GROUP, "agentUid": TASK_UID_BASE + 1}, "agentUserGroup.agentUid"),
        ({**GROUP, "agentGid": TASK_UID_BASE + TASK_UIDS - 1}, "agentUserGroup.agentGid"),
    ],
)
def test_bad_agent_user_groups_are_400_naming_the_field(
    client: TestClient, admin: dict, alice: int, group: dict, field: str
) -> None:
    r = patch(client, alice, {"agentUserGroup": group}, admin)
    assert r.status_code == 400, r.text
    assert field in r.json()["message"]
    assert get(client, alice, admin)["agentUserGroup"] is None


def test_only_admins_link_agent_users_even_their_own(
    client: TestClient, admin: dict, alice: int, alice_headers: dict, user: dict
) -> None:
    for headers in (alice_headers, user):
        r = patch(client, alice, {"agentUserGroup": GROUP}, headers)
        assert r.status_code == 403, r.text
        assert "admin" in r.json()["message"]
    # refused before the group is checked, as Determined: a non-admin learns nothing from it
    assert patch(client, alice, {"agentUserGroup": {"agentUid": 1}}, user).status_code == 403
    assert get(client, alice, admin)["agentUserGroup"] is None


def test_admin_renames_a_user(client: TestClient, admin: dict, alice: int) -> None:
    r = patch(client, alice, {"username": "rename-user-$64"}, admin)
    assert r.status_code == 200, r.text
    assert r.json()["user"]["username"] == "rename-user-$64"
    assert client.get("/api/v1/users/rename-user-$64/by-username", headers=admin).json()["user"]["id"] == alice
    assert login_status(client, "rename-user-$64", "pw-alice") == 200
    assert login_status(client, "alice", "pw-alice") == 401


def test_rename_to_a_taken_name_is_409_and_bad_names_400(client: TestClient, admin: dict, alice: int) -> None:
    r = patch(client, alice, {"username": "determined"}, admin)
    assert r.status_code == 409
    assert "username" in r.json()["message"]
    for bad in ("", "has space", "x" * 256, "tab\there"):
        r = patch(client, alice, {"username": bad}, admin)
        assert r.status_code == 400, bad
        assert "username" in r.json()["message"]
    assert get(client, alice, admin)["username"] == "alice"
    assert patch(client, alice, {"username": "alice"}, admin).status_code == 200  # its own name: no change


def test_users_cannot_rename_themselves_or_others(
    client: TestClient, alice: int, alice_headers: dict, admin: dict
) -> None:
    r = patch(client, alice, {"username": "alice2"}, alice_headers)
    assert r.status_code == 403
    assert get(client, alice, admin)["username"] == "alice"


def test_display_name_own_and_by_admin(
    client: TestClient, admin: dict, alice: int, alice_headers: dict, user: dict
) -> None:
    r = patch(client, alice, {"displayName": "renamed display-name"}, alice_headers)
    assert r.status_code == 200, r.text
    assert get(client, alice, user)["displayName"] == "renamed display-name"
    assert patch(client, alice, {"displayName": "  By Admin "}, admin).json()["user"]["displayName"] == "By Admin"
    r = patch(client, alice, {"displayName": "by another user"}, user)
    assert r.status_code == 403
    assert patch(client, alice, {"displayName": ""}, alice_headers).json()["user"]["displayName"] == ""


@pytest.mark.parametrize("name", ["Admin", "DETERMINED", "determined", "ADMIN", "caf\u00e9", "bell\x07"])
def test_reserved_similar_and_non_ascii_display_names_are_400(
    client: TestClient, alice: int, alice_headers: dict, name: str
) -> None:
    r = patch(client, alice, {"displayName": name}, alice_headers)
    assert r.status_code == 400, r.text
    assert "displayName" in r.json()["message"]


def test_display_name_may_not_copy_another_users(
    client: TestClient, admin: dict, alice: int, alice_headers: dict
) -> None:
    bob = make_user(client, admin, "bob")
    assert patch(client, bob, {"displayName": "Bobby"}, admin).status_code == 200
    assert patch(client, alice, {"displayName": "BOBBY"}, alice_headers).status_code == 400
    assert patch(client, alice, {"displayName": "Bob"}, alice_headers).status_code == 400  # bob's username
    assert patch(client, bob, {"displayName": "bobby"}, admin).status_code == 200  # their own, another case


def test_deactivate_ends_sessions_and_activate_lets_them_log_in(
    client: TestClient, admin: dict, alice: int, alice_headers: dict
) -> None:
    r = patch(client, alice, {"active": False}, admin)
    assert r.status_code == 200 and r.json()["user"]["active"] is False
    assert client.get("/api/v1/me", headers=alice_headers).status_code == 401
    r = post(client, "/api/v1/auth/login", {"username": "alice", "password": client_hash("pw-alice"), "isHashed": True})
    assert r.status_code == 403 and "user is not active" in r.json()["message"]
    assert patch(client, alice, {"active": True}, admin).json()["user"]["active"] is True
    assert login_status(client, "alice", "pw-alice") == 200


def test_users_list_filters_by_state_admin_and_name(client: TestClient, admin: dict, alice: int) -> None:
    patch(client, alice, {"active": False, "displayName": "Wonderland"}, admin)

    def names(query: str) -> list[str]:
        r = client.get(f"/api/v1/users{query}", headers=admin)
        assert r.status_code == 200, r.text
        return [u["username"] for u in r.json()["users"]]

    assert "alice" in names("") and "alice" in names("?active=false")
    assert "alice" not in names("?active=true")
    assert names("?admin=true") == ["admin"]
    assert names("?name=WONDER") == ["alice"]  # display name, any case
    assert names("?name=dEtErM") == ["determined"]
    assert names("?sortBy=SORT_BY_USER_NAME&orderBy=ORDER_BY_DESC") == ["determined", "alice", "admin"]
    r = client.get("/api/v1/users?offset=1&limit=1", headers=admin).json()
    assert len(r["users"]) == 1 and r["pagination"]["total"] == 3 and r["pagination"]["endIndex"] == 2
    assert client.get("/api/v1/users?sortBy=SORT_BY_NOPE", headers=admin).status_code == 400


def test_users_cannot_change_their_own_admin_or_active(
    client: TestClient, admin: dict, alice: int, alice_headers: dict
) -> None:
    for body in ({"admin": True}, {"active": False}, {"remote": False}):
        r = patch(client, alice, body, alice_headers)
        assert r.status_code == 403, body
    assert get(client, alice, admin)["admin"] is False


def test_user_edit_in_one_body_as_det_user_edit(client: TestClient, admin: dict, alice: int) -> None:
    body = {"displayName": "New Name", "remote": False, "active": True, "username": "alice-new", "admin": True}
    r = patch(client, alice, body, admin)
    assert r.status_code == 200, r.text
    got = r.json()["user"]
    assert (got["displayName"], got["username"], got["active"], got["remote"], got["admin"]) == (
        "New Name",
        "alice-new",
        True,
        False,
        True,
    )
    r = patch(client, alice, {"remote": True}, admin)
    assert r.status_code == 400 and "remote" in r.json()["message"]


def test_a_refused_field_changes_nothing_else(client: TestClient, admin: dict, alice: int, alice_headers: dict) -> None:
    r = patch(client, alice, {"displayName": "fine", "admin": True}, alice_headers)
    assert r.status_code == 403
    assert get(client, alice, admin)["displayName"] == ""
    r = patch(client, alice, {"displayName": "fine", "agentUserGroup": {"agentUid": 1}}, admin)
    assert r.status_code == 400
    assert get(client, alice, admin)["displayName"] == ""


@pytest.mark.parametrize("hashed", [True, False])
def test_admin_sets_a_password_det_style(
    client: TestClient, admin: dict, alice: int, alice_headers: dict, hashed: bool
) -> None:
    sent = client_hash("newPass123!") if hashed else "newPass123!"
    r = patch(client, alice, {"password": sent, "isHashed": hashed}, admin)
    assert r.status_code == 200, r.text
    assert login_status(client, "alice", "pw-alice") == 401
    assert login_status(client, "alice", "newPass123!") == 200
    assert client.get("/api/v1/me", headers=alice_headers).status_code == 401  # her sessions end
    # pedl's own route still sets it, and the det-set password then stops working
    r = post(client, f"/api/v1/users/{alice}/password", {"password": client_hash("third"), "isHashed": True}, admin)
    assert r.status_code == 200
    assert login_status(client, "alice", "newPass123!") == 401
    assert login_status(client, "alice", "third") == 200


def test_own_password_change_keeps_this_session(client: TestClient, alice: int, alice_headers: dict) -> None:
    other = bearer(login(client, "alice", "pw-alice"))
    r = patch(client, alice, {"password": client_hash("newPass123!"), "isHashed": True}, alice_headers)
    assert r.status_code == 200, r.text
    assert client.get("/api/v1/me", headers=alice_headers).status_code == 200
    assert client.get("/api/v1/me", headers=other).status_code == 401
    assert login_status(client, "alice", "newPass123!") == 200


def test_own_password_change_needs_a_fresh_login(
    client: TestClient, clock: ManualClock, alice: int, alice_headers: dict
) -> None:
    clock.advance(3600)
    r = patch(client, alice, {"password": client_hash("stolen"), "isHashed": True}, alice_headers)
    assert r.status_code == 403
    assert "log in again" in r.json()["message"]
    assert login_status(client, "alice", "pw-alice") == 200


def test_nobody_else_changes_a_users_password(client: TestClient, admin: dict, alice: int, user: dict) -> None:
    r = patch(client, alice, {"password": client_hash("hijack"), "isHashed": True}, user)
    assert r.status_code == 403
    assert login_status(client, "alice", "pw-alice") == 200


def test_patch_unknown_user_is_404_and_task_tokens_are_refused(client: TestClient, admin: dict) -> None:
    assert patch(client, 9999, {"displayName": "x"}, admin).status_code == 404
    assert client.patch("/api/v1/users/1", content="{}").status_code == 401


def test_a_linked_users_tasks_start_as_their_agent_user(
    client: TestClient, admin: dict, alice: int, alice_headers: dict, agent
) -> None:
    from tests.master.fakes import SINGLE_CONFIG, create_experiment

    assert patch(client, alice, {"agentUserGroup": GROUP}, admin).status_code == 200
    create_experiment(client, alice_headers, SINGLE_CONFIG)
    (task,) = agent.start_all()
    assert task.message["run_as"] == {
        "uid": 1000,
        "gid": 1001,
        "user": "username",
        "group": "groupname",
        "derived": False,
    }


def test_unlinked_users_tasks_each_run_as_a_uid_of_their_own(
    client: TestClient, app, admin: dict, alice: int, alice_headers: dict, agent
) -> None:
    """Not one shared uid (default_task's, or the agent's root): bob's task could read alice's task's
    /proc/<pid>/environ, her DET_USER_TOKEN among it. Per user, not per task: a trial's checkpoints are
    read by the next trial and deleted by the checkpoint GC task, all of them the owner's."""
    from pedl.config.security_config import TASK_UID_BASE, DefaultTaskUser
    from tests.master.fakes import SINGLE_CONFIG, create_experiment

    bob = make_user(client, admin, "bob", "pw-bob")
    bob_headers = bearer(login(client, "bob", "pw-bob"))
    app.state.ctx.config.security.default_task = DefaultTaskUser(
        user="nobody", uid=65534, group="nogroup", gid=65534
    )  # Determined's key: not shared now
    seen = {}
    for who, headers, user_id in (
        ("alice", alice_headers, alice),
        ("bob", bob_headers, bob),
        ("alice", alice_headers, alice),
    ):
        create_experiment(client, headers, SINGLE_CONFIG)
        (task,) = agent.start_all()
        uid = TASK_UID_BASE + user_id
        assert task.message["run_as"] == {
            "uid": uid,
            "gid": uid,
            "user": f"pedl-user-{who}",
            "group": f"pedl-user-{who}",
            "derived": True,
        }
        seen.setdefault(who, set()).add(uid)
        agent.exit(task.allocation_id, 0)
    assert len(seen["alice"]) == 1 and seen["alice"].isdisjoint(seen["bob"])  # her trials share hers; bob has his
    app.state.ctx.config.security.task_uid_base = None  # Determined's behaviour: default_task, for every user
    create_experiment(client, bob_headers, SINGLE_CONFIG)
    (task,) = agent.start_all()
    assert task.message["run_as"] == {
        "uid": 65534,
        "gid": 65534,
        "user": "nobody",
        "group": "nogroup",
        "derived": False,
    }
    agent.exit(task.allocation_id, 0)
    app.state.ctx.config.security.default_task = None
    create_experiment(client, bob_headers, SINGLE_CONFIG)
    (task,) = agent.start_all()
    assert task.message["run_as"] is None  # the agent's own user


def test_an_admin_cannot_lock_themselves_out(client: TestClient, admin: dict) -> None:
    me = client.get("/api/v1/me", headers=admin).json()["user"]["id"]
    for body, field in (({"active": False}, "active"), ({"admin": False}, "admin")):
        r = patch(client, me, body, admin)
        assert r.status_code == 400 and field in r.json()["message"]
    assert client.get("/api/v1/me", headers=admin).json()["user"]["admin"] is True
    assert patch(client, me, {"active": True, "admin": True}, admin).status_code == 200  # no change: fine
