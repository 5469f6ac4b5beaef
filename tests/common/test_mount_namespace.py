"""A process's private mounts: each sees its own files at the same path; the host sees none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.common.mount_namespace import main, probe, wrap

PROBLEM = probe()
needs_namespaces = pytest.mark.skipif(PROBLEM is not None, reason=f"no mount namespaces here: {PROBLEM}")


@needs_namespaces
def test_two_processes_see_their_own_files_at_one_path(tmp_path: Path) -> None:
    target = tmp_path / "fixed"
    target.mkdir()
    procs = []
    for name in ("a", "b"):
        src = tmp_path / name
        src.mkdir()
        (src / "who").write_text(name)
        argv = wrap(["sh", "-c", f"sleep 0.3; cat {target}/who"], [(str(src), str(target), False)])
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    assert [p.communicate(timeout=30)[0] for p in procs] == ["a", "b"]
    assert list(target.iterdir()) == []  # the host's mount table never changed


@needs_namespaces
def test_a_read_only_bind_refuses_writes(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    argv = wrap(["sh", "-c", f"touch {tmp_path}/dst/x"], [(str(tmp_path / "src"), str(tmp_path / "dst"), True)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "Read-only" in done.stderr
    assert not (tmp_path / "src" / "x").exists()


def test_bad_usage_says_what_it_wants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bind", "only-one"]) == 126
    assert "usage: [--bind[-ro] SRC DST | --user-bind[-ro] SRC DST]" in capsys.readouterr().err
    assert main(["--bind", "a", "b"]) == 126  # no --
    assert main(["--"]) == 126
    assert "no command after --" in capsys.readouterr().err
    assert main(["--allowed-roots", "/data", "--", "true"]) == 126
    assert "--allowed-roots takes a JSON list of paths, not '/data'" in capsys.readouterr().err


def test_the_wrapper_runs_under_the_agents_interpreter_isolated() -> None:
    argv = wrap(["python3", "train.py"], [("/s", "/d", True)])
    assert argv[:4] == [sys.executable, "-I", "-m", "pedl.common.mount_namespace"]
    assert argv[4:] == ["--bind-ro", "/s", "/d", "--", "python3", "train.py"]


@needs_namespaces
def test_a_task_of_its_own_shm_size_sees_a_private_dev_shm_of_that_size(tmp_path: Path) -> None:
    host_mark = Path("/dev/shm") / f"pedl-test-{os.getpid()}"
    host_mark.write_text("host")
    try:
        script = f"df -k /dev/shm | tail -1; test ! -e {host_mark} && touch /dev/shm/inside && echo private"
        done = subprocess.run(
            wrap(["sh", "-c", script], [], shm_size=1536 * 1024 * 1024), capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        size_kib = done.stdout.splitlines()[0].split()[1]
        assert size_kib == "1572864" and done.stdout.splitlines()[-1] == "private"  # 1.5 GiB, as Determined's test
        assert not Path("/dev/shm/inside").exists()  # the host's /dev/shm never saw it
    finally:
        host_mark.unlink()


def test_a_bad_shm_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--shm-size", "1.5g", "--", "true"]) == 126
    assert "--shm-size takes a number of bytes, not '1.5g'" in capsys.readouterr().err
    assert wrap(["true"], [], shm_size=4096)[-4:] == ["--shm-size", "4096", "--", "true"]


@needs_namespaces
def test_no_new_privs_is_set_before_the_command_runs() -> None:
    script = "grep NoNewPrivs /proc/self/status"
    assert subprocess.run(
        wrap(["sh", "-c", script], [], no_new_privs=True), capture_output=True, text=True, timeout=30
    ).stdout.split() == ["NoNewPrivs:", "1"]
    assert subprocess.run(
        wrap(["sh", "-c", script], []), capture_output=True, text=True, timeout=30
    ).stdout.split() == ["NoNewPrivs:", "0"]
