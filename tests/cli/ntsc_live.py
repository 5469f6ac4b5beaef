"""A real master app served by uvicorn (its tasks run by a FakeAgent) for the CLI tests of commands,
notebooks, shells and TensorBoards: the CLI reads what the master really answers. `Live.between`
acts while the CLI waits for a task (it replaces ntsc.pause). The agent registers at the first
`start_all`: until then no scheduling pass can place a task, so a task stays QUEUED until the test
says otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from pedl.cli import ntsc
from pedl.cli.main import app as cli_app
from pedl.config.master_config import MasterConfig
from tests.master.fakes import FakeAgent, StartedTask, bearer, login, post
from tests.support.live_master import LiveMaster


@dataclass
class Live:
    master: LiveMaster
    http: httpx.Client
    user: dict[str, str]
    runner: CliRunner = field(default_factory=CliRunner)
    steps: list[Callable[[], None]] = field(default_factory=list)
    _agent: FakeAgent | None = None

    @property
    def agent(self) -> FakeAgent:
        if self._agent is None:
            self._agent = FakeAgent(self.master.server.config.app, "agent-1", slots=1)
        return self._agent

    def close(self) -> None:
        if self._agent is not None:
            self._agent.close()

    @property
    def ctx(self):  # the app's MasterContext
        return self.master.server.config.app.state.ctx

    @property
    def url(self) -> str:
        return self.master.url

    def cli(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(cli_app, ["-m", self.master.url, *args], input=input)

    def between(self, *steps: Callable[[], None]) -> None:
        """What happens at each of the CLI's next pauses while it waits, one step per pause."""
        self.steps.extend(steps)

    def start_all(self) -> list[StartedTask]:
        return self.agent.start_all()

    def log(self, task: StartedTask, *lines: str) -> None:
        body = {"logs": [{"taskId": task.task_id, "log": line + "\n"} for line in lines]}
        r = post(self.http, "/api/v1/task/logs", body, bearer(task.token))  # type: ignore[arg-type]
        assert r.status_code == 200, r.text

    def serve(self, task: StartedTask, port: int) -> None:
        """The task's service registers its port: it is ready."""
        r = post(
            self.http,
            f"/api/v1/allocations/{task.allocation_id}/proxy_port",
            {"port": port},  # type: ignore[arg-type]
            bearer(task.token),
        )
        assert r.status_code == 200, r.text

    def launch(self, plural: str, **body: object) -> dict:
        r = post(self.http, f"/api/v1/{plural}", body, self.user)  # type: ignore[arg-type]
        assert r.status_code == 200, r.text
        return r.json()[plural.rstrip("s")]

    def get(self, path: str) -> dict:
        r = self.http.get(path, headers=self.user)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def live(master_config: MasterConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    with LiveMaster(master_config) as master, httpx.Client(base_url=master.url, timeout=30) as http:
        state = Live(master, http, bearer(login(http, "determined")))  # type: ignore[arg-type]

        def pause(_seconds: float) -> None:
            if not state.steps:
                raise AssertionError("the CLI waited again, but the test has nothing more to happen")
            state.steps.pop(0)()

        monkeypatch.setattr(ntsc, "pause", pause)
        try:
            yield state
        finally:
            state.close()
