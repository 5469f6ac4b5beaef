"""`pedl notebook start|open|list|kill` against a real master app whose tasks a FakeAgent runs: start
waits (showing progress) until the notebook's service registered its port, then prints its URL
through the master's proxy; open prints it and hands it to a browser; one that ends first is an
error with its last log lines."""

from __future__ import annotations

import pytest

from tests.cli.ntsc_live import Live


def test_start_waits_until_ready_and_prints_the_proxy_url(live: Live) -> None:
    tasks = []
    live.between(
        lambda: tasks.extend(live.start_all()),  # running, its service not up yet
        lambda: live.serve(tasks[0], 8888),
    )
    result = live.cli("notebook", "start", "--config", "description=my notebook")
    assert result.exit_code == 0, result.output
    nb_id = tasks[0].task_id
    assert result.stdout == f"{live.url}/proxy/{nb_id}/\n"
    assert f"Notebook {nb_id} is QUEUED" in result.stderr and f"Notebook {nb_id} is RUNNING" in result.stderr
    assert "is ready" in result.stderr
    listed = live.cli("notebook", "list")
    assert nb_id in listed.stdout and "my notebook" in listed.stdout


def test_start_detached_prints_only_the_id(live: Live) -> None:
    result = live.cli("notebook", "start", "-d")
    assert result.exit_code == 0, result.output
    nb_id = result.stdout.strip()
    assert live.get(f"/api/v1/notebooks/{nb_id}")["notebook"]["state"] == "STATE_QUEUED"


def test_a_notebook_that_ends_before_it_is_ready_is_an_error_with_its_logs(live: Live) -> None:
    def fail() -> None:
        [task] = live.start_all()
        live.log(task, "jupyter: command not found")
        live.agent.exit(task.allocation_id, 127)

    live.between(fail)
    result = live.cli("notebook", "start")
    assert result.exit_code == 1
    assert "ended before it was ready (exited with code 127" in result.stderr, result.stderr
    assert "jupyter: command not found" in result.stderr


def test_open_prints_the_url_and_opens_a_browser(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    nb_id = live.launch("notebooks")["id"]
    [task] = live.start_all()
    live.serve(task, 9999)
    result = live.cli("notebook", "open", nb_id[:6])  # a prefix names it
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{live.url}/proxy/{nb_id}/\n" and opened == [f"{live.url}/proxy/{nb_id}/"]
    assert live.cli("notebook", "open", "--no-browser", nb_id).exit_code == 0 and len(opened) == 1
    live.cli("notebook", "kill", nb_id)
    live.agent.exit(task.allocation_id, 143)
    ended = live.cli("notebook", "open", nb_id)
    assert ended.exit_code == 1 and f"notebook {nb_id} has ended" in ended.stderr
