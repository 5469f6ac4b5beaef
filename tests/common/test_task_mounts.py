"""A process task's view (root, in namespaces of its own): its bind_mounts are opened with its user's
permissions, a host path outside security.bind_mounts.allowed_roots is refused resolved, and a mountpoint
that does not exist is made in the task's view only, never on the host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pedl.common.mount_namespace import Bind, probe, wrap
from pedl.common.task_mounts import root_problem

PROBLEM = probe()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"no namespaces here: {PROBLEM}")
NOBODY = (65534, 65534, [65534])


def run(script: str, binds: list[Bind], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(wrap(["sh", "-c", script], binds, **kw), capture_output=True, text=True, timeout=60)


def test_a_bind_mount_is_opened_with_the_task_users_permissions(enterable_tmp: Path) -> None:
    """A 0700 directory of root's, or a readable file inside one, was read through a mount made as root."""
    secret = enterable_tmp / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "key").write_text("root's")
    os.chmod(secret / "key", 0o644)  # readable, but only by a path through root's directory
    shared = enterable_tmp / "shared"
    shared.mkdir()
    (shared / "data").write_text("everyone's")
    for source in (secret, secret / "key"):
        done = run("cat /mnt/x/key /mnt/x", [Bind(str(source), "/mnt/x", as_user=True)], user=NOBODY)
        assert done.returncode == 126 and "root's" not in done.stdout
        assert f"bind_mounts: host_path {source} is not readable by uid 65534" in done.stderr
    done = run("cat /mnt/x/data", [Bind(str(shared), "/mnt/x", read_only=True, as_user=True)], user=NOBODY)
    assert (done.returncode, done.stdout) == (0, "everyone's"), done.stderr
    # root's tasks (an agent given no task users) mount what root reads, as before
    assert run("cat /mnt/x/key", [Bind(str(secret), "/mnt/x", as_user=True)]).stdout == "root's"


def test_a_missing_host_path_is_left_out_and_said(enterable_tmp: Path) -> None:
    gone = enterable_tmp / "gone"
    done = run("ls /mnt/x 2>&1; echo ran", [Bind(str(gone), "/mnt/x", as_user=True)], user=NOBODY)
    assert done.returncode == 0 and done.stdout.endswith("ran\n")
    assert f"bind_mounts: host_path {gone} does not exist here; /mnt/x is not mounted" in done.stderr


def test_only_host_paths_inside_the_allowed_roots_are_mounted_judged_resolved(enterable_tmp: Path) -> None:
    allowed, outside = enterable_tmp / "allowed", enterable_tmp / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "in").mkdir()
    (allowed / "link").symlink_to(outside)  # inside the root as written, outside it resolved
    for user in (NOBODY, None):
        done = run("true", [Bind(str(allowed / "in"), "/mnt/x", as_user=True)], user=user, allowed_roots=[str(allowed)])
        assert done.returncode == 0, done.stderr
        for source, roots in ((outside, [str(allowed)]), (allowed / "link", [str(allowed)]), (allowed / "in", [])):
            done = run("true", [Bind(str(source), "/mnt/x", as_user=True)], user=user, allowed_roots=roots)
            assert done.returncode == 126 and f"bind_mounts: host_path {source} " in done.stderr, done.stderr
    assert (
        "outside the host paths this cluster allows"
        in run("true", [Bind(str(allowed / "link"), "/mnt/x", as_user=True)], allowed_roots=[str(allowed)]).stderr
    )
    assert root_problem("/data/x", ["/data"]) is None and root_problem("/database", ["/data"]) is not None
    assert root_problem("/anything", None) is None and "allows no host bind mounts" in root_problem("/x", [])


def test_missing_mountpoints_are_made_in_the_view_only(enterable_tmp: Path) -> None:
    """The agent made them on the host as root and left them (a target like /etc/nologin blocks logins)."""
    data = enterable_tmp / "data"
    data.mkdir()
    (data / "f").write_text("mounted\n")
    (enterable_tmp / "out").mkdir(mode=0o777)
    os.chmod(enterable_tmp / "out", 0o777)
    marker = f"pedl-test-{os.getpid()}"
    targets = [f"/{marker}/deep/dir", f"/etc/{marker}", str(enterable_tmp / "new" / "dir")]
    binds = [
        Bind(str(data), targets[0], as_user=True),
        Bind(str(data / "f"), targets[1], as_user=True),
        Bind(str(data), targets[2], as_user=True),
    ]
    script = (
        f"cat {targets[0]}/f {targets[1]} {targets[2]}/f && ls -A / | grep -c . && "
        f"echo written > {enterable_tmp}/out/from-the-task"
    )  # what a view holds is the host's
    done = run(script, binds, user=NOBODY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["mounted"] * 3
    assert int(done.stdout.splitlines()[3]) == len(os.listdir("/")) + 1  # all of / and the new entry
    for target in (f"/{marker}", *targets[1:]):
        assert not os.path.lexists(target)
    assert not (enterable_tmp / "new").exists()
    assert (enterable_tmp / "out" / "from-the-task").read_text() == "written\n"


def test_a_mountpoint_in_the_task_directory_is_made_there_as_its_user(enterable_tmp: Path) -> None:
    task_dir = enterable_tmp / "task"
    task_dir.mkdir()
    os.chown(task_dir, 65534, 65534)
    data = enterable_tmp / "data"
    data.mkdir()
    done = run(
        f"touch {task_dir}/in/here/x 2>/dev/null || echo read-only",
        [Bind(str(data), str(task_dir / "in" / "here"), read_only=True, as_user=True)],
        user=NOBODY,
        task_dir=str(task_dir),
    )
    assert (done.returncode, done.stdout) == (0, "read-only\n"), done.stderr
    assert (task_dir / "in" / "here").is_dir() and (task_dir / "in").stat().st_uid == 65534
    (task_dir / "escape").symlink_to("/etc")  # a link from the task's own files is not followed
    done = run(
        "true",
        [Bind(str(data), str(task_dir / "escape" / f"pedl-{os.getpid()}"), as_user=True)],
        user=NOBODY,
        task_dir=str(task_dir),
    )
    assert done.returncode == 126 and "escape is a symbolic link" in done.stderr
    assert not os.path.lexists(f"/etc/pedl-{os.getpid()}")


def test_nothing_is_mounted_over_the_tasks_own_proc(enterable_tmp: Path) -> None:
    (enterable_tmp / "d").mkdir()
    done = run("true", [Bind(str(enterable_tmp / "d"), "/proc/sys", as_user=True)], user=NOBODY)
    assert done.returncode == 126 and "the task's /proc is its own" in done.stderr
