"""A shell's sshd setup (pedl/launch/shell_sshd.py): its config takes the shell's key for the task's
user only, and the key carries the task's environment into sessions where it can be written."""

from __future__ import annotations

from pedl.launch.shell_sshd import PUBLIC_KEY_VAR, authorized_keys, environment_options, sshd_config

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMx pedl-shell"


def _settings(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines())


def test_the_config_takes_public_keys_from_its_own_file_for_the_tasks_user_only() -> None:
    cfg = _settings(sshd_config("/w/.pedl/sshd", "alice", root=False))
    assert cfg["AuthorizedKeysFile"] == "/w/.pedl/sshd/authorized_keys"
    assert cfg["HostKey"] == "/w/.pedl/sshd/host_ed25519_key"
    assert cfg["AllowUsers"] == "alice"
    assert cfg["PasswordAuthentication"] == cfg["ChallengeResponseAuthentication"] == "no"
    assert cfg["HostbasedAuthentication"] == cfg["UsePAM"] == "no"
    assert cfg["PubkeyAuthentication"] == "yes" and cfg["StrictModes"] == "no"
    assert "PermitRootLogin" not in cfg
    assert _settings(sshd_config("/w", "root", root=True))["PermitRootLogin"] == "prohibit-password"


def test_the_tasks_variables_ride_on_the_key_and_unwritable_ones_are_named() -> None:
    env = {
        "DET_MASTER": "http://m:8080",
        "PATH": "/venv/bin:/usr/bin",
        "HOME": "/root",
        "SSH_AUTH_SOCK": "/s",
        PUBLIC_KEY_VAR: KEY,
        "QUOTED": 'a"b',
        "MULTI": "a\nb",
        "bad-name": "x",
        "EMPTY": "",
    }
    options, skipped = environment_options(env)
    assert (
        options == 'environment="DET_MASTER=http://m:8080",environment="EMPTY=",environment="PATH=/venv/bin:/usr/bin"'
    )
    assert skipped == ["MULTI", "QUOTED"]
    line, _ = authorized_keys(KEY + "\n", env)
    assert line == f"{options} {KEY}\n"
    assert authorized_keys(KEY, {})[0] == f"{KEY}\n"
