"""A process task's private view of the fixed paths Determined's harness uses: run as
`python -m pedl.common.mount_namespace --bind SRC DST ... -- ARGV`, it enters a mount namespace of its
own, bind-mounts each SRC over DST there, and becomes ARGV. Two tasks on one agent each see their
own `/run/determined/info`; the host's mount table never changes.

Needs CAP_SYS_ADMIN (the agent runs as root, as Determined's does). `probe()` tells the agent at
start whether it can; without it tasks run as plain processes and a Determined script finds no
cluster info (the master then fails its trial with a message saying so).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_BIND = 0x1000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
PR_SET_NO_NEW_PRIVS = 38
MOUNTPOINTS_MODE = 0o755


class NamespaceError(Exception):
    """The namespace or a mount could not be made; the message names the step and the path."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise NamespaceError(f"{what}: {os.strerror(err)}")


def enter(binds: Sequence[tuple[str, str, bool]], shm_size: int | None = None) -> None:
    """Enter a new mount namespace (changes stay private to it) and bind each (source, target,
    read_only) there. Targets must exist. `shm_size`: a /dev/shm of the task's own, of that many bytes
    (a tmpfs, as Docker's --shm-size gives a container)."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # without this, mounts made here could propagate back to the host's shared mounts
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    if shm_size is not None:
        _check(libc.mount(b"shm", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          f"size={int(shm_size)},mode=1777".encode()), f"mounting a /dev/shm of {shm_size} bytes")
    for source, target, read_only in binds:
        src, dst = os.fsencode(source), os.fsencode(target)
        _check(libc.mount(src, dst, None, MS_BIND | MS_REC, None), f"bind-mounting {source} on {target}")
        if read_only:
            _check(libc.mount(b"none", dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None),
                   f"making {target} read-only")


def prepare_mountpoints(targets: Sequence[str]) -> None:
    """Create the (empty) host directories the binds cover; the agent does this once, as root."""
    for target in targets:
        Path(target).mkdir(parents=True, exist_ok=True, mode=MOUNTPOINTS_MODE)


def wrap(argv: Sequence[str], binds: Sequence[tuple[str, str, bool]],
         user: tuple[int, int, Sequence[int]] | None = None, chdir: str | None = None,
         shm_size: int | None = None, no_new_privs: bool = False) -> list[str]:
    """The command line that runs `argv` with `binds` in a namespace of its own, and then, when
    `user` (uid, gid, supplementary gids) is given, as that user: mounting needs root, so the
    wrapper changes user only after it. `chdir`: the directory it then works in (a bind's target)."""
    out = [sys.executable, "-I", "-m", "pedl.common.mount_namespace"]
    for source, target, read_only in binds:
        out += ["--bind-ro" if read_only else "--bind", source, target]
    if user is not None:
        uid, gid, groups = user
        out += ["--user", f"{uid}:{gid}:{','.join(str(g) for g in groups)}"]
    if chdir is not None:
        out += ["--chdir", chdir]
    if shm_size is not None:
        out += ["--shm-size", str(int(shm_size))]
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
        done = subprocess.run([sys.executable, "-I", "-m", "pedl.common.mount_namespace", "--", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the namespace probe did not run: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["the namespace probe failed"])[-1]
    return None


def _parse(args: list[str]) -> tuple[list[tuple[str, str, bool]], dict[str, str], list[str]]:
    binds: list[tuple[str, str, bool]] = []
    options: dict[str, str] = {}  # --user, --chdir, --shm-size
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--no-new-privs":
            options[flag] = "1"
            continue
        if flag in ("--user", "--chdir", "--shm-size") and args:
            options[flag] = args.pop(0)
            continue
        if flag not in ("--bind", "--bind-ro") or len(args) < 2:
            raise NamespaceError("usage: --bind[-ro] SRC DST ... [--user UID:GID:GIDS] [--chdir DIR] "
                                 f"[--shm-size BYTES] -- ARGV (got {flag!r})")
        binds.append((args.pop(0), args.pop(0), flag == "--bind-ro"))
    if not args:
        raise NamespaceError("usage: --bind[-ro] SRC DST ... -- ARGV (no --)")
    argv = args[1:]
    if not argv:
        raise NamespaceError("no command after --")
    return binds, options, argv


def main(args: list[str]) -> int:
    try:
        binds, options, argv = _parse(list(args))
        shm = options.get("--shm-size")
        if shm is not None and not shm.isdigit():
            raise NamespaceError(f"--shm-size takes a number of bytes, not {shm!r}")
        enter(binds, int(shm) if shm is not None else None)
    except NamespaceError as exc:
        print(f"pedl task namespace: {exc}", file=sys.stderr)
        return 126
    user, chdir = options.get("--user"), options.get("--chdir")
    if user is not None:
        try:
            become(user)
        except (OSError, ValueError) as exc:
            print(f"pedl task namespace: cannot become {user}: {exc}", file=sys.stderr)
            return 126
    if "--no-new-privs" in options:
        try:
            _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        except NamespaceError as exc:
            print(f"pedl task namespace: {exc}", file=sys.stderr)
            return 126
    if chdir is not None:
        try:
            os.chdir(chdir)
        except OSError as exc:
            print(f"pedl task namespace: cannot work in {chdir}: {exc.strerror or exc}", file=sys.stderr)
            return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"pedl task namespace: cannot run {argv[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
