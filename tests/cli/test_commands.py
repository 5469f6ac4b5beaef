"""`pedl cmd run|list|logs|kill` against a real master app whose tasks a FakeAgent runs: what run
sends, the progress it shows while the command waits, its output and exit status; list, logs and kill.
(tests/e2e/test_ntsc_cli_e2e.py runs real commands on a real agent.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.ntsc_live import Live

COMMAND_ID_LEN = 36


def test_run_waits_while_queued_then_prints_the_output_and_exits_with_the_code(live: Live, tmp_path: Path) -> None:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "data.txt").write_text("payload")
    started = []

    def start() -> None:
        [task] = live.start_all()
        started.append(task)
        live.log(task, "hello", "world")
        live.agent.exit(task.allocation_id, 4)

    live.between(start)
    result = live.cli(
        "cmd", "run", "--config", "description=greeter", "-c", str(tmp_path / "ctx"), "sh", "-c", "echo hello; exit 4"
    )
    assert result.exit_code == 4, result.output
    assert result.stdout.splitlines()[:2] == ["hello", "world"]
    [task] = started
    assert task.message["entrypoint"] == ["sh", "-c", "echo hello; exit 4"]  # -c after CMD is the command's
    assert f"Launched command {task.task_id} (greeter)" in result.stderr
    assert f"Command {task.task_id} is QUEUED" in result.stderr  # the progress while it waited
    assert "exited with code 4" in result.stderr
    cfg = live.get(f"/api/v1/commands/{task.task_id}")["config"]
    assert cfg["description"] == "greeter"


def test_run_detached_prints_the_id_and_list_logs_kill_act_on_it(live: Live) -> None:
    result = live.cli("cmd", "run", "-d", "sleep", "100")
    assert result.exit_code == 0, result.output
    cmd_id = result.stdout.strip()
    assert len(cmd_id) == COMMAND_ID_LEN
    [task] = live.start_all()
    live.log(task, "still sleeping")
    listed = live.cli("cmd", "list")
    assert cmd_id in listed.stdout and "RUNNING" in listed.stdout, listed.output
    assert "still sleeping" in live.cli("cmd", "logs", cmd_id).stdout
    killed = live.cli("cmd", "kill", cmd_id)
    assert killed.exit_code == 0 and f"Killed command {cmd_id}" in killed.stdout, killed.output
    live.agent.exit(task.allocation_id, 137, "killed")
    [ended] = json.loads(live.cli("cmd", "list", "-a", "--json").stdout)  # listed a day after its end
    assert ended["id"] == cmd_id and ended["state"] == "STATE_TERMINATED"


def test_list_shows_only_mine_unless_all(live: Live) -> None:
    admin = live.http.post("/api/v1/auth/login", json={"username": "admin", "password": ""}).json()["token"]
    theirs = live.http.post(
        "/api/v1/commands", json={"config": {"entrypoint": "sleep 1"}}, headers={"Authorization": f"Bearer {admin}"}
    ).json()["command"]["id"]
    mine = live.launch("commands", config={"entrypoint": "sleep 1"})["id"]
    shown = live.cli("cmd", "list").stdout
    assert mine in shown and theirs not in shown
    everyone = live.cli("cmd", "list", "-a").stdout
    assert mine in everyone and theirs in everyone


def test_kill_of_another_users_command_is_refused_and_the_others_still_killed(live: Live) -> None:
    admin = live.http.post("/api/v1/auth/login", json={"username": "admin", "password": ""}).json()["token"]
    theirs = live.http.post(
        "/api/v1/commands", json={"config": {"entrypoint": "sleep 1"}}, headers={"Authorization": f"Bearer {admin}"}
    ).json()["command"]["id"]
    mine = live.launch("commands", config={"entrypoint": "sleep 1"})["id"]
    result = live.cli("cmd", "kill", theirs, mine)
    assert result.exit_code == 1
    assert f"command {theirs}:" in result.stderr and f"Killed command {mine}" in result.stdout, result.output


def test_bad_arguments_are_refused_naming_them(live: Live, tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- not a mapping\n")
    cases = [
        (("cmd", "run"), "CMD"),
        (("cmd", "run", "--config", "=1", "true"), "--config"),
        (("cmd", "run", "--config-file", str(tmp_path / "list.yaml"), "true"), "--config-file"),
        (("cmd", "run", "--context", str(tmp_path / "nope"), "true"), "--context"),
        (("cmd", "run", "--workspace", "nope", "true"), "--workspace"),
        (("cmd", "run", "--workspace", "12345", "true"), "workspaceId"),
        (("cmd", "run", "--config", "resources.slots=-1", "--config", "bogus=1", "true"), "resources.slots"),
        (("cmd", "run", "--config", "resources.slots=-1", "--config", "bogus=1", "true"), "bogus"),
        (("cmd", "logs", "abc"), "'abc'"),
        (("cmd", "kill", "abc"), "'abc'"),
    ]
    for args, named in cases:
        result = live.cli(*args)
        assert result.exit_code != 0 and named in result.output, (args, result.output)
    assert live.get("/api/v1/commands")["commands"] == []  # nothing was started


def test_a_context_over_the_limit_is_refused_naming_it(live: Live, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PEDL_MAX_MODEL_DEF_BYTES", "10")
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "big.bin").write_bytes(b"x" * 100)
    result = live.cli("cmd", "run", "-c", str(tmp_path / "ctx"), "true")
    assert result.exit_code == 1 and f"--context {tmp_path / 'ctx'}: the directory" in result.stderr, result.output
    assert "over the limit" in result.stderr
