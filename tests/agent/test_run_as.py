"""Who a task runs as (its owner's agent user group): the refusal of a non-root agent, the
process's ids and HOME, the container's --user and account files, and real tasks as uid 65534."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pwd
import shutil
import stat
import textwrap
from pathlib import Path

import pytest

from pedl.agent import run_as
from pedl.agent.containers import run_argv
from pedl.agent.task_env import TaskHost
from pedl.agent.task_runtime import TaskRuntime
from pedl.common.agent_protocol import AgentUserGroup, ContainerSpec, SlotInfo, StartTask
from pedl.common.mount_namespace import probe, wrap
from pedl.config.security_config import TASK_UID_BASE
from tests.support import task_processes
from tests.support.shared_dirs import make_enterable_dir

from .conftest import ContextServer, eventually
from .test_task_runtime import STUBBORN, Recorder

NOBODY = AgentUserGroup(uid=65534, gid=65534, user="nobody", group="nogroup")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs tasks as another user")
NS_PROBLEM = probe()


def test_only_root_changes_user_and_a_non_root_agent_says_so() -> None:
    assert run_as.refusal(None, "a1", 1000, 1000) is None
    assert run_as.refusal(NOBODY, "a1", 0, 0) is None
    assert run_as.refusal(AgentUserGroup(uid=1000, gid=1000, user="me", group="me"), "a1", 1000, 1000) is None
    why = run_as.refusal(NOBODY, "a1", 1000, 1000)
    assert why is not None and "nobody (uid 65534, gid 65534" in why and "agent a1 runs as uid 1000" in why
    assert "root" in why


def test_a_known_account_gives_its_groups_and_home(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid())
    group = AgentUserGroup(uid=me.pw_uid, gid=me.pw_gid, user=me.pw_name, group="whatever")
    user = run_as.process_user(group, tmp_path)
    assert (user.uid, user.gid) == (me.pw_uid, me.pw_gid)
    assert me.pw_gid in user.groups
    assert user.env["USER"] == user.env["LOGNAME"] == me.pw_name
    assert user.env["HOME"] == (me.pw_dir if os.path.isdir(me.pw_dir) else str(tmp_path))


def test_an_unknown_uid_runs_with_a_note_naming_the_user(tmp_path: Path) -> None:
    uid = next(u for u in range(43210, 43300) if not _exists(u))
    user = run_as.process_user(AgentUserGroup(uid=uid, gid=uid, user="someuser", group="somegroup"), tmp_path)
    assert user.groups == [uid] and user.env["HOME"] == str(tmp_path)
    assert any(f"no user with uid {uid}" in n and "'someuser'" in n for n in user.notes)
    assert any(f"no group with gid {uid}" in n and "'somegroup'" in n for n in user.notes)


def _exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def test_the_account_files_get_the_user_and_group_unless_the_image_has_them() -> None:
    passwd, group = run_as.passwd_lines(
        "root:x:0:0:root:/root:/bin/bash\n",
        "root:x:0:\n",
        AgentUserGroup(uid=200, gid=300, user="someuser", group="somegroup"),
        "/run/determined/workdir",
    )
    assert passwd.splitlines()[-1] == "someuser:x:200:300::/run/determined/workdir:/bin/sh"
    assert group.splitlines()[-1] == "somegroup:x:300:"
    same, same_group = run_as.passwd_lines(
        passwd, group, AgentUserGroup(uid=200, gid=300, user="someuser", group="somegroup"), "/w"
    )
    assert (same, same_group) == (passwd, group)
    # an image entry with that name or id gives way: `id -u -n` names the linked user
    passwd, group = run_as.passwd_lines(
        "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
        "root:x:0:\nnogroup:x:65534:\n",
        AgentUserGroup(uid=65534, gid=65534, user="det-nobody", group="det-nobody"),
        "/w",
    )
    assert passwd == "root:x:0:0::/root:/bin/sh\ndet-nobody:x:65534:65534::/w:/bin/sh\n"
    assert group == "root:x:0:\ndet-nobody:x:65534:\n"


def test_a_container_runs_as_the_user_with_its_account_files() -> None:
    argv = run_argv(
        spec=ContainerSpec(image_cpu="img"),
        image="img",
        allocation_id="1.a",
        agent_id="a1",
        task_dir=Path("/w/1.a"),
        info_dir=None,
        env_file=Path("/w/1.a.env"),
        entrypoint=["id"],
        gpu_devices=[],
        shared_fs=None,
        master_cert=None,
        user=(200, 300),
        accounts=Path("/w/1.a.etc"),
    )
    assert argv[argv.index("--user") + 1] == "200:300"
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert "/w/1.a.etc/passwd:/etc/passwd:ro" in mounts and "/w/1.a.etc/group:/etc/group:ro" in mounts
    assert argv[-2:] == ["img", "id"]
    plain = run_argv(
        spec=ContainerSpec(image_cpu="img"),
        image="img",
        allocation_id="1.a",
        agent_id="a1",
        task_dir=Path("/w/1.a"),
        info_dir=None,
        env_file=Path("/w/1.a.env"),
        entrypoint=["id"],
        gpu_devices=[],
        shared_fs=None,
        master_cert=None,
    )
    assert "--user" not in plain


def test_the_namespace_wrapper_changes_user_after_mounting() -> None:
    argv = wrap(["id"], [("/a", "/b", True)], user=(65534, 65534, [65534, 100]))
    assert argv[argv.index("--user") + 1] == "65534:65534:65534,100"
    assert argv.index("--user") < argv.index("--") and argv[-1] == "id"
    assert "--user" not in wrap(["id"], [])


def _task(
    tmp_path: Path,
    url: str,
    group: AgentUserGroup | None,
    namespace: str | None,
    entrypoint: str | list[str] = "echo $(id -u):$(id -g):$(id -G):$HOME:$USER; touch mine && ls -n mine",
) -> tuple[TaskRuntime, Recorder]:
    spec = StartTask(
        allocation_id="alloc-1",
        task_id="task-1",
        name="cmd",
        env={"DET_TRIAL_ID": "1"},
        entrypoint=entrypoint,
        slot_ids=["0"],
        session_token="tok",
        context_url=url,
        run_as=group,
    )
    host = TaskHost(
        master_url="http://127.0.0.1:9",
        agent_id="agent-1",
        work_dir=tmp_path / "work",
        slots={"0": SlotInfo(id="0")},
        no_task_namespace=namespace,
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    recorder = Recorder()
    return TaskRuntime(spec, host, recorder), recorder


@as_root
@pytest.mark.parametrize("namespace", [None, "off"], ids=["namespace", "plain"])
async def test_a_process_task_runs_as_its_agent_user(
    tmp_path: Path, context_server: ContextServer, namespace: str | None
) -> None:
    if namespace is None and NS_PROBLEM is not None:
        pytest.skip(f"no mount namespaces here: {NS_PROBLEM}")
    url = context_server.add("c1", {"model_def.py": "x = 1\n"})
    runtime, rec = _task(tmp_path, url, NOBODY, namespace)
    assert await runtime.run() == 0, rec.lines()
    out = rec.lines("stdout")
    # nobody's home does not exist: its directory is, where the task sees it
    home = "/run/determined/workdir" if namespace is None else runtime.directory
    assert out[0] == f"65534:65534:65534:{home}:nobody", out
    assert " 65534 65534 " in out[1]  # it owns what it writes in its own directory
    assert (runtime.directory / "model_def.py").stat().st_uid == 65534


def test_the_first_directory_a_user_cannot_enter_is_named(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    inner = tmp_path / "work" / "alloc-1"
    assert run_as.blocked_at(inner, 0, []) is None  # root enters anything
    assert run_as.blocked_at(inner, 65534, [65534]) in (tmp_path, *tmp_path.parents)
    os.chmod(tmp_path, 0o701)  # others may enter it now: what stops them is above it, if anything
    assert run_as.blocked_at(inner, 65534, [65534]) in (None, inner.parent, *tmp_path.parents)


@as_root
async def test_a_task_of_another_user_works_in_its_directory_at_determineds_path(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """A root agent's work dir is one other users cannot enter (the default is under /root; here
    tmp_path is 0700), so a linked user's task could not reach its HOME (its directory, when the
    account has none) by absolute path: det in the task failed making $HOME/.config. In its
    namespace it works in its directory at /run/determined/workdir, as in Determined's containers."""
    if NS_PROBLEM is not None:
        pytest.skip(f"no mount namespaces here: {NS_PROBLEM}")
    os.chmod(tmp_path, 0o700)
    assert run_as.blocked_at(tmp_path / "work" / "alloc-1", 65534, [65534]) is not None
    url = context_server.add("c1", {"model_def.py": "x = 1\n"})
    script = (
        'mkdir -p "$HOME/.config/determined" && echo token > "$HOME/.config/determined/auth.json" && '
        'echo "$(/bin/pwd -P):$PWD:$HOME" && cat "$PWD/model_def.py"'
    )
    runtime, rec = _task(tmp_path, url, NOBODY, None, entrypoint=script)
    assert await runtime.run() == 0, rec.lines()
    assert rec.lines("stdout") == ["/run/determined/workdir:/run/determined/workdir:/run/determined/workdir", "x = 1"]
    written = runtime.directory / ".config" / "determined" / "auth.json"
    assert written.read_text() == "token\n" and written.stat().st_uid == 65534
    assert not any("cannot enter" in line for line in rec.lines("agent"))


@as_root
async def test_without_a_namespace_the_log_says_the_task_directory_is_out_of_reach(
    tmp_path: Path, context_server: ContextServer
) -> None:
    os.chmod(tmp_path, 0o700)
    url = context_server.add("c1", {})
    runtime, rec = _task(tmp_path, url, NOBODY, "off")
    assert await runtime.run() == 0, rec.lines()
    assert any(
        "uid 65534 cannot enter" in line and str(runtime.directory) in line and "--work-dir" in line
        for line in rec.lines("agent")
    ), rec.lines("agent")


@as_root
async def test_an_unknown_uid_runs_and_its_log_says_the_name_is_missing(
    tmp_path: Path, context_server: ContextServer
) -> None:
    uid = next(u for u in range(43210, 43300) if not _exists(u))
    url = context_server.add("c1", {})
    runtime, rec = _task(tmp_path, url, AgentUserGroup(uid=uid, gid=uid, user="someuser", group="somegroup"), "off")
    assert await runtime.run() == 0, rec.lines()
    assert rec.lines("stdout")[0].startswith(f"{uid}:{uid}:{uid}:")
    assert any(f"no user with uid {uid}" in line for line in rec.lines("agent"))


async def test_a_non_root_agent_fails_a_task_that_must_change_user(
    tmp_path: Path, context_server: ContextServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    url = context_server.add("c1", {})
    runtime, rec = _task(tmp_path, url, NOBODY, "off")
    assert await runtime.run() is None
    assert rec.of("task_started") == []
    assert "agent agent-1 runs as uid 1000, not root" in rec.exited["reason"]


DERIVED = AgentUserGroup(
    uid=TASK_UID_BASE + 7, gid=TASK_UID_BASE + 7, user="pedl-user-alice", group="pedl-user-alice", derived=True
)


def test_a_users_derived_uid_applies_on_a_root_agent_and_any_other_runs_the_task_as_itself() -> None:
    assert run_as.effective(DERIVED, 0) == DERIVED
    assert run_as.effective(DERIVED, 1000) is None  # a non-root agent cannot change user: not a refusal
    assert run_as.effective(NOBODY, 1000) == NOBODY  # a link must be honoured or refused
    assert run_as.refusal(run_as.effective(DERIVED, 1000), "a1", 1000, 1000) is None


@as_root
async def test_a_users_own_uid_runs_their_task_and_owns_its_closed_directory(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """Each user with no link runs as a uid of their own, named as the master names it; the task's
    directory and info files are closed to every other uid, other users' tasks among them."""
    if NS_PROBLEM is not None:
        pytest.skip(f"no mount namespaces here: {NS_PROBLEM}")
    url = context_server.add("c1", {"model_def.py": "x = 1\n"})
    runtime, rec = _task(
        tmp_path,
        url,
        DERIVED,
        None,
        entrypoint="echo $(id -u):$(id -g):$(id -u -n):$(id -g -n); ls -ln /run/determined/info",
    )
    assert await runtime.run() == 0, rec.lines()
    out = rec.lines("stdout")
    assert out[0] == f"{DERIVED.uid}:{DERIVED.gid}:pedl-user-alice:pedl-user-alice", out
    assert all(f" {DERIVED.uid} {DERIVED.gid} " in line for line in out[2:]), out  # its info files are its own
    st = runtime.directory.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (DERIVED.uid, 0o700)


@as_root
async def test_a_checkpoint_storage_the_agent_creates_is_open_to_every_users_tasks(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """Mode 1777, as /tmp: each user's trials make their checkpoint directories, none removes another's."""
    if NS_PROBLEM is not None:
        pytest.skip(f"no mount namespaces here: {NS_PROBLEM}")
    base = make_enterable_dir("storage")
    try:
        storage = base / "ckpts"
        config = json.dumps(
            {"checkpoint_storage": {"type": "shared_fs", "host_path": str(storage), "storage_path": "team"}}
        )
        url = context_server.add("c1", {})
        runtime, rec = _task(tmp_path, url, DERIVED, None, entrypoint=f"mkdir {storage}/team/mine && echo made")
        runtime.spec.env.update(DET_EXPERIMENT_CONFIG=config, DET_CLUSTER_ID="c1")
        assert await runtime.run() == 0, rec.lines()
        shared = [
            storage,
            storage / "team",
            storage / "team" / "c1",
            storage / "team" / "c1" / "tensorboard",
            storage / "team" / "c1" / "tensorboard" / "experiment",
        ]  # where every user's tasks write
        assert [stat.S_IMODE(p.stat().st_mode) for p in shared] == [0o1777] * 5
        assert (storage / "team" / "mine").stat().st_uid == DERIVED.uid
        os.chmod(storage, 0o755)  # one the operator made, and closed: the task's log says why checkpoints fail
        runtime, rec = _task(tmp_path, url, DERIVED, None, entrypoint="true")
        runtime.spec.env["DET_EXPERIMENT_CONFIG"] = config
        assert await runtime.run() == 0, rec.lines()
        assert any(
            f"uid {DERIVED.uid} may not create checkpoints in the checkpoint storage's host_path {storage}" in line
            for line in rec.lines("agent")
        ), rec.lines("agent")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@as_root
async def test_a_kill_reaches_every_process_of_a_task_in_its_namespace(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """SIGTERM reaches the task's processes through its namespace's init, SIGKILL after the grace period
    ends them all, and the agent reports the signal."""
    if NS_PROBLEM is not None:
        pytest.skip(f"no mount namespaces here: {NS_PROBLEM}")
    url = context_server.add("c1", {"stubborn.py": textwrap.dedent(STUBBORN)})
    runtime, rec = _task(tmp_path, url, DERIVED, None, entrypoint=["python3", "stubborn.py"])
    run = asyncio.create_task(runtime.run())
    await eventually(lambda: "ready" in rec.lines(), what="the task to be ready")
    namespace = task_processes.task_namespace(rec.of("task_started")[0]["pid"])
    assert len(task_processes.members(namespace)) >= 3  # the init, the task (under its shell) and its child
    runtime.kill(grace_period=1.0, reason="user asked")
    assert await asyncio.wait_for(run, 60) == -9
    assert "parent got SIGTERM" in rec.lines() and "child got SIGTERM" in rec.lines()
    await eventually(lambda: task_processes.members(namespace) == [], what="the task's processes to end")


async def test_a_container_mounting_outside_the_allowed_roots_is_refused_judged_resolved(
    tmp_path: Path, context_server: ContextServer
) -> None:
    """Docker mounts as root whatever the task's user may read: the allowed roots, judged on the path
    resolved on this host (a link inside a root may lead out of it), are what bound a container's mounts."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "link").symlink_to("/etc")
    url = context_server.add("c1", {})
    for mounts, ok in (
        ([{"host_path": str(allowed), "container_path": "/a"}], True),
        ([{"host_path": str(allowed / "link"), "container_path": "/a"}], False),
    ):
        runtime, rec = _task(tmp_path, url, None, None, entrypoint="true")
        runtime.spec.container = ContainerSpec(image_cpu="pedl-no-such-image:1", bind_mounts=mounts)
        runtime.spec.bind_mount_roots = [str(allowed)]
        runtime._host = dataclasses.replace(runtime._host, no_containers=None)
        assert await runtime.run() is None
        refused = "bind_mounts[0].host_path" in rec.exited["reason"]
        assert refused is not ok, rec.exited["reason"]
    assert f"{allowed / 'link'} is /etc, outside the host paths this cluster allows" in rec.exited["reason"]
