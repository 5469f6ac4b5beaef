"""TaskRuntime with real processes: context download, output, exit codes, failures and kills."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pedl.agent.task_env import TaskHost
from pedl.agent.task_runtime import TaskRuntime
from pedl.common.agent_protocol import SlotInfo, StartTask

from .conftest import ContextServer, eventually


class Recorder:
    """Collects what a task sends, as JSON dicts."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def __call__(self, msg: BaseModel) -> None:
        self.messages.append(msg.model_dump(mode="json"))

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == type_]

    def lines(self, stdtype: str | None = None) -> list[str]:
        return [
            line["message"]
            for m in self.of("task_logs")
            for line in m["lines"]
            if stdtype is None or line["stdtype"] == stdtype
        ]

    @property
    def exited(self) -> dict[str, Any]:
        (exited,) = self.of("task_exited")
        return exited


def _runtime(
    tmp_path: Path,
    context_url: str,
    entrypoint: str | list[str],
    env: dict[str, str] | None = None,
    allocation_id: str = "alloc-1",
    token: str = "tok",
) -> tuple[TaskRuntime, Recorder]:
    spec = StartTask(
        allocation_id=allocation_id,
        task_id="task-1",
        name="trial 1",
        entrypoint=entrypoint,
        env={"DET_TRIAL_ID": "7", **(env or {})},
        slot_ids=["0"],
        session_token=token,
        context_url=context_url,
    )
    host = TaskHost(
        master_url="http://127.0.0.1:9", agent_id="agent-1", work_dir=tmp_path / "work", slots={"0": SlotInfo(id="0")}
    )
    recorder = Recorder()
    return TaskRuntime(spec, host, recorder), recorder


def _py(code: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(code)]


async def test_runs_entrypoint_from_served_context(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"model_def.py": "GREETING = 'hello from the context'\n"})
    runtime, rec = _runtime(
        tmp_path,
        url,
        _py("""
        import sys
        from model_def import GREETING
        print(GREETING)
        print("to stderr", file=sys.stderr)
        print("second line")
        sys.exit(3)
    """),
    )
    assert await runtime.run() == 3
    assert rec.messages[0]["type"] == "task_started"
    assert rec.messages[0]["pid"] > 0
    assert rec.lines("stdout") == ["hello from the context", "second line"]
    assert rec.lines("stderr") == ["to stderr"]
    assert rec.exited == {"type": "task_exited", "allocation_id": "alloc-1", "exit_code": 3, "reason": ""}
    assert rec.messages[-1]["type"] == "task_exited"
    assert (tmp_path / "work" / "alloc-1" / "model_def.py").exists()


async def test_task_environment(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"x.txt": "x"})
    runtime, rec = _runtime(
        tmp_path,
        url,
        _py("""
        import json, os
        print(json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)}))
    """),
        env={"DET_HPARAMS": '{"lr": 0.1}'},
    )
    assert await runtime.run() == 0
    seen = json.loads("".join(rec.lines("stdout")))
    env = seen["env"]
    assert seen["cwd"] == str((tmp_path / "work" / "alloc-1").resolve())
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert env["DET_MASTER"] == "http://127.0.0.1:9"
    assert env["DET_AGENT_ID"] == "agent-1"
    assert json.loads(env["DET_SLOT_IDS"]) == [0]
    assert env["DET_TRIAL_ID"] == "7"
    assert json.loads(env["DET_HPARAMS"]) == {"lr": 0.1}
    assert env["CUDA_VISIBLE_DEVICES"] == ""


async def test_shell_string_entrypoint(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"data.txt": "from a file\n"})
    runtime, rec = _runtime(tmp_path, url, "cat data.txt; echo err >&2; exit 5")
    assert await runtime.run() == 5
    assert rec.lines("stdout") == ["from a file"]
    assert rec.lines("stderr") == ["err"]


async def test_missing_program(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"})
    runtime, rec = _runtime(tmp_path, url, ["no-such-program-pedl", "--x"])
    assert await runtime.run() is None
    assert rec.of("task_started") == []
    assert rec.exited["exit_code"] is None
    assert "no-such-program-pedl" in rec.exited["reason"]
    assert any("no-such-program-pedl" in line for line in rec.lines("agent"))


async def test_failed_download(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"}, token="right")
    runtime, rec = _runtime(tmp_path, url, _py("print('never')"), token="wrong")
    assert await runtime.run() is None
    assert rec.exited["exit_code"] is None
    assert "401" in rec.exited["reason"]
    assert rec.lines("stdout") == []
    assert any("401" in line for line in rec.lines("agent"))


async def test_bad_archive(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add_raw("bad", b'{"b64Tgz": "bm90IGEgdGFyYmFsbA=="}')
    runtime, rec = _runtime(tmp_path, url, _py("print('never')"))
    assert await runtime.run() is None
    assert "not a valid tgz" in rec.exited["reason"]
    assert rec.lines("agent")


async def test_a_chief_whose_rendezvous_port_is_busy_fails_before_it_starts(
    tmp_path: Path, context_server: ContextServer
) -> None:
    url = context_server.add("c1", {"a": "b"})
    with socket.socket() as squatter:  # a program outside pedl listens on the port
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        chief, rec = _runtime(
            tmp_path, url, _py("print('never')"), env={"NODE_RANK": "0", "NNODES": "2", "MASTER_PORT": str(port)}
        )
        assert await chief.run() is None
        # the second node does not listen, so the check is the chief's alone
        other, other_rec = _runtime(
            tmp_path,
            url,
            _py("print('ran')"),
            allocation_id="alloc-2",
            env={"NODE_RANK": "1", "NNODES": "2", "MASTER_PORT": str(port)},
        )
        assert await other.run() == 0
    assert rec.of("task_started") == [] and rec.lines("stdout") == []
    assert rec.exited["exit_code"] is None
    assert f"rendezvous port {port} (MASTER_PORT) is in use on this agent" in rec.exited["reason"]
    assert other_rec.lines("stdout") == ["ran"]


async def test_allocation_id_cannot_escape_work_dir(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"})
    runtime, rec = _runtime(tmp_path, url, ["true"], allocation_id="../outside")
    assert await runtime.run() is None
    assert "plain name" in rec.exited["reason"]
    assert not (tmp_path / "outside").exists()


async def test_each_task_gets_its_own_directory(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"})
    for allocation_id in ("a1", "a2"):
        runtime, _ = _runtime(tmp_path, url, "pwd > where.txt", allocation_id=allocation_id)
        assert await runtime.run() == 0
    for allocation_id in ("a1", "a2"):
        where = (tmp_path / "work" / allocation_id / "where.txt").read_text().strip()
        assert where == str((tmp_path / "work" / allocation_id).resolve())


STUBBORN = """
    import os, signal, subprocess, sys, time

    def note(name):
        def handler(signum, frame):
            os.write(1, f"{name} got SIGTERM\\n".encode())  # one write: two processes share the pipe
        return handler

    if sys.argv[1:] == ["child"]:
        signal.signal(signal.SIGTERM, note("child"))
        open("child.pid", "w").write(str(os.getpid()))
        while True:
            time.sleep(0.1)
    signal.signal(signal.SIGTERM, note("parent"))
    subprocess.Popen([sys.executable, __file__, "child"])
    while not os.path.exists("child.pid"):
        time.sleep(0.05)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
"""


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # zombies are dead
    except FileNotFoundError:
        return True


async def test_kill_escalates_to_sigkill_for_the_whole_group(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"stubborn.py": textwrap.dedent(STUBBORN)})
    runtime, rec = _runtime(tmp_path, url, ["python3", "stubborn.py"])
    run = asyncio.create_task(runtime.run())
    await eventually(lambda: "ready" in rec.lines(), what="the task to be ready")
    child_pid = int((tmp_path / "work" / "alloc-1" / "child.pid").read_text())
    runtime.kill(grace_period=1.0, reason="user asked")
    assert await asyncio.wait_for(run, 30) == -9
    assert "parent got SIGTERM" in rec.lines()
    assert "child got SIGTERM" in rec.lines()
    assert rec.exited == {"type": "task_exited", "allocation_id": "alloc-1", "exit_code": -9, "reason": "user asked"}
    await eventually(lambda: _dead(child_pid), what="the child to be killed")


async def test_kill_ends_the_group_of_a_leader_that_ended_on_sigterm(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """A shell entrypoint ends on SIGTERM while its children hold on (and hold the output pipes the agent
    waits to see closed): the SIGKILL after the grace period still goes to the group."""
    url = context_server.add("c1", {"stubborn.py": textwrap.dedent(STUBBORN)})
    runtime, rec = _runtime(tmp_path, url, "python3 stubborn.py")  # one word: run by sh, which forks it
    run = asyncio.create_task(runtime.run())
    await eventually(lambda: "ready" in rec.lines(), what="the task to be ready")
    child_pid = int((tmp_path / "work" / "alloc-1" / "child.pid").read_text())
    runtime.kill(grace_period=1.0, reason="user asked")
    assert await asyncio.wait_for(run, 60) == -signal.SIGTERM  # the shell's own end
    assert "child got SIGTERM" in rec.lines()
    await eventually(lambda: _dead(child_pid), what="the child to be killed")


async def test_kill_of_a_polite_task_reports_the_signal(tmp_path: Path, context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"})
    runtime, rec = _runtime(
        tmp_path,
        url,
        _py("""
        import time
        print("ready", flush=True)
        time.sleep(600)
    """),
    )
    run = asyncio.create_task(runtime.run())
    await eventually(lambda: "ready" in rec.lines(), what="the task to be ready")
    runtime.kill(grace_period=30.0)
    assert await asyncio.wait_for(run, 30) == -15
    assert rec.exited["exit_code"] == -15


async def test_kill_before_start(tmp_path: Path) -> None:
    # a context URL that accepts the connection but never answers keeps the task preparing
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        runtime, rec = _runtime(tmp_path, f"http://127.0.0.1:{port}/ctx", ["true"])
        run = asyncio.create_task(runtime.run())
        await asyncio.sleep(0.3)
        runtime.kill(grace_period=1.0, reason="cancelled")
        assert await asyncio.wait_for(run, 30) is None
        assert rec.exited["exit_code"] is None
        assert "killed before it started" in rec.exited["reason"]
        assert rec.of("task_started") == []
    finally:
        server.close()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_many_lines_arrive_in_order(tmp_path: Path, context_server: ContextServer, stream: str) -> None:
    url = context_server.add("c1", {"a": "b"})
    runtime, rec = _runtime(
        tmp_path,
        url,
        _py(f"""
        import sys
        for i in range(5000):
            print(i, file=sys.{stream})
    """),
    )
    assert await runtime.run() == 0
    assert rec.lines(stream) == [str(i) for i in range(5000)]
