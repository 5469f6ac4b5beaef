"""`pedl user login|logout|whoami|change-password|create|list|edit|link-with-agent-user`, with
Determined's hashed passwords. Tokens live in the auth store; `login` makes the user the master's
active user."""

from __future__ import annotations

import typer

from pedl.cli.auth_store import salt_and_hash
from pedl.cli.client import MasterClient
from pedl.cli.output import JsonFlag, fail, fmt_time, print_json, print_table, say
from pedl.cli.state import client_of, state_of
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Log in and manage users.")


def _prompt_password(prompt: str) -> str:
    return typer.prompt(prompt, hide_input=True, default="", show_default=False)


def _new_password(username: str) -> str:
    first = _prompt_password(f"New password for user '{username}'")
    second = _prompt_password("Confirm password")
    if first != second:
        fail("passwords do not match")
    return first


def user_id_of(client: MasterClient, username: str) -> int:
    """The id of `username`: from /api/v1/me for oneself, else from the user list."""
    me = client.get("/api/v1/me").get("user") or {}
    if me.get("username") == username and me.get("id") is not None:
        return int(me["id"])
    for user in client.paginate("/api/v1/users", "users"):
        if user.get("username") == username and user.get("id") is not None:
            return int(user["id"])
    raise NotFound(f"no user named '{username}'")


@app.command("login")
def login(
    ctx: typer.Context,
    username: str | None = typer.Argument(None),
    console: str | None = typer.Option(
        None,
        "--console",
        metavar="SOCKET",
        help="log in through the master's console socket (DATA_DIR/console.sock, on the master's host, as "
        "its user or root): never held up by others' failed logins",
    ),
) -> None:
    """Log in and make USERNAME the active user of this master."""
    state = state_of(ctx)
    client = client_of(ctx) if console is None else MasterClient(state.master, user=state.user, console=console)
    if username is None:
        username = str(typer.prompt("Username"))
    password = _prompt_password(f"Password for user '{username}'")
    try:
        client.login(username, password)
    finally:
        if console is not None:
            client.close()
    client.store.set_active_user(client.url, username)
    say(f"Logged in as '{username}' at {client.url}")


@app.command("logout")
def logout(ctx: typer.Context) -> None:
    """End the session of the active user (or -u USER) and forget its token."""
    client = client_of(ctx)
    username = client.logout()
    say(f"Logged out '{username}' at {client.url}")


@app.command("whoami")
def whoami(ctx: typer.Context) -> None:
    """Print the user this CLI acts as (GET /api/v1/me)."""
    user = client_of(ctx).get("/api/v1/me").get("user") or {}
    say(f"You are logged in as user '{user.get('username', '?')}'")


@app.command("change-password")
def change_password(ctx: typer.Context, username: str | None = typer.Argument(None)) -> None:
    """Set USERNAME's password (default: your own), asking for it twice. Your own needs your current
    password too; the master then ends your other sessions."""
    client = client_of(ctx)
    target = username or client.username
    own = target == client.username
    body: dict = {}
    if own:
        body["oldPassword"] = salt_and_hash(_prompt_password(f"Current password for user '{target}'"))
    password = _new_password(target)
    user_id = user_id_of(client, target)
    client.post(f"/api/v1/users/{user_id}/password", {"password": salt_and_hash(password), "isHashed": True, **body})
    say(f"Changed the password of '{target}'")
    if own:
        client.login(target, password)  # the old session may be revoked; keep working
        client.store.set_active_user(client.url, target)


@app.command("create")
def create(
    ctx: typer.Context,
    username: str = typer.Argument(...),
    admin: bool = typer.Option(False, "--admin", help="give the user admin rights"),
    password: str | None = typer.Option(None, "--password", help="initial password (asked if absent)"),
) -> None:
    """Create a user (POST /api/v1/users)."""
    client = client_of(ctx)
    if password is None:
        password = _new_password(username)
    body = {
        "user": {"username": username, "admin": admin, "active": True},
        "password": salt_and_hash(password),
        "isHashed": True,
    }
    created = client.post("/api/v1/users", body).get("user") or {}
    say(
        f"Created user '{created.get('username', username)}'"
        + (f" with id {created['id']}" if created.get("id") is not None else "")
    )


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List users (GET /api/v1/users) with the agent user each one's tasks run as."""
    users = client_of(ctx).paginate("/api/v1/users", "users")
    if as_json:
        print_json(users)
        return
    print_table(
        ["ID", "Username", "Display name", "Admin", "Active", "Agent user", "Last login"],
        [
            [
                u.get("id"),
                u.get("username"),
                u.get("displayName"),
                u.get("admin"),
                u.get("active"),
                _agent_user(u.get("agentUserGroup")),
                fmt_time(u.get("lastAuthAt")),
            ]
            for u in users
        ],
    )


def _agent_user(group: dict | None) -> str:
    if not group:
        return ""
    return f"{group.get('agentUser')}({group.get('agentUid')}):{group.get('agentGroup')}({group.get('agentGid')})"


@app.command("edit")
def edit(
    ctx: typer.Context,
    username: str = typer.Argument(...),
    new_username: str | None = typer.Option(None, "--username", help="rename the user (admins)"),
    display_name: str | None = typer.Option(None, "--display-name", help="'' clears it"),
    active: bool | None = typer.Option(None, "--active/--inactive", help="(admins) let the user log in, or not"),
    admin: bool | None = typer.Option(None, "--admin/--no-admin", help="(admins) grant or remove admin rights"),
) -> None:
    """Change a user's fields (PATCH /api/v1/users/ID): admins any user's, a user their own display name."""
    client = client_of(ctx)
    body = {
        k: v
        for k, v in (("username", new_username), ("displayName", display_name), ("active", active), ("admin", admin))
        if v is not None
    }
    if not body:
        fail("nothing to change: give --username, --display-name, --active/--inactive or --admin/--no-admin")
    client.request("PATCH", f"/api/v1/users/{user_id_of(client, username)}", json=body)
    say(f"Changed {', '.join(body)} of '{username}'")


@app.command("link-with-agent-user")
def link_with_agent_user(
    ctx: typer.Context,
    username: str = typer.Argument(...),
    agent_uid: int | None = typer.Option(None, "--agent-uid", help="the uid the user's tasks run as"),
    agent_gid: int | None = typer.Option(None, "--agent-gid", help="the gid the user's tasks run as"),
    agent_user: str | None = typer.Option(None, "--agent-user", help="the user name tasks see (id -u -n)"),
    agent_group: str | None = typer.Option(None, "--agent-group", help="the group name tasks see (id -g -n)"),
    unlink: bool = typer.Option(False, "--unlink", help="run the user's tasks as the agents' default again"),
) -> None:
    """Admins: link a user with the uid, gid, user and group its tasks run as on the agents."""
    client = client_of(ctx)
    values = {"agentUid": agent_uid, "agentGid": agent_gid, "agentUser": agent_user, "agentGroup": agent_group}
    if unlink:
        group: dict = {}
    elif any(v is None for v in values.values()):
        fail("give --agent-uid, --agent-gid, --agent-user and --agent-group (or --unlink)")
    else:
        group = values
    client.request("PATCH", f"/api/v1/users/{user_id_of(client, username)}", json={"agentUserGroup": group})
    say(
        f"Unlinked '{username}'"
        if unlink
        else f"Linked '{username}' with agent user {agent_user} ({agent_uid}) and group {agent_group} ({agent_gid})"
    )
