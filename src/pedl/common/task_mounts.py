"""A process task's view of the host, made by the root init of its namespaces (task_init.py): pedl's own
binds, the task's bind_mounts opened with its user's permissions, mountpoints made in the view only, and a
/proc of the task's PID namespace.

The host never changes. A mountpoint that does not exist is made in a view of its nearest existing
directory: a tmpfs over it holding each of its entries bound back from the host (so the task reads and
writes them as before) and the new mountpoint. One inside the task's own directory is made there, as the
task's user, without following links.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 0x20, 0x1000, 0x2000, 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
MAX_VIEW_ENTRIES = 1024  # a directory with more is not given a view: the task's log names it
VIEW_SIZE = "16m"  # what the tmpfs of a view may hold besides its binds (new entries of a root task)
# where views are built before they are moved over their directory: an empty directory of pedl's own (each
# task's namespace mounts on it privately, so every task uses the same one)
SCRATCH = "/run/pedl/view"


class NamespaceError(Exception):
    """The namespace, a mount or a bind_mounts entry could not be made; the message names the path."""


@dataclass(frozen=True)
class Bind:
    """`source` mounted on `target`. `as_user`: one of the task's bind_mounts, opened with the task
    user's permissions (one that does not exist is left out, with a note in the task's log)."""

    source: str
    target: str
    read_only: bool = False
    as_user: bool = False


@dataclass(frozen=True)
class View:
    binds: Sequence[Bind]
    user: tuple[int, int, list[int]] | None = None  # uid, gid, supplementary gids; None: the task is root
    shm_size: int | None = None  # a /dev/shm of the task's own, of that many bytes
    task_dir: str | None = None  # the task's directory: mountpoints in it are made there, as its user
    allowed_roots: list[str] | None = None  # bind_mounts' host paths must lie under one; None: anywhere


@functools.cache
def libc() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # find_library runs ldconfig: a process of its own, in the task's PID namespace too
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        raise NamespaceError(f"{what}: {os.strerror(ctypes.get_errno())}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None, what: str) -> None:
    check(
        libc().mount(
            source and os.fsencode(source),
            os.fsencode(target),
            fstype and fstype.encode(),
            flags,
            data and data.encode(),
        ),
        what,
    )


def make(view: View, note: Callable[[str], None]) -> None:
    """Build `view` in this process's (new) mount namespace, as root, from inside the task's PID
    namespace (its /proc shows that namespace)."""
    mount("none", "/", None, MS_REC | MS_PRIVATE, None, "making / private")  # nothing propagates to the host
    opened: list[tuple[Bind, int]] = []
    try:
        for bind in view.binds:  # every source before any view of a mountpoint can hide it
            fd = _open_source(bind, view, note)
            if fd is not None:
                opened.append((bind, fd))
        if view.shm_size is not None:
            mount(
                "shm",
                "/dev/shm",
                "tmpfs",
                MS_NOSUID | MS_NODEV | MS_NOEXEC,
                f"size={int(view.shm_size)},mode=1777",
                f"mounting a /dev/shm of {view.shm_size} bytes",
            )
        for bind, fd in opened:
            directory = stat.S_ISDIR(os.fstat(fd).st_mode)
            with _mountpoint(bind, directory, view) as (target, mounted):
                mount(
                    f"/proc/self/fd/{fd}",
                    target,
                    None,
                    MS_BIND | MS_REC,
                    None,
                    f"bind-mounting {bind.source} on {bind.target}",
                )
                if bind.read_only:
                    mount(
                        "none", mounted, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None, f"making {bind.target} read-only"
                    )
    finally:
        for _, fd in opened:
            os.close(fd)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mounting the task's /proc")


# -- sources ---------------------------------------------------------------------------------------


def _open_source(bind: Bind, view: View, note: Callable[[str], None]) -> int | None:
    if not bind.as_user:
        try:
            return os.open(bind.source, os.O_PATH | os.O_CLOEXEC)
        except OSError as exc:
            raise NamespaceError(f"bind-mounting {bind.source} on {bind.target}: {exc.strerror or exc}") from None
    fd = open_as(view.user, bind.source) if view.user is not None else _open_missing_ok(bind.source)
    if fd is None:
        note(f"bind_mounts: host_path {bind.source} does not exist here; {_shown(bind.target, view)} is not mounted")
        return None
    try:
        refused = root_problem(os.readlink(f"/proc/self/fd/{fd}"), view.allowed_roots)
    except BaseException:
        os.close(fd)
        raise
    if refused:
        os.close(fd)
        raise NamespaceError(f"bind_mounts: host_path {bind.source} {refused}")
    return fd


def _shown(target: str, view: View) -> str:
    """A mountpoint as the task's config named it: relative to the task's directory, where it is in it."""
    if view.task_dir is not None and target != view.task_dir and inside(target, view.task_dir):
        return os.path.relpath(target, view.task_dir)
    return target


def _open_missing_ok(path: str) -> int | None:
    try:
        return os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NamespaceError(f"bind_mounts: host_path {path}: {exc.strerror or exc}") from None


def open_as(user: tuple[int, int, list[int]], path: str) -> int | None:
    """`path` opened with the permissions of `user` (to reach it, and to read it), or None when it does
    not exist. A directory or regular file is opened for reading (an ACL has its say); anything else
    (a device: opening it would act on it) is judged by its mode bits. NamespaceError names the path
    when the user may not reach or read it."""
    uid, gid, groups = user
    try:
        with as_user(uid, gid, groups):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
                    readable = os.open(path, flags | (os.O_DIRECTORY if stat.S_ISDIR(st.st_mode) else 0))
                    again = os.fstat(readable)
                    os.close(fd)
                    fd = readable
                    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                        raise NamespaceError(f"bind_mounts: host_path {path} changed while it was opened")
                elif not mode_reads(st, uid, [gid, *groups]):
                    raise PermissionError(13, os.strerror(13))
            except BaseException:
                os.close(fd)
                raise
    except FileNotFoundError:
        return None
    except PermissionError:
        raise NamespaceError(
            f"bind_mounts: host_path {path} is not readable by uid {uid} (the task's user), so it "
            "is not mounted: a task mounts only what its user may read"
        ) from None
    except OSError as exc:
        raise NamespaceError(f"bind_mounts: host_path {path}: {exc.strerror or exc}") from None
    return fd


@contextlib.contextmanager
def as_user(uid: int, gid: int, groups: Sequence[int]) -> Iterator[None]:
    """Act with the user's permissions for a while (the effective ids; the real ones stay root). This
    process must have one thread: the ids are per thread."""
    saved_groups, saved_gid = os.getgroups(), os.getegid()
    os.setgroups(list(groups))
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(saved_gid)
        os.setgroups(saved_groups)


def mode_reads(st: os.stat_result, uid: int, gids: Sequence[int]) -> bool:
    bit = stat.S_IRUSR if st.st_uid == uid else stat.S_IRGRP if st.st_gid in gids else stat.S_IROTH
    return uid == 0 or bool(st.st_mode & bit)


def root_problem(real: str, roots: Sequence[str] | None) -> str | None:
    """Why a host path (resolved: no links) may not be mounted under `roots`; None when it may."""
    if roots is None:
        return None
    if not roots:
        return "is refused: this cluster allows no host bind mounts (security.bind_mounts.allowed_roots: [])"
    if any(inside(real, os.path.realpath(root)) for root in roots):
        return None
    return (
        f"is {real}, outside the host paths this cluster allows to mount (security.bind_mounts.allowed_roots: "
        f"{', '.join(roots)})"
    )


def inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


# -- mountpoints -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _mountpoint(bind: Bind, directory: bool, view: View) -> Iterator[tuple[str, str]]:
    """The path to mount `bind` on (a directory or a file, as the source is), made in the view when missing,
    and the path that reaches the mount once made (a descriptor's path names what lies under it)."""
    target = os.path.normpath(bind.target)
    if inside(target, "/proc"):
        raise NamespaceError(f"cannot mount {bind.source} on {target}: the task's /proc is its own")
    if view.task_dir is not None and target != view.task_dir and inside(target, view.task_dir):
        parent, fd = _in_task_dir(view, target, directory)
        try:
            yield f"/proc/self/fd/{fd}", f"/proc/self/fd/{parent}/{os.path.basename(target)}"
        finally:
            os.close(fd)
            os.close(parent)
        return
    if not os.path.lexists(target):
        target = _made_in_view(target, directory)
    yield target, target


def _in_task_dir(view: View, target: str, directory: bool) -> tuple[int, int]:
    """O_PATH descriptors of `target` inside the task's directory and of its parent, its missing parts made
    as the task's user; a link on the way is refused (the directory's files are the user's)."""
    assert view.task_dir is not None
    parts = os.path.relpath(target, view.task_dir).split(os.sep)
    fd = os.open(view.task_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    parent = -1
    with as_user(*view.user) if view.user is not None else contextlib.nullcontext():
        for i, name in enumerate(parts):
            want_dir = directory or i < len(parts) - 1
            try:
                try:
                    nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if want_dir:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    else:
                        os.close(
                            os.open(
                                name,
                                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                0o644,
                                dir_fd=fd,
                            )
                        )
                    nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                for opened in (fd, parent):
                    if opened >= 0:
                        os.close(opened)
                raise NamespaceError(f"cannot make the mountpoint {target}: {exc.strerror or exc}") from None
            if parent >= 0:
                os.close(parent)
            parent, fd = fd, nfd
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode) or (want_dir and not stat.S_ISDIR(mode)):
                os.close(fd)
                os.close(parent)
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
                raise NamespaceError(f"cannot mount on {target}: {name} is {kind}")
    return parent, fd


def _made_in_view(target: str, directory: bool) -> str:
    missing: list[str] = []
    existing = target
    while not os.path.lexists(existing):
        missing.append(os.path.basename(existing))
        existing = os.path.dirname(existing)
    ancestor = os.path.realpath(existing)
    if inside(ancestor, os.path.dirname(SCRATCH)):
        raise NamespaceError(f"cannot make the mountpoint {target}: {os.path.dirname(SCRATCH)} is pedl's own")
    if not os.path.isdir(ancestor):
        raise NamespaceError(f"cannot make the mountpoint {target}: {existing} is not a directory")
    try:
        os.makedirs(SCRATCH, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise NamespaceError(f"cannot make the mountpoint {target}: cannot create {SCRATCH}: {exc.strerror}") from None
    view_of(ancestor, SCRATCH)
    path = ancestor
    for i, name in enumerate(reversed(missing)):
        path = os.path.join(path, name)
        if i == len(missing) - 1 and not directory:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
        else:
            os.mkdir(path, 0o755)
    return path


def view_of(directory: str, scratch: str) -> None:
    """Put over `directory` (resolved) a tmpfs of the same owner and mode holding its entries: each
    directory and file bound back from the host with what is mounted under it, each link copied. New
    entries then go to the tmpfs and the host's directory never changes. Built on `scratch`, then moved."""
    source = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(source)
        names = os.listdir(source)
        if len(names) > MAX_VIEW_ENTRIES:
            raise NamespaceError(
                f"{directory} has {len(names)} entries; pedl makes a mountpoint only in a directory "
                f"of at most {MAX_VIEW_ENTRIES} (give a container_path that exists, or one elsewhere)"
            )
        mount(
            "pedl-view",
            scratch,
            "tmpfs",
            MS_NOSUID | MS_NODEV,
            f"mode={stat.S_IMODE(st.st_mode):o},uid={st.st_uid},gid={st.st_gid},size={VIEW_SIZE}",
            f"mounting a view of {directory}",
        )
        for name in names:
            _copy_entry(source, name, os.path.join(scratch, name))
        here = os.getcwd()
        if directory == "/":  # a mount over / is entered by making it the root
            os.chdir(scratch)
            mount(scratch, "/", None, MS_MOVE, None, "moving the view onto /")
            os.chroot(".")
            try:
                os.chdir(here)
            except OSError:
                os.chdir("/")
        else:
            mount(scratch, directory, None, MS_MOVE, None, f"moving the view onto {directory}")
        # a directory above the scratch was bound with what was mounted there, the view being built: not the task's
        libc().umount2(os.fsencode(scratch), MNT_DETACH)
    finally:
        os.close(source)


def _copy_entry(parent: int, name: str, dest: str) -> None:
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=parent), dest)
        os.lchown(dest, st.st_uid, st.st_gid)
        return
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(dest, 0o755)
    else:
        os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
    mount(f"/proc/self/fd/{parent}/{name}", dest, None, MS_BIND | MS_REC, None, f"binding {dest} into the view")


def roots_arg(roots: Sequence[str] | None) -> str:
    return json.dumps(None if roots is None else list(roots))
