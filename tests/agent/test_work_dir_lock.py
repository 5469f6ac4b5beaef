"""One agent per work dir: two `pedl agent run` on one host with the same (default) id never share
the first one's work dir; the second is refused, exit 2, with how to set --id."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from pedl.agent.work_dir_lock import LOCK_NAME, WorkDirError, WorkDirInUse, lock_work_dir
from pedl.common.ports import free_port
from pedl.devcluster import ManagedProcess, pedl_command, wait_for


def test_a_second_lock_on_a_held_work_dir_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    with lock_work_dir(tmp_path / "w", "box", default_work_dir=True) as held:
        assert json.loads(held.path.read_text()) == {"pid": os.getpid(), "agent_id": "box"}
        with pytest.raises(WorkDirInUse) as same_id:
            lock_work_dir(tmp_path / "w", "box", default_work_dir=True)
        assert str(same_id.value) == (
            f"another agent with id box runs on this host (pid {os.getpid()}, work dir {tmp_path / 'w'}); "
            f"start this one with --id NAME (e.g. --id box-2)"
        )
        with pytest.raises(WorkDirInUse, match="--id NAME and its own --work-dir"):
            lock_work_dir(tmp_path / "w", "box")  # an explicit --work-dir stays the same with another id
        with pytest.raises(WorkDirInUse) as other_id:
            lock_work_dir(tmp_path / "w", "other")
        assert str(other_id.value) == (
            f"another agent (id box, pid {os.getpid()}) uses the work dir {tmp_path / 'w'}; "
            f"start this one with its own --work-dir"
        )
        with lock_work_dir(tmp_path / "elsewhere", "box"):  # another work dir is another lock
            pass
    with lock_work_dir(tmp_path / "w", "other"):  # released: the next agent takes it
        assert json.loads((tmp_path / "w" / LOCK_NAME).read_text())["agent_id"] == "other"


def test_a_work_dir_that_cannot_be_created_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(WorkDirError, match=f"cannot use the work dir {tmp_path / 'file' / 'w'}"):
        lock_work_dir(tmp_path / "file" / "w", "box")


@pytest.fixture
def agents(tmp_path: Path):
    """Start `pedl agent run` processes on this host (HOME in tmp_path); all are stopped at the end.
    No master answers at their URL: an agent keeps retrying, which is all these tests need."""
    url = f"http://127.0.0.1:{free_port()}"
    procs: list[ManagedProcess] = []

    def start(name: str, *extra: str) -> ManagedProcess:
        argv = [*pedl_command(), "agent", "run", "--master", url, "--no-token", "--slots", "1", *extra]
        env = {"HOME": str(tmp_path / "home"), "PEDL_AGENT_TOKEN": ""}
        procs.append(ManagedProcess(argv, tmp_path / f"{name}.log", env=env).start())
        return procs[-1]

    yield start
    for proc in procs:
        proc.stop(30)


def started(proc: ManagedProcess) -> bool:
    if not proc.alive():
        raise AssertionError(f"the agent exited: {proc.log_text()}")
    return " starting: master " in proc.log_text()


def refused(proc: ManagedProcess) -> str:
    """The log of an agent that must exit at once with status 2."""
    wait_for(lambda: not proc.alive(), 60, what="the second agent to be refused")
    assert proc.stop() == 2, proc.log_text()
    assert "starting" not in proc.log_text()  # refused before it ever reached for the master
    return " ".join(proc.log_text().split())


def test_two_agents_with_the_default_id_on_one_host_the_second_is_refused(tmp_path: Path, agents) -> None:
    host = socket.gethostname()
    default_dir = tmp_path / "home" / ".local" / "share" / "pedl" / "agent" / host
    first = agents("first")
    wait_for(lambda: started(first), 60, what="the first agent to start")
    log = refused(agents("second"))
    assert (
        f"another agent with id {host} runs on this host (pid {first.pid}, work dir {default_dir}); "
        f"start this one with --id NAME"
    ) in log

    # as told: another id, hence another work dir, and it runs beside the first
    third = agents("third", "--id", f"{host}-2")
    wait_for(lambda: started(third), 60, what="the agent with another id to start")
    assert f"work dir {default_dir.parent / f'{host}-2'}" in third.log_text()
    assert third.stop(30) == 0  # one SIGTERM: a second, once it is shutting down, would end it at once (-15)

    # the first one gone, its id is free again
    assert first.stop(30) == 0
    again = agents("again")
    wait_for(lambda: started(again), 60, what="an agent with the freed id to start")


def test_an_agent_with_another_id_is_refused_the_work_dir_of_a_running_one(tmp_path: Path, agents) -> None:
    shared = tmp_path / "shared"
    first = agents("first", "--id", "a1", "--work-dir", str(shared))
    wait_for(lambda: started(first), 60, what="the first agent to start")
    log = refused(agents("second", "--id", "a2", "--work-dir", str(shared)))
    assert f"another agent (id a1, pid {first.pid}) uses the work dir {shared}" in log
