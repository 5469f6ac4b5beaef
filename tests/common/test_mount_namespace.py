"""A process's private mounts: each sees its own files at the same path; the host sees none."""

from __future__ import annotations

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


@needs_namespaces
def test_a_missing_target_is_named(tmp_path: Path) -> None:
    done = subprocess.run(wrap(["true"], [(str(tmp_path), str(tmp_path / "nowhere"), False)]),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 126 and f"bind-mounting {tmp_path} on {tmp_path / 'nowhere'}" in done.stderr


def test_bad_usage_says_what_it_wants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bind", "only-one"]) == 126
    assert "usage: --bind[-ro] SRC DST" in capsys.readouterr().err
    assert main(["--bind", "a", "b"]) == 126  # no --
    assert main(["--"]) == 126
    assert "no command after --" in capsys.readouterr().err


def test_the_wrapper_runs_under_the_agents_interpreter_isolated() -> None:
    argv = wrap(["python3", "train.py"], [("/s", "/d", True)])
    assert argv[:4] == [sys.executable, "-I", "-m", "pedl.common.mount_namespace"]
    assert argv[4:] == ["--bind-ro", "/s", "/d", "--", "python3", "train.py"]
