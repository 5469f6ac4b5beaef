"""`pedl user login|logout|whoami|change-password|create|list`."""

from __future__ import annotations

import json

from pedl.cli.auth_store import AuthStore, salt_and_hash
from tests.cli.fake_master import FakeMaster, page


def test_login_prompts_hashes_stores_and_activates(cli, master: FakeMaster) -> None:
    master.passwords["alice"] = "Secret123"
    result = cli("user", "login", "alice", input="Secret123\n")
    assert result.exit_code == 0, result.output
    assert "Secret123" not in result.output  # the prompt hides the password
    (req,) = master.calls("POST", "/api/v1/auth/login")
    assert req.json == {"username": "alice", "password": salt_and_hash("Secret123"), "isHashed": True}
    store = AuthStore()
    assert store.active_user(master.url) == "alice"
    token = store.token(master.url, "alice")
    assert master.tokens[token] == "alice"
    # later commands act as alice with her token, without logging in again
    who = cli("user", "whoami")
    assert who.stdout.strip() == "You are logged in as user 'alice'"
    assert master.calls("GET", "/api/v1/me")[-1].headers["authorization"] == f"Bearer {token}"


def test_login_asks_for_the_username(cli, master: FakeMaster) -> None:
    master.passwords["bob"] = "pw"
    result = cli("user", "login", input="bob\npw\n")
    assert result.exit_code == 0, result.output
    assert AuthStore().active_user(master.url) == "bob"


def test_bad_credentials(cli, master: FakeMaster) -> None:
    master.passwords["alice"] = "right"
    result = cli("user", "login", "alice", input="wrong\n")
    assert result.exit_code == 1
    assert "invalid credentials" in result.output
    assert AuthStore().token(master.url, "alice") is None


def test_whoami_auto_logs_in_as_determined(cli, master: FakeMaster) -> None:
    result = cli("user", "whoami")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "You are logged in as user 'determined'"


def test_logout_forgets_the_token_and_the_active_user(cli, master: FakeMaster) -> None:
    master.passwords["alice"] = "pw"
    cli("user", "login", "alice", input="pw\n")
    token = AuthStore().token(master.url, "alice")
    result = cli("user", "logout")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", "/api/v1/auth/logout")
    assert req.headers["authorization"] == f"Bearer {token}"
    assert AuthStore().token(master.url, "alice") is None
    assert AuthStore().active_user(master.url) is None


def test_change_own_password_posts_the_hash_and_logs_in_again(cli, master: FakeMaster) -> None:
    master.passwords["alice"] = "old"
    cli("user", "login", "alice", input="old\n")

    def set_password(req):
        master.passwords["alice"] = "New-pass-1"
        return {}

    master.route("POST", "/api/v1/users/2/password", set_password)
    master.route("GET", "/api/v1/users", page("users", [master.user(u) for u in sorted(master.passwords)]))
    assert master.user("alice")["id"] == 2
    result = cli("user", "change-password", input="old\nNew-pass-1\nNew-pass-1\n")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", "/api/v1/users/2/password")
    assert req.json == {"password": salt_and_hash("New-pass-1"), "isHashed": True, "oldPassword": salt_and_hash("old")}
    assert master.calls("POST", "/api/v1/auth/login")[-1].json["password"] == salt_and_hash("New-pass-1")


def test_change_password_of_another_user_looks_up_the_id(cli, master: FakeMaster) -> None:
    master.passwords["carol"] = ""
    master.route("GET", "/api/v1/users", page("users", [master.user(u) for u in sorted(master.passwords)]))
    carol_id = master.user("carol")["id"]
    master.route("POST", f"/api/v1/users/{carol_id}/password", {})
    result = cli("user", "change-password", "carol", input="x1\nx1\n")
    assert result.exit_code == 0, result.output
    assert len(master.calls("POST", f"/api/v1/users/{carol_id}/password")) == 1
    assert AuthStore().active_user(master.url) is None  # no re-login as carol


def test_change_password_mismatch(cli, master: FakeMaster) -> None:
    result = cli("user", "change-password", input="current\na\nb\n")
    assert result.exit_code == 1
    assert "passwords do not match" in result.output
    assert not any("/password" in r.path for r in master.requests)


def test_create_user(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/users", lambda req: {"user": {**req.json["user"], "id": 9}})
    result = cli("user", "create", "dave", "--admin", "--password", "Pw-12345")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", "/api/v1/users")
    assert req.json == {
        "user": {"username": "dave", "admin": True, "active": True},
        "password": salt_and_hash("Pw-12345"),
        "isHashed": True,
    }
    assert "Created user 'dave' with id 9" in result.stdout


def test_create_user_prompts_for_the_password(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/users", lambda req: {"user": req.json["user"]})
    result = cli("user", "create", "erin", input="pw\npw\n")
    assert result.exit_code == 0, result.output
    assert master.calls("POST", "/api/v1/users")[0].json["password"] == salt_and_hash("pw")


def test_list_users(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/users", page("users", [master.user("admin"), master.user("determined")]))
    result = cli("user", "list", "--json")
    assert result.exit_code == 0, result.output
    assert [u["username"] for u in json.loads(result.stdout)] == ["admin", "determined"]
    table = cli("user", "list")
    assert "admin" in table.stdout and "Username" in table.stdout


def test_list_users_shows_their_agent_user(cli, master: FakeMaster) -> None:
    linked = {
        **master.user("admin"),
        "agentUserGroup": {"agentUid": 200, "agentGid": 300, "agentUser": "someuser", "agentGroup": "somegroup"},
    }
    master.route("GET", "/api/v1/users", page("users", [linked, master.user("determined")]))
    table = cli("user", "list")
    assert table.exit_code == 0, table.output
    assert "someuser(200):somegroup(300)" in table.stdout


def _users_with_ids(master: FakeMaster) -> None:
    master.route(
        "GET", "/api/v1/users", page("users", [{**master.user("admin"), "id": 1}, {**master.user("bob"), "id": 7}])
    )
    master.route("PATCH", "/api/v1/users/7", lambda req: {"user": {**master.user("bob"), "id": 7}})


def test_edit_sends_only_the_fields_given(cli, master: FakeMaster) -> None:
    _users_with_ids(master)
    result = cli("user", "edit", "bob", "--display-name", "Bob B", "--inactive")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("PATCH", "/api/v1/users/7")
    assert req.json == {"displayName": "Bob B", "active": False}
    assert cli("user", "edit", "bob").exit_code == 1  # nothing to change


def test_link_with_agent_user_needs_all_four_or_unlink(cli, master: FakeMaster) -> None:
    _users_with_ids(master)
    result = cli(
        "user",
        "link-with-agent-user",
        "bob",
        "--agent-uid",
        "200",
        "--agent-gid",
        "300",
        "--agent-user",
        "someuser",
        "--agent-group",
        "somegroup",
    )
    assert result.exit_code == 0, result.output
    assert master.calls("PATCH", "/api/v1/users/7")[0].json == {
        "agentUserGroup": {"agentUid": 200, "agentGid": 300, "agentUser": "someuser", "agentGroup": "somegroup"}
    }
    assert cli("user", "link-with-agent-user", "bob", "--agent-uid", "200").exit_code == 1
    assert cli("user", "link-with-agent-user", "bob", "--unlink").exit_code == 0
    assert master.calls("PATCH", "/api/v1/users/7")[-1].json == {"agentUserGroup": {}}
