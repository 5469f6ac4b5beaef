"""The agent against a fake master: registration, heartbeats, tasks, reconnects and refusal."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from pedl.agent import Agent, AgentOptions, AgentRefused
from pedl.common.agent_protocol import CLOSE_UNAUTHORIZED, CheckPort, KillTask, StartTask
from pedl.common.mount_namespace import probe

from .conftest import ContextServer, FakeMaster, eventually, running_agent


def _options(master: FakeMaster, tmp_path: Path, **kwargs: object) -> AgentOptions:
    return AgentOptions(
        master.url, agent_id="agent-1", work_dir=tmp_path / "work", slots=2, token="agent-secret", **kwargs
    )  # type: ignore[arg-type]


def _start(allocation_id: str, context_url: str, code: str, token: str = "tok") -> StartTask:
    return StartTask(
        allocation_id=allocation_id,
        task_id="task-1",
        name="trial 1",
        entrypoint=["python3", "-c", textwrap.dedent(code)],
        env={"DET_ALLOCATION_ID": allocation_id},
        slot_ids=["0"],
        session_token=token,
        context_url=context_url,
    )


def _messages(master: FakeMaster, allocation_id: str, session: int | None = None) -> list[str]:
    return [line["message"] for line in master.log_lines(allocation_id, session)]


async def test_registers_and_heartbeats(fake_master: FakeMaster, tmp_path: Path) -> None:
    async with running_agent(_options(fake_master, tmp_path)):
        await eventually(lambda: len(fake_master.messages("heartbeat")) >= 2, what="heartbeats")
    register = fake_master.sessions[0][0]
    assert register["type"] == "register"
    assert register["agent_id"] == "agent-1"
    assert register["hostname"] == socket.gethostname()
    assert register["address"] == "127.0.0.1"
    assert register["resource_pool"] == "default"
    assert [(s["id"], s["type"]) for s in register["slots"]] == [("0", "cpu"), ("1", "cpu")]
    assert register["running_allocations"] == []
    assert register["version"]
    assert fake_master.paths == ["/agents/ws"]
    assert fake_master.headers[0]["x-pedl-agent-token"] == "agent-secret"
    assert fake_master.messages("heartbeat")[0]["running_allocations"] == []


async def test_runs_a_task(fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path) -> None:
    url = context_server.add("c1", {"hello.txt": "hello from the context\n"})
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import sys
            print(open("hello.txt").read().strip())
            print("oops", file=sys.stderr)
            sys.exit(2)
        """,
            )
        )
        await eventually(lambda: fake_master.messages("task_exited"), what="task_exited")
    types = [m["type"] for m in fake_master.messages() if m.get("allocation_id") == "a1"]
    assert types[0] == "task_started" and types[-1] == "task_exited"
    assert _messages(fake_master, "a1") == ["hello from the context", "oops"]
    assert fake_master.messages("task_exited")[0]["exit_code"] == 2


async def test_a_task_with_no_entrypoint_ends_at_once_saying_so(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    """A command launched without one (Determined takes such a launch) never runs anything."""
    url = context_server.add("c1", {})
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        start = _start("a1", url, "")
        await fake_master.send(start.model_copy(update={"entrypoint": []}))
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="task_exited")
    assert exited[0]["exit_code"] is None and "the entrypoint is empty" in exited[0]["reason"]
    assert not fake_master.messages("task_started")


async def test_kill_task(fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path) -> None:
    url = context_server.add("c1", {})
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import time
            print("ready", flush=True)
            time.sleep(600)
        """,
            )
        )
        await eventually(lambda: "ready" in _messages(fake_master, "a1"), what="the task to run")
        await eventually(
            lambda: "a1" in fake_master.messages("heartbeat")[-1]["running_allocations"], what="a heartbeat listing a1"
        )
        await fake_master.send(KillTask(allocation_id="a1", grace_period=5, reason="preempted"))
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="exit")
    assert exited[0]["exit_code"] == -15
    assert exited[0]["reason"] == "preempted"


async def test_kill_of_unknown_allocation_is_answered(fake_master: FakeMaster, tmp_path: Path) -> None:
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(KillTask(allocation_id="ghost"))
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="exit")
    assert exited[0]["allocation_id"] == "ghost" and exited[0]["exit_code"] is None


async def test_reconnect_keeps_tasks_and_delivers_buffered_messages(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pedl.agent")
    url = context_server.add("c1", {})
    trigger = tmp_path / "go"
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                f"""
            import os, sys, time
            def wait_for(name):
                while not os.path.exists({str(trigger)!r} + name):
                    time.sleep(0.05)
            print("before", flush=True)
            wait_for("1")
            print("while disconnected", flush=True)
            wait_for("2")
            print("last words", flush=True)
            sys.exit(7)
        """,
            )
        )
        await eventually(lambda: "before" in _messages(fake_master, "a1"), what="first line")

        # the master goes away while the task runs; the task prints while nobody listens
        await fake_master.stop()
        await eventually(lambda: not agent.connected, what="the agent to notice")
        Path(f"{trigger}1").touch()
        await eventually(
            lambda: any(getattr(m, "lines", None) for m in agent._outbox), what="output buffered while disconnected"
        )
        await asyncio.sleep(1.0)  # let a reconnect attempt or two fail
        await fake_master.start()
        await eventually(
            lambda: "while disconnected" in _messages(fake_master, "a1", 1), what="buffered line after reconnect"
        )
        register = fake_master.sessions[1][0]
        assert register["type"] == "register"
        assert register["running_allocations"] == ["a1"]

        # again, and this time the task exits while the agent is cut off
        await fake_master.stop()
        await eventually(lambda: not agent.connected, what="the agent to notice")
        Path(f"{trigger}2").touch()
        await eventually(lambda: not agent.tasks, what="the task to exit")
        await fake_master.start()
        exited = await eventually(lambda: fake_master.messages("task_exited", 2), what="exit")
    assert exited[0]["exit_code"] == 7
    # the exit was not yet delivered, so the allocation is still held at re-registration
    assert fake_master.sessions[2][0]["running_allocations"] == ["a1"]
    assert "last words" in _messages(fake_master, "a1", 2)
    assert _messages(fake_master, "a1") == ["before", "while disconnected", "last words"]
    assert len(fake_master.messages("task_started")) == 1
    assert "lost the connection to the master" in caplog.text
    assert "no connection to the master" in caplog.text


async def test_kill_unknown_on_registration(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    url = context_server.add("c1", {})
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import time
            print("ready", flush=True)
            time.sleep(600)
        """,
            )
        )
        await eventually(lambda: "ready" in _messages(fake_master, "a1"), what="the task to run")
        await fake_master.stop()
        fake_master.kill_unknown = ["a1"]
        await fake_master.start()
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="exit")
    assert exited[0]["exit_code"] == -15


async def test_shutdown_kills_tasks_and_reports_them(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    url = context_server.add("c1", {})
    async with running_agent(_options(fake_master, tmp_path), shutdown_grace_period=1.0) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import signal, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("ready", flush=True)
            time.sleep(600)
        """,
            )
        )
        await eventually(lambda: "ready" in _messages(fake_master, "a1"), what="the task to run")
    assert not agent.tasks
    assert fake_master.messages("task_exited")[0]["exit_code"] == -9


@pytest.mark.parametrize("how", ["close", "http"])
async def test_refusal_stops_the_agent(
    fake_master: FakeMaster, tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    if how == "close":
        fake_master.refuse_code = CLOSE_UNAUTHORIZED
    else:
        # a server that refuses before accepting the upgrade answers HTTP 403 (Starlette does)
        await fake_master.stop()
        from websockets.asyncio.server import serve
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        async def handler(ws: object) -> None:
            raise AssertionError("never accepted")

        def forbid(connection: object, request: object) -> Response:
            return Response(403, "Forbidden", Headers(), b"")

        server = await serve(handler, "127.0.0.1", fake_master.port, process_request=forbid)
    agent = Agent(_options(fake_master, tmp_path))
    try:
        with pytest.raises(AgentRefused, match="refused"):
            await asyncio.wait_for(agent.run(asyncio.Event()), 30)
    finally:
        if how == "http":
            server.close()
    assert "refused" in caplog.text


async def test_retries_until_the_master_appears(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pedl.agent")
    master = FakeMaster()
    with socket.socket() as probe:  # a port nobody listens on yet
        probe.bind(("127.0.0.1", 0))
        master.port = probe.getsockname()[1]
    async with running_agent(_options(master, tmp_path)) as agent:
        await eventually(lambda: caplog.text.count("no connection to the master") >= 2, what="two failed attempts")
        await master.start()
        try:
            await eventually(lambda: agent.connected, what="registration")
        finally:
            await master.stop()
    failures = [r for r in caplog.records if "no connection to the master" in r.getMessage()]
    assert "(attempt 1)" in failures[0].getMessage()
    assert "(attempt 2)" in failures[1].getMessage()


async def test_run_agent_process_stops_on_sigterm(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    url = context_server.add("c1", {})
    script = (
        f"import logging; logging.basicConfig(level=logging.INFO)\n"
        f"from pedl.agent import AgentOptions, run_agent\n"
        f"run_agent(AgentOptions({fake_master.url!r}, agent_id='proc-agent', "
        f"work_dir={str(tmp_path / 'work')!r}))\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE)
    try:
        await eventually(lambda: fake_master.messages("register"), what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import time
            print("ready", flush=True)
            time.sleep(600)
        """,
            )
        )
        await eventually(lambda: "ready" in _messages(fake_master, "a1"), what="the task to run")
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, stderr.decode()
    assert fake_master.messages("task_exited")[0]["exit_code"] == -15
    assert "stopped" in stderr.decode()


async def test_run_agent_process_exits_nonzero_when_refused(fake_master: FakeMaster, tmp_path: Path) -> None:
    fake_master.refuse_code = CLOSE_UNAUTHORIZED
    script = (
        f"from pedl.agent import AgentOptions, run_agent\n"
        f"run_agent(AgentOptions({fake_master.url!r}, work_dir={str(tmp_path)!r}))\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    assert "AgentRefused" in stderr.decode()


async def test_over_wss_an_agent_trusting_the_masters_ca_registers_and_hands_it_to_tasks(
    context_server: ContextServer, tmp_path: Path
) -> None:
    from tests.support.tls import write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    master = FakeMaster(ssl_context=tls.server_context())
    await master.start()
    url = context_server.add("c1", {})
    try:
        async with running_agent(_options(master, tmp_path, cert=tls.ca)) as agent:
            await eventually(lambda: agent.connected, what="registration over wss")
            await master.send(
                _start(
                    "a1",
                    url,
                    """
                import os
                cert = os.environ["PEDL_MASTER_CERT"]
                print(cert, os.environ["DET_MASTER_CERT_FILE"], len(open(cert).read()))
            """,
                )
            )
            await eventually(lambda: master.messages("task_exited"), what="task_exited")
    finally:
        await master.stop()
    assert master.messages("register")[0]["agent_id"] == "agent-1"
    # in its namespace a task reads a copy among its info files (its user may not enter the CA's directory)
    where = "/run/determined/info/master-ca.pem" if probe() is None else str(tls.ca)
    assert _messages(master, "a1") == [f"{where} {where} {len(tls.ca.read_text())}"]


@pytest.mark.parametrize("trusts", ["another CA", "the system's CAs"])
async def test_over_wss_an_agent_refuses_a_master_it_cannot_verify(
    tmp_path: Path, trusts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.tls import write_tls_files

    monkeypatch.delenv("PEDL_MASTER_CERT", raising=False)
    tls = write_tls_files(tmp_path / "tls")
    master = FakeMaster(ssl_context=tls.server_context())
    await master.start()
    cert = tls.other_ca if trusts == "another CA" else None
    try:
        agent = Agent(_options(master, tmp_path, cert=cert))
        with pytest.raises(AgentRefused) as caught:
            await asyncio.wait_for(agent.run(asyncio.Event()), 30)  # at once: retrying cannot help
    finally:
        await master.stop()
    text = str(caught.value)
    assert text.startswith(
        f"the agent refuses the master: the TLS certificate of the master at "
        f"wss://127.0.0.1:{master.port}/agents/ws could not be verified against "
    )
    assert (f"the CA in {tls.other_ca}" if cert else "the system's CAs") in text
    assert "--cert FILE or PEDL_MASTER_CERT" in text
    assert master.sessions == []  # nothing was said to a master it does not trust


async def test_the_credential_the_master_issues_is_kept_0600_and_presented_from_then_on(
    fake_master: FakeMaster, tmp_path: Path
) -> None:
    options = _options(fake_master, tmp_path)
    fake_master.credential = "its-own-credential"
    async with running_agent(options) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await eventually(lambda: options.credential_path.exists(), what="the credential file")
        assert options.credential_path.read_text().strip() == "its-own-credential"
        assert options.credential_path.stat().st_mode & 0o777 == 0o600
        await fake_master.stop()  # the master goes away and comes back: the agent reconnects
        await fake_master.start()
        await eventually(lambda: len(fake_master.headers) >= 2 and agent.connected, what="the reconnection")
    assert "x-pedl-agent-credential" not in fake_master.headers[0]
    assert fake_master.headers[1]["x-pedl-agent-credential"] == "its-own-credential"
    assert fake_master.headers[1]["x-pedl-agent-token"] == "agent-secret"  # re-enrols an id an admin forgot


async def test_a_refusal_for_a_missing_credential_says_how_to_recover(fake_master: FakeMaster, tmp_path: Path) -> None:
    fake_master.refuse_code = CLOSE_UNAUTHORIZED
    fake_master.refuse_reason = "this agent id has a credential of its own, which this connection did not present"
    options = _options(fake_master, tmp_path)
    with pytest.raises(AgentRefused) as info:
        await asyncio.wait_for(Agent(options).run(asyncio.Event()), 60)
    assert "pedl agent forget agent-1" in str(info.value) and str(options.credential_path) in str(info.value)


async def test_check_port_answers_whether_the_task_listens_on_it(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    url = context_server.add("c1", {})
    outsider = socket.socket()
    outsider.bind(("127.0.0.1", 0))
    outsider.listen()
    async with running_agent(_options(fake_master, tmp_path)) as agent:
        await eventually(lambda: agent.connected, what="registration")
        await fake_master.send(
            _start(
                "a1",
                url,
                """
            import socket, subprocess, sys, time
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen()
            print(s.getsockname()[1], flush=True)
            time.sleep(600)
        """,
            )
        )
        lines = await eventually(lambda: _messages(fake_master, "a1"), what="the task's port")
        port = int(lines[0])
        for request_id, allocation_id, asked in (
            ("r1", "a1", port),
            ("r2", "a1", outsider.getsockname()[1]),
            ("r3", "ghost", port),
        ):
            await fake_master.send(CheckPort(request_id=request_id, allocation_id=allocation_id, port=asked))
        answers = await eventually(
            lambda: len(fake_master.messages("port_checked")) == 3 and fake_master.messages("port_checked"),
            what="the answers",
        )
    outsider.close()
    by_id = {a["request_id"]: a for a in answers}
    assert by_id["r1"]["owned"] is True and by_id["r1"]["port"] == port
    assert by_id["r2"]["owned"] is False and "not the task's" in by_id["r2"]["reason"]
    assert by_id["r3"]["owned"] is False and "not running on this agent" in by_id["r3"]["reason"]
