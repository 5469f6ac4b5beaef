"""Who a task runs as (its owner's agent user group, Determined's `det user link-with-agent-user`):
the checks and arguments for a process task (uid, gid, groups, HOME) and a container task
(`--user uid:gid`, and /etc/passwd and /etc/group that name them). Pure but for the account lookups."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from pedl.common.agent_protocol import AgentUserGroup


def effective(run_as: AgentUserGroup | None, euid: int) -> AgentUserGroup | None:
    """Who this agent runs a task as. A user's own uid that the master derived (`derived`: the user has
    no link) applies where the agent runs as root; any other agent runs such a task as itself, as it
    runs every task (only root changes user)."""
    if run_as is not None and run_as.derived and euid != 0:
        return None
    return run_as


def refusal(run_as: AgentUserGroup | None, agent_id: str, euid: int, egid: int) -> str | None:
    """Why this agent cannot run the task as `run_as`, or None. Only root changes user; an agent
    running as the very uid and gid asked for runs the task as itself."""
    if run_as is None or euid == 0 or (run_as.uid, run_as.gid) == (euid, egid):
        return None
    return (
        f"the task must run as agent user {run_as.user} (uid {run_as.uid}, gid {run_as.gid}, its owner's "
        f"agent user group), but agent {agent_id} runs as uid {euid}, not root, and cannot change user; "
        "run the agent as root, or unlink the user (det user link-with-agent-user)"
    )


@dataclass(frozen=True)
class ProcessUser:
    """What a process task is spawned with: Popen's user, group and extra_groups; its variables."""

    uid: int
    gid: int
    groups: list[int]
    env: dict[str, str]
    notes: list[str]  # for the task's log: the names the host does not know as the group says


def process_user(run_as: AgentUserGroup, task_home: Path, *, names_shown: bool = False) -> ProcessUser:
    """The process's ids, supplementary groups (the host's for that user, else none) and HOME, USER
    and LOGNAME. A uid or gid the host has no account for runs all the same; without `names_shown`
    (the task's namespace shows it account files naming the link: `account_files`) the log says
    `id -u -n` will not find the name. HOME is the account's home where it exists, else `task_home`
    (the task's own directory, as the task sees it: Determined's /run/determined/workdir in its
    namespace)."""
    notes: list[str] = []
    home = str(task_home)
    groups = [run_as.gid]
    try:
        entry = pwd.getpwuid(run_as.uid)
    except KeyError:
        if not names_shown:
            notes.append(
                f"this host has no user with uid {run_as.uid}: the task runs as uid {run_as.uid} but "
                f"`id -u -n` will not find the name {run_as.user!r} (create the user on the agent's "
                f"host, e.g. useradd -u {run_as.uid} {run_as.user})"
            )
    else:
        if entry.pw_name != run_as.user and not names_shown:
            notes.append(f"uid {run_as.uid} is {entry.pw_name!r} on this host, not {run_as.user!r}")
        if entry.pw_dir and os.path.isdir(entry.pw_dir):  # nobody's is /nonexistent: the task dir then
            home = entry.pw_dir
        groups = sorted(set(os.getgrouplist(entry.pw_name, run_as.gid)))
    try:
        group = grp.getgrgid(run_as.gid)
    except KeyError:
        if not names_shown:
            notes.append(
                f"this host has no group with gid {run_as.gid}: `id -g -n` will not find the name "
                f"{run_as.group!r} (e.g. groupadd -g {run_as.gid} {run_as.group})"
            )
    else:
        if group.gr_name != run_as.group and not names_shown:
            notes.append(f"gid {run_as.gid} is {group.gr_name!r} on this host, not {run_as.group!r}")
    env = {"HOME": home, "USER": run_as.user, "LOGNAME": run_as.user}
    return ProcessUser(run_as.uid, run_as.gid, groups, env, notes)


def blocked_at(path: Path, uid: int, groups: list[int]) -> Path | None:
    """The first directory on the way to `path` that uid (with these groups) may not enter, or None.
    A task reaches its files by relative paths whatever this says; HOME and absolute paths need it."""
    if uid == 0:
        return None
    for directory in reversed([path, *path.parents]):
        try:
            st = os.stat(directory)
        except OSError:
            return directory
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid in groups else stat.S_IXOTH
        if not st.st_mode & bit:
            return directory
    return None


def storage_note(path: Path, uid: int, groups: list[int]) -> str | None:
    """What keeps uid (with these groups) from making checkpoints in the storage directory `path`, for
    the task's log; None when nothing does (judged by mode bits)."""
    blocked = blocked_at(path, uid, groups)
    if blocked is not None:
        return (
            f"uid {uid} cannot enter {blocked}, so the task cannot reach the checkpoint storage's host_path "
            f"{path}: every directory above it must be enterable by the task users (chmod o+x)"
        )
    try:
        st = os.stat(path)
    except OSError:
        return None
    bit = stat.S_IWUSR if st.st_uid == uid else stat.S_IWGRP if st.st_gid in groups else stat.S_IWOTH
    if uid == 0 or st.st_mode & bit:
        return None
    return (
        f"uid {uid} may not create checkpoints in the checkpoint storage's host_path {path} (mode "
        f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): make it mode 1777, as the agent makes one it "
        "creates, or writable by the task users' group"
    )


def give_tree(root: Path, uid: int, gid: int) -> None:
    """Make `root` and everything under it (the task's unpacked model directory, its info files)
    the task user's, so it can work in its own directory. Links are changed, not followed."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)


def account_files(run_as: AgentUserGroup, home: str, directory: Path) -> tuple[Path, Path] | None:
    """The host's /etc/passwd and /etc/group with the linked user and group in them (as
    `passwd_lines` makes a container's) and without the `tty` group, written to `directory` for a
    process task's namespace to show over the host's; None when the host's already name them so and
    have no `tty` group. Without `tty`, an sshd the task runs as its user (a shell) gives a session
    its terminal in the user's own group: with it, sshd would have to chown the terminal to that
    group, which only root may, and the session dies (det shell open always asks for a terminal)."""
    passwd, group = Path("/etc/passwd").read_text(), Path("/etc/group").read_text()
    new_passwd, new_group = passwd_lines(passwd, group, run_as, home)
    new_group = "".join(f"{line}\n" for line in new_group.splitlines() if line.split(":", 1)[0] != "tty")
    if new_passwd == passwd and new_group == group:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "passwd", directory / "group"
    out[0].write_text(new_passwd)
    out[1].write_text(new_group)
    for path in (directory, *out):
        os.chmod(path, 0o755 if path == directory else 0o644)
    return out


def passwd_lines(passwd: str, group: str, run_as: AgentUserGroup, home: str) -> tuple[str, str]:
    """A container image's /etc/passwd and /etc/group naming the task's user and group as the
    link says, as Determined's agent does: an image entry with that name or that id gives way to
    the linked one (the task runs as that id whatever the image calls it); an identical one stays."""
    passwd = _with_entry(passwd, run_as.user, run_as.uid, f"{run_as.user}:x:{run_as.uid}:{run_as.gid}::{home}:/bin/sh")
    group = _with_entry(group, run_as.group, run_as.gid, f"{run_as.group}:x:{run_as.gid}:")
    return passwd, group


def _with_entry(text: str, name: str, id_: int, line: str) -> str:
    kept = []
    for old in text.splitlines():
        fields = old.split(":")
        if len(fields) > 2 and not old.startswith("#") and (fields[0] == name or fields[2] == str(id_)):
            if fields[0] == name and fields[2] == str(id_):
                return text  # the image has it already
            continue
        kept.append(old)
    return "".join(f"{old}\n" for old in kept) + line + "\n"
