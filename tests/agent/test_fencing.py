"""Fencing, the agent's half: an agent that has not heard from the master for longer than the
master's reconnect wait kills its tasks, which the master has by then restarted elsewhere."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

import pytest

from pedl.agent.fencing import MasterContact
from pedl.common.mount_namespace import probe
from tests.support import task_processes

from .conftest import ContextServer, FakeMaster, eventually, running_agent
from .test_daemon import _messages, _options, _start

NAMESPACES = probe() is None  # the agent gives its tasks PID namespaces
SLEEPER = """
    import os, time
    print("ready", os.getpid(), flush=True)
    time.sleep(600)
"""


class StepClock:
    """A monotonic clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_contact_is_overdue_only_past_the_reconnect_wait() -> None:
    clock = StepClock()
    contact = MasterContact(clock)
    assert not contact.overdue()  # never registered: nothing to fence
    contact.heard()
    contact.reconnect_wait = 5.0
    clock.advance(5.0)
    assert not contact.overdue()
    clock.advance(0.1)
    assert contact.overdue() and contact.silence() == pytest.approx(5.1)
    contact.fenced()
    assert not contact.overdue()  # one fence per silence
    contact.heard()
    assert not contact.overdue()
    clock.advance(6.0)
    assert contact.overdue()


def test_an_older_master_without_a_reconnect_wait_is_never_fenced() -> None:
    clock = StepClock()
    contact = MasterContact(clock)
    contact.heard()
    clock.advance(1e6)
    assert not contact.overdue()


async def _running_task(fake_master: FakeMaster, context_server: ContextServer, agent) -> None:
    await eventually(lambda: agent.connected, what="registration")
    await fake_master.send(_start("a1", context_server.add("c1", {}), SLEEPER))
    await eventually(lambda: any(m.startswith("ready") for m in _messages(fake_master, "a1")), what="the task to run")


async def test_cut_off_past_the_reconnect_wait_kills_the_tasks(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, the agent kept its tasks however long it was cut off, while the master restarted them
    on other agents: two runs of one trial side by side."""
    caplog.set_level(logging.WARNING, logger="pedl.agent")
    fake_master.reconnect_wait, fake_master.kill_grace_period = 5.0, 2.0
    clock = StepClock()
    async with running_agent(_options(fake_master, tmp_path), monotonic=clock) as agent:
        await _running_task(fake_master, context_server, agent)
        await fake_master.stop()
        await eventually(lambda: not agent.connected, what="the agent to notice")
        clock.advance(4.9)
        assert not agent.check_master_contact()  # within the wait the tasks stay
        assert "a1" in agent.tasks
        clock.advance(0.2)
        await eventually(lambda: not agent.tasks, what="the agent to kill its task")
        await fake_master.start()
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="the exit report")
    assert exited[0]["exit_code"] == -signal.SIGTERM
    assert "reconnect wait of 5 s" in exited[0]["reason"]
    assert "killing 1 task(s)" in caplog.text


async def test_after_a_freeze_the_tasks_die_before_anything_else(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    """The clock jumps while the socket still looks open, as after SIGSTOP and SIGCONT: the agent
    kills its tasks at once, without waiting to find out that the connection is dead."""
    fake_master.reconnect_wait = 5.0
    clock = StepClock()
    async with running_agent(_options(fake_master, tmp_path), monotonic=clock) as agent:
        await _running_task(fake_master, context_server, agent)
        clock.advance(6.0)
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="the exit report")
        assert agent.connected and len(fake_master.sessions) == 1  # no reconnect was needed
    assert exited[0]["exit_code"] == -signal.SIGTERM


async def test_an_older_master_leaves_the_tasks_alone(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    clock = StepClock()
    async with running_agent(_options(fake_master, tmp_path), monotonic=clock) as agent:
        await _running_task(fake_master, context_server, agent)
        clock.advance(1e6)
        assert not agent.check_master_contact()
        assert "a1" in agent.tasks and not fake_master.messages("task_exited")


async def test_sigstop_past_the_wait_then_sigcont_kills_the_task(
    fake_master: FakeMaster, context_server: ContextServer, tmp_path: Path
) -> None:
    """A real agent process, stopped and continued: its task's process is gone afterwards."""
    fake_master.reconnect_wait, fake_master.kill_grace_period = 1.0, 1.0
    script = (
        f"import logging; logging.basicConfig(level=logging.INFO)\n"
        f"from pedl.agent import AgentOptions, run_agent\n"
        f"run_agent(AgentOptions({fake_master.url!r}, agent_id='frozen', token='t', "
        f"work_dir={str(tmp_path / 'work')!r}))\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE)
    try:
        await eventually(lambda: fake_master.messages("register"), what="registration")
        await fake_master.send(_start("a1", context_server.add("c1", {}), SLEEPER))
        ready = await eventually(
            lambda: [m for m in _messages(fake_master, "a1") if m.startswith("ready")], what="the task to run"
        )
        task_pid = int(ready[0].split()[1])
        (started,) = fake_master.messages("task_started")
        namespace = task_processes.task_namespace(started["pid"]) if NAMESPACES else None
        if namespace is not None:  # the pid the task printed is its pid in its own PID namespace
            task_pid = task_processes.host_pid(namespace, task_pid)
        proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(2.0)  # past the reconnect wait; the task runs on meanwhile
        os.kill(task_pid, 0)
        proc.send_signal(signal.SIGCONT)
        exited = await eventually(lambda: fake_master.messages("task_exited"), what="the exit report")
        assert "reconnect wait" in exited[0]["reason"]
        if namespace is not None:  # the kernel ends the namespace's processes once its init is killed
            await eventually(lambda: task_processes.members(namespace) == [], what="the task's namespace to empty")
        else:
            with pytest.raises(ProcessLookupError):
                os.kill(task_pid, 0)
        assert len(fake_master.sessions) == 1  # killed on the same connection, before any reconnect
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            await proc.communicate()
