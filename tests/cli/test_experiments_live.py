"""`pedl experiment list|describe|list-checkpoints` and `pedl checkpoint describe` against a real
master app (served by uvicorn; its trials run by a FakeAgent and report over HTTP with their task
tokens), so the tables show what the master really sends rather than canned JSON."""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from pedl.cli.main import app as cli_app
from pedl.common.checkpoint_storage import storage_from_config
from pedl.config.master_config import MasterConfig
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, login, post
from tests.support.live_master import LiveMaster


@dataclass
class Live:
    master: LiveMaster
    agent: FakeAgent
    http: httpx.Client
    user: dict[str, str]
    cli: Callable[..., Result]

    @property
    def ctx(self):  # the app's MasterContext
        return self.master.server.config.app.state.ctx


@pytest.fixture
def master_config(master_config: MasterConfig) -> MasterConfig:
    # the fake agent runs no checkpoint GC task: garbage collection here is the master's own
    return master_config.model_copy(update={"checkpoint_gc_tasks": False})


@pytest.fixture
def live(master_config: MasterConfig) -> Iterator[Live]:
    with LiveMaster(master_config) as master, httpx.Client(base_url=master.url, timeout=30) as http:
        agent = FakeAgent(master.server.config.app, "agent-1", slots=1)
        runner = CliRunner()
        try:
            yield Live(
                master,
                agent,
                http,
                bearer(login(http, "determined")),  # type: ignore[arg-type]
                lambda *args: runner.invoke(cli_app, ["-m", master.url, *args]),
            )
        finally:
            agent.close()


def started(live: Live, config: str = SINGLE_CONFIG) -> tuple[int, StartedTask]:
    exp = create_experiment(live.http, live.user, config)  # type: ignore[arg-type]
    [task] = live.agent.start_all()
    return exp["id"], task


def validation(live: Live, task: StartedTask, steps: int, loss: float) -> None:
    body = {
        "group": "validation",
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": {"loss": loss}},
        },
    }
    assert (
        post(
            live.http,
            f"/api/v1/trials/{task.trial_id}/metrics",
            body,  # type: ignore[arg-type]
            bearer(task.token),
        ).status_code
        == 200
    )


def checkpoint(live: Live, task: StartedTask, steps: int) -> str:
    """Store a checkpoint's files where the master keeps them and report it."""
    name = str(uuid_lib.uuid4())
    storage = storage_from_config(live.ctx.config.effective_checkpoint_storage().model_dump())
    with storage.store_path(name) as path:
        (path / "state.json").write_text(f'{{"step": {steps}}}')
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "metadata": {"steps_completed": steps},
        "resources": {"state.json": "13"},
        "state": "STATE_COMPLETED",
        "training": {},
    }
    assert post(live.http, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200  # type: ignore[arg-type]
    return name


def words(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def trial_rows(result: Result) -> list[str]:
    """The rows of `experiment describe`'s Trials table."""
    assert result.exit_code == 0, result.output
    table = result.stdout.split("Trials", 1)[1].split("Recent events", 1)[0]
    return [line for line in table.splitlines() if line.startswith("│")]


def test_list_and_describe_show_the_progress_a_running_trial_reported(live: Live) -> None:
    exp_id, task = started(live)
    r = post(
        live.http,
        f"/api/v1/trials/{task.trial_id}/progress",
        {"progress": 0.6},  # type: ignore[arg-type]
        bearer(task.token),
    )
    assert r.status_code == 200
    assert "60.0%" in words(live.cli("experiment", "list"))
    assert "Progress 60.0%" in words(live.cli("experiment", "describe", str(exp_id)))


def test_describe_fills_checkpoint_outcome_and_ended_because_of_a_completed_trial(live: Live) -> None:
    exp_id, task = started(live)
    validation(live, task, 10, 0.1)
    uuid = checkpoint(live, task, 10)
    live.agent.exit(task.allocation_id, 0)
    described = live.cli("experiment", "describe", str(exp_id))
    out = words(described)
    assert "State COMPLETED" in out and "Progress 100.0%" in out
    assert "Outcome the searcher finished: 1 trial(s) completed" in out
    [row] = trial_rows(described)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[-2:] == [uuid, "completed"], row  # Checkpoint, Ended because


def test_a_deleted_checkpoint_shows_its_state_and_never_its_files(live: Live) -> None:
    exp_id, task = started(live)
    validation(live, task, 5, 0.5)
    old = checkpoint(live, task, 5)
    validation(live, task, 10, 0.1)
    new = checkpoint(live, task, 10)
    live.agent.exit(task.allocation_id, 0)
    live.master.server.config.app.state.checkpoint_gc.run_pending()  # keeps the trial's best and latest

    described = words(live.cli("checkpoint", "describe", old))
    assert "State DELETED" in described and "its files were deleted" in described
    assert "state.json" not in described and "master/checkpoints" not in described
    listed = live.cli("experiment", "list-checkpoints", str(exp_id))
    assert listed.exit_code == 0, listed.output
    [old_row] = [line for line in listed.stdout.splitlines() if old in line]
    assert "DELETED" in old_row and "B" not in old_row.replace(old, "")  # no size offered
    [new_row] = [line for line in listed.stdout.splitlines() if new in line]
    assert "COMPLETED" in new_row and "13 B" in new_row
    [row] = trial_rows(live.cli("experiment", "describe", str(exp_id)))
    assert new in row and old not in row  # the trial's checkpoint is one whose files are there


def test_pedl_agent_disable_and_enable(live: Live) -> None:
    """Admins only; the API shows the change."""

    def shown() -> tuple[bool, bool]:
        [agent] = live.http.get("/api/v1/agents", headers=live.user).json()["agents"]
        return agent["enabled"], agent["draining"]

    refused = live.cli("agent", "disable", "agent-1")  # as determined, not an admin
    assert refused.exit_code != 0 and "admin" in refused.output and shown() == (True, False)
    login_admin = CliRunner().invoke(cli_app, ["-m", live.master.url, "user", "login", "admin"], input="\n")
    assert login_admin.exit_code == 0, login_admin.output
    assert "draining" in words(live.cli("-u", "admin", "agent", "disable", "--drain", "agent-1"))
    assert shown() == (False, True)
    assert "enabled" in words(live.cli("-u", "admin", "agent", "enable", "agent-1"))
    assert shown() == (True, False)
    missing = live.cli("-u", "admin", "agent", "enable", "nope")
    assert missing.exit_code != 0 and "nope" in missing.output
