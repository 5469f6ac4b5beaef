"""`pedl shell start|open` against a real master app whose tasks a FakeAgent runs, with a fake `ssh` on
PATH that records how it was run: the shell's private key in a 0600 file (removed afterwards), ssh's
ProxyCommand running `pedl shell tunnel %h` against the same master as the same user, and ssh's exit
status passed on; `--show-ssh-command` prints the command and keeps the key."""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path

import pytest

from pedl.cli.auth_store import AuthStore
from pedl.cli.client import MasterClient
from pedl.cli.shells import proxy_command
from pedl.master.db import models
from tests.cli.ntsc_live import Live

FAKE_SSH = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
key = args[args.index("-i") + 1]
with open(os.environ["SSH_RECORD"], "w") as f:
    json.dump({"argv": args, "key_mode": oct(os.stat(key).st_mode & 0o777), "key": open(key).read()}, f)
sys.exit(7)
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    record = tmp_path / "ssh.json"
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    monkeypatch.setenv("SSH_RECORD", str(record))
    return record


KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n-----END OPENSSH PRIVATE KEY-----"


def give_key(live: Live, shell_id: str) -> None:
    """The key pair the master keeps for a shell (its owner reads the private one)."""
    with live.ctx.db.session() as s:
        s.get(models.GenericTask, shell_id).secrets = {"private_key": KEY, "public_key": "ssh-ed25519 AAAA"}


def ready_shell(live: Live) -> str:
    shell_id = live.launch("shells")["id"]
    give_key(live, shell_id)
    [task] = live.start_all()
    live.serve(task, 2222)
    return shell_id


def test_open_runs_ssh_through_the_tunnel_with_the_key_in_a_private_file(live: Live, fake_ssh: Path) -> None:
    shell_id = ready_shell(live)
    assert live.get(f"/api/v1/shells/{shell_id}")["shell"]["privateKey"] == KEY
    result = live.cli("shell", "open", shell_id, "--", "-L", "8888:localhost:8888")
    assert result.exit_code == 7, result.output  # ssh's own status
    got = json.loads(fake_ssh.read_text())
    argv = got["argv"]
    assert got["key_mode"] == "0o600" and got["key"] == KEY + "\n"
    assert not Path(argv[argv.index("-i") + 1]).exists()  # removed once ssh is done
    user = (live.get(f"/api/v1/shells/{shell_id}")["shell"].get("agentUserGroup") or {}).get("user") or "root"
    assert argv[-3:] == [f"{user}@{shell_id}", "-L", "8888:localhost:8888"]
    proxy = next(a for a in argv if a.startswith("ProxyCommand="))
    words = shlex.split(proxy.removeprefix("ProxyCommand="))
    assert words[-3:] == ["shell", "tunnel", "%h"]
    assert words[words.index("--master") + 1] == live.url and words[words.index("--user") + 1] == "determined"
    assert "StrictHostKeyChecking=no" in argv and "UserKnownHostsFile=/dev/null" in argv
    assert f"pedl shell open {shell_id}" in result.stderr


def test_start_waits_until_ready_then_opens(live: Live, fake_ssh: Path) -> None:
    tasks = []

    def ready() -> None:
        tasks.extend(live.start_all())
        give_key(live, tasks[0].task_id)
        live.serve(tasks[0], 2222)

    live.between(ready)
    result = live.cli("shell", "start")
    assert result.exit_code == 7, result.output
    assert json.loads(fake_ssh.read_text())["argv"][-1].endswith(f"@{tasks[0].task_id}")


def test_show_ssh_command_keeps_the_key_and_runs_nothing(live: Live, fake_ssh: Path, isolated_config: Path) -> None:
    shell_id = ready_shell(live)
    result = live.cli("shell", "open", "--show-ssh-command", shell_id)
    assert result.exit_code == 0, result.output
    key = isolated_config / "shell" / shell_id / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    argv = shlex.split(result.stdout)
    assert argv[0] == "ssh" and argv[argv.index("-i") + 1] == str(key)
    assert not fake_ssh.exists()


def test_another_users_shell_gives_no_key(live: Live, fake_ssh: Path) -> None:
    shell_id = ready_shell(live)
    admin = live.http.post("/api/v1/auth/login", json={"username": "admin", "password": ""}).json()["token"]
    r = live.http.post(
        "/api/v1/users",
        json={"user": {"username": "eve", "active": True}, "password": ""},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert r.status_code == 200, r.text
    eve = live.http.post("/api/v1/auth/login", json={"username": "eve", "password": ""}).json()["token"]
    AuthStore().set_token(MasterClient(live.url).url, "eve", eve)
    result = live.cli("-u", "eve", "shell", "open", shell_id)
    assert result.exit_code == 1 and "sent no private key" in result.stderr, result.output
    assert not fake_ssh.exists()


def test_the_proxy_command_escapes_percent_signs(tmp_path: Path) -> None:
    client = MasterClient("http://127.0.0.1:8080", user="determined")
    cert = tmp_path / "100%" / "ca.pem"
    words = proxy_command(client, str(cert)).split(" ")
    assert words[-1] == "%h" and str(cert).replace("%", "%%") in words
