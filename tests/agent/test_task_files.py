"""A task's own files on the agent: a fresh directory per run, and a directory given to its user alone."""

from __future__ import annotations

import os
import stat

from pedl.agent.task_files import fresh_directory, give_directory


def test_a_rerun_of_an_allocation_starts_from_an_empty_directory(tmp_path) -> None:
    directory = tmp_path / "a" / "model"
    fresh_directory(directory)
    (directory / "left.py").write_text("x = 1\n")
    fresh_directory(directory)
    assert directory.is_dir() and list(directory.iterdir()) == []


def test_a_given_directory_is_closed_to_every_other_user(tmp_path) -> None:
    directory = tmp_path / "task"
    directory.mkdir(mode=0o755)
    (directory / "f").write_text("")
    give_directory(directory, os.getuid(), os.getgid())
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert (directory / "f").stat().st_uid == os.getuid()
