"""A process task's namespaces: run as `python -m pedl.common.mount_namespace --bind SRC DST ... -- ARGV`,
it enters a mount and a PID namespace of its own, builds the task's view there (task_mounts.py: pedl's
binds over Determined's fixed paths, the task's bind_mounts opened as its user, a /proc of its own) and
runs ARGV under a small init (task_init.py). Two tasks on one agent each see their own
`/run/determined/info` and only their own processes; the host's mount table never changes.

Needs CAP_SYS_ADMIN (the agent runs as root, as Determined's does). `probe()` tells the agent at start
whether it can; without it tasks run as plain processes and a Determined script finds no cluster info
(the master then fails its trial with a message saying so).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pedl.common import task_init, task_mounts
from pedl.common.task_mounts import CLONE_NEWNS, CLONE_NEWPID, Bind, NamespaceError, View

PR_SET_NO_NEW_PRIVS = 38
MOUNTPOINTS_MODE = 0o755
OPTIONS = ("--user", "--chdir", "--shm-size", "--task-dir", "--allowed-roots")
USAGE = (
    "usage: [--bind[-ro] SRC DST | --user-bind[-ro] SRC DST] ... [--user UID:GID:GIDS] [--chdir DIR] "
    "[--shm-size BYTES] [--task-dir DIR] [--allowed-roots JSON] [--no-new-privs] -- ARGV"
)

__all__ = ["Bind", "NamespaceError", "main", "prepare_mountpoints", "probe", "wrap"]


def prepare_mountpoints(targets: Sequence[str]) -> None:
    """Create the (empty) host directories of Determined's fixed paths once, as root, so that a task
    needs no view of their parents (a mountpoint a task names is made in its view only)."""
    for target in targets:
        Path(target).mkdir(parents=True, exist_ok=True, mode=MOUNTPOINTS_MODE)


def wrap(
    argv: Sequence[str],
    binds: Sequence[tuple[str, str, bool] | Bind],
    user: tuple[int, int, Sequence[int]] | None = None,
    chdir: str | None = None,
    shm_size: int | None = None,
    no_new_privs: bool = False,
    *,
    task_dir: str | None = None,
    allowed_roots: Sequence[str] | None = None,
) -> list[str]:
    """The command line that runs `argv` in namespaces of its own with `binds` (a Bind with `as_user`: one
    of the task's bind_mounts), then, when `user` (uid, gid, supplementary gids) is given, as that user:
    mounting needs root, so the task changes user only after it. `chdir`: the directory it then works
    in (a bind's target). `task_dir`, `allowed_roots`: View's."""
    out = [sys.executable, "-I", "-m", "pedl.common.mount_namespace"]
    for bind in binds:
        b = bind if isinstance(bind, Bind) else Bind(*bind)
        flag = "--user-bind" if b.as_user else "--bind"
        out += [f"{flag}-ro" if b.read_only else flag, b.source, b.target]
    if user is not None:
        uid, gid, groups = user
        out += ["--user", f"{uid}:{gid}:{','.join(str(g) for g in groups)}"]
    for flag, value in (
        ("--chdir", chdir),
        ("--shm-size", None if shm_size is None else str(int(shm_size))),
        ("--task-dir", task_dir),
    ):
        if value is not None:
            out += [flag, value]
    if allowed_roots is not None:
        out += ["--allowed-roots", json.dumps(list(allowed_roots))]
    if no_new_privs:
        out += ["--no-new-privs"]
    return [*out, "--", *argv]


def become(spec: str) -> None:
    """Drop to `uid:gid:g1,g2,...` for good: supplementary groups, then the group, then the user."""
    uid, gid, groups = spec.split(":")
    os.setgroups([int(g) for g in groups.split(",") if g])
    os.setgid(int(gid))
    os.setuid(int(uid))


def probe() -> str | None:
    """None when this process may give tasks namespaces of their own, else why not."""
    if os.geteuid() != 0:
        return "the agent does not run as root"
    if not sys.platform.startswith("linux"):
        return "mount namespaces need Linux"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-m", "pedl.common.mount_namespace", "--", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the namespace probe did not run: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["the namespace probe failed"])[-1]
    return None


def _parse(args: list[str]) -> tuple[View, dict[str, str], list[str]]:
    binds: list[Bind] = []
    options: dict[str, str] = {}
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--no-new-privs":
            options[flag] = "1"
            continue
        if flag in OPTIONS and args:
            options[flag] = args.pop(0)
            continue
        if flag not in ("--bind", "--bind-ro", "--user-bind", "--user-bind-ro") or len(args) < 2:
            raise NamespaceError(f"{USAGE} (got {flag!r})")
        binds.append(Bind(args.pop(0), args.pop(0), read_only=flag.endswith("-ro"), as_user=flag.startswith("--user")))
    if not args:
        raise NamespaceError(f"{USAGE} (no --)")
    argv = args[1:]
    if not argv:
        raise NamespaceError("no command after --")
    shm = options.get("--shm-size")
    if shm is not None and not shm.isdigit():
        raise NamespaceError(f"--shm-size takes a number of bytes, not {shm!r}")
    user = None
    if "--user" in options:
        try:
            uid, gid, groups = options["--user"].split(":")
            user = (int(uid), int(gid), [int(g) for g in groups.split(",") if g])
        except ValueError:
            raise NamespaceError(f"--user takes UID:GID:GIDS, not {options['--user']!r}") from None
    try:
        roots = json.loads(options.get("--allowed-roots", "null"))
    except ValueError:
        roots = ""
    if roots is not None and not (isinstance(roots, list) and all(isinstance(r, str) for r in roots)):
        raise NamespaceError(f"--allowed-roots takes a JSON list of paths, not {options['--allowed-roots']!r}")
    view = View(binds, user, int(shm) if shm is not None else None, options.get("--task-dir"), roots)
    return view, options, argv


def _say(message: str) -> None:
    print(f"pedl task namespace: {message}", file=sys.stderr, flush=True)


def _setup(view: View, options: dict[str, str], argv: list[str]) -> task_init.Launch:
    """In the init of the task's PID namespace: the view, then what the task does before it execs."""
    task_mounts.make(view, _say)

    def before_exec() -> None:
        if "--user" in options:
            try:
                become(options["--user"])
            except (OSError, ValueError) as exc:
                raise OSError(f"cannot become {options['--user']}: {exc}") from None
        if "--no-new-privs" in options:
            task_mounts.check(task_mounts.libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        if "--chdir" in options:
            try:
                os.chdir(options["--chdir"])
            except OSError as exc:
                raise OSError(f"cannot work in {options['--chdir']}: {exc.strerror or exc}") from None

    return task_init.Launch(argv, before_exec)


def main(args: list[str]) -> int:
    try:
        view, options, argv = _parse(list(args))
        task_mounts.check(task_mounts.libc().unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare(CLONE_NEWNS|CLONE_NEWPID)")
    except NamespaceError as exc:
        _say(str(exc))
        return task_init.SETUP_FAILED
    task_init.run(lambda: _setup(view, options, argv), _say)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
