"""`pedl agent run|list`, `pedl slot list` and `pedl task list`."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.agent.options import AgentOptions
from pedl.cli.main import app
from tests.cli.fake_master import FakeMaster

AGENT = {
    "id": "a1",
    "version": "0.1.0",
    "registeredTime": "2025-01-01T00:00:00Z",
    "slots": {
        "s0": {
            "id": "s0",
            "enabled": True,
            "draining": False,
            "device": {"type": "TYPE_CUDA", "brand": "H100"},
            "container": {"id": "alloc-1", "state": "STATE_RUNNING"},
        },
        "s1": {"id": "s1", "enabled": True, "draining": False, "device": {"type": "TYPE_CUDA", "brand": "H100"}},
    },
    "containers": {},
    "resourcePools": ["default"],
    "enabled": True,
    "draining": False,
    "addresses": ["10.0.0.1"],
    "slotStats": {"typeStats": {}, "brandStats": {}},
}
TASKS = {
    "allocationIdToSummary": {
        "alloc-1": {
            "taskId": "task-1",
            "allocationId": "alloc-1",
            "name": "Trial 1 (Experiment 1)",
            "slotsNeeded": 1,
            "registeredTime": "2025-01-01T00:00:00Z",
            "resources": [{"containerId": "alloc-1"}],
            "resourcePool": "default",
            "priority": 42,
            "schedulerType": "priority",
            "proxyPorts": [],
        }
    }
}


@pytest.fixture
def agents_run(monkeypatch: pytest.MonkeyPatch) -> list[AgentOptions]:
    runs: list[AgentOptions] = []
    fake = types.ModuleType("pedl.agent.daemon")
    fake.run_agent = runs.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pedl.agent.daemon", fake)
    return runs


def test_agent_run_passes_options(agents_run: list[AgentOptions], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "run",
            "--master",
            "10.1.2.3:8080",
            "--id",
            "gpu-1",
            "--resource-pool",
            "big",
            "--slots",
            "2",
            "--token",
            "sekret",
            "--work-dir",
            str(tmp_path / "w"),
        ],
    )
    assert result.exit_code == 0, result.output
    (opts,) = agents_run
    assert (opts.master_url, opts.agent_id, opts.resource_pool, opts.slots, opts.token) == (
        "http://10.1.2.3:8080",
        "gpu-1",
        "big",
        2,
        "sekret",
    )
    assert opts.work_path == tmp_path / "w"


def test_a_token_on_the_command_line_is_taken_with_a_warning(
    agents_run: list[AgentOptions], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    result = CliRunner().invoke(
        app, ["agent", "run", "--master", "m:8080", "--token", "sekret", "--work-dir", str(tmp_path / "w")]
    )
    assert result.exit_code == 0, result.output
    assert agents_run[0].token == "sekret"
    assert "every process of this host can read" in caplog.text and "--token-file" in caplog.text


def test_agent_run_takes_the_token_from_a_file_or_runs_on_its_credential(
    agents_run: list[AgentOptions], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("PEDL_AGENT_TOKEN", raising=False)
    token = tmp_path / "token"
    token.write_text("from-a-file\n")
    token.chmod(0o600)
    work = tmp_path / "w"
    result = CliRunner().invoke(
        app, ["agent", "run", "--master", "m:8080", "--token-file", str(token), "--work-dir", str(work)]
    )
    assert result.exit_code == 0, result.output
    assert agents_run[-1].token == "from-a-file"
    # without any token, an agent that holds its credential runs; one that does not is refused
    result = CliRunner().invoke(app, ["agent", "run", "--master", "m:8080", "--work-dir", str(work)])
    assert result.exit_code == 1 and "needs the master's agent token" in result.output
    work.mkdir()
    (work / "agent.credential").write_text("its-own\n")
    result = CliRunner().invoke(app, ["agent", "run", "--master", "m:8080", "--work-dir", str(work)])
    assert result.exit_code == 0, result.output
    assert agents_run[-1].token is None


def test_agent_forget(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/agents/a1/forget", {})
    result = cli("agent", "forget", "a1")
    assert result.exit_code == 0, result.output
    assert "credential forgotten" in result.output
    assert len(master.calls("POST", "/api/v1/agents/a1/forget")) == 1


def test_agent_run_uses_the_global_master(agents_run: list[AgentOptions], monkeypatch) -> None:
    monkeypatch.setenv("PEDL_AGENT_TOKEN", "from-env")
    result = CliRunner().invoke(app, ["-m", "master.local:9", "agent", "run", "--id", "x"])
    assert result.exit_code == 0, result.output
    assert agents_run[0].master_url == "http://master.local:9"
    assert agents_run[0].token == "from-env"


def test_agent_run_without_a_token_fails_and_says_where_it_is(
    agents_run: list[AgentOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PEDL_AGENT_TOKEN", raising=False)
    for argv in (["agent", "run", "--master", "m:8080"], ["agent", "run", "--master", "m:8080", "--token", ""]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 1, result.output
        assert "--token" in result.output and "PEDL_AGENT_TOKEN" in result.output
        assert "<data_dir>/agent_token" in result.output and "--no-token" in result.output
    assert agents_run == []


def test_agent_run_no_token_is_the_explicit_loopback_opt_in(
    agents_run: list[AgentOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PEDL_AGENT_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["agent", "run", "--master", "127.0.0.1:8080", "--no-token"])
    assert result.exit_code == 0, result.output
    assert agents_run[0].token is None
    monkeypatch.setenv("PEDL_AGENT_TOKEN", "from-env")  # a token and --no-token contradict each other
    result = CliRunner().invoke(app, ["agent", "run", "--master", "127.0.0.1:8080", "--no-token"])
    assert result.exit_code == 1 and "--no-token" in result.output
    assert len(agents_run) == 1


def test_agent_run_refused_exits_nonzero_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from pedl.agent.connection import AgentRefused

    def refuse(options: AgentOptions) -> None:
        raise AgentRefused("the master refused this agent (close 4401: wrong agent token)")

    fake = types.ModuleType("pedl.agent.daemon")
    fake.run_agent = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pedl.agent.daemon", fake)
    result = CliRunner().invoke(app, ["agent", "run", "--master", "m:1", "--token", "bad"])
    assert result.exit_code == 1
    assert "wrong agent token" in result.output


def test_agent_run_rejects_negative_slots(agents_run: list[AgentOptions]) -> None:
    result = CliRunner().invoke(app, ["agent", "run", "--slots", "-1"])
    assert result.exit_code == 2 and agents_run == []


def test_agent_list(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/agents", {"agents": [AGENT]})
    data = json.loads(cli("agent", "list", "--json").stdout)
    assert data[0]["id"] == "a1"
    table = cli("agent", "list").stdout
    assert "a1" in table and "10.0.0.1" in table and "default" in table


def test_slot_list_maps_containers_to_allocations(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/agents", {"agents": [AGENT]})
    master.route("GET", "/api/v1/tasks", TASKS)
    rows = json.loads(cli("slot", "list", "--json").stdout)
    assert [(r["slotId"], r["allocationId"], r["taskName"], r["type"], r["device"]) for r in rows] == [
        ("s0", "alloc-1", "Trial 1 (Experiment 1)", "cuda", "H100"),
        ("s1", "FREE", "", "cuda", "H100"),
    ]
    assert "alloc-1" in cli("slot", "list").stdout


def test_task_list(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/tasks", TASKS)
    assert json.loads(cli("task", "list", "--json").stdout) == TASKS["allocationIdToSummary"]
    table = cli("task", "list").stdout
    assert "task-1" in table and "Trial 1 (Experiment 1)" in table


def test_task_list_shows_state_and_why_a_queued_one_waits(cli, master: FakeMaster) -> None:
    why = "behind 2 trials of higher priority in pool default"
    queued = {**TASKS["allocationIdToSummary"]["alloc-1"], "state": "STATE_QUEUED", "waitReason": why}
    master.route("GET", "/api/v1/tasks", {"allocationIdToSummary": {"alloc-1": queued}})
    table = cli("task", "list").stdout
    assert "QUEUED" in table and "STATE_QUEUED" not in table and why in table
