"""Packing a model directory into Determined's v1File list, on real temporary directories."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from pedl.cli.model_upload import DIRTYPE, REGTYPE, pack_model_dir, scan_model_dir
from pedl.errors import InvalidArgument


def write(root: Path, rel: str, content: str | bytes = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def paths(root: Path) -> list[str]:
    return [e.rel for e in scan_model_dir(root)]


def test_nested_dirs_get_their_own_entries_before_their_files(tmp_path: Path) -> None:
    write(tmp_path, "train.py", "print('hi')\n")
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/sub/model.py", "M = 1\n")
    files = pack_model_dir(tmp_path)
    by_path = {f["path"]: f for f in files}
    assert [f["path"] for f in files] == ["pkg", "pkg/__init__.py", "pkg/sub", "pkg/sub/model.py", "train.py"]
    assert by_path["pkg"]["type"] == DIRTYPE and by_path["pkg"]["content"] == ""
    assert by_path["pkg/sub/model.py"]["type"] == REGTYPE
    assert base64.b64decode(by_path["train.py"]["content"]) == b"print('hi')\n"
    st = os.stat(tmp_path / "train.py")
    assert by_path["train.py"]["mtime"] == str(int(st.st_mtime))
    assert by_path["train.py"]["mode"] == st.st_mode
    assert by_path["train.py"]["uid"] == 0 and by_path["train.py"]["gid"] == 0
    assert set(by_path["pkg"]) == {"path", "type", "content", "mtime", "mode", "uid", "gid"}


def test_binary_content_round_trips(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 10
    write(tmp_path, "weights.bin", blob)
    (entry,) = pack_model_dir(tmp_path)
    assert base64.b64decode(entry["content"]) == blob


def test_pycache_and_git_are_always_skipped(tmp_path: Path) -> None:
    write(tmp_path, "a.py")
    write(tmp_path, "__pycache__/a.cpython-311.pyc")
    write(tmp_path, "pkg/__pycache__/b.pyc")
    write(tmp_path, ".git/config")
    write(tmp_path, ".pedlignore", "!__pycache__/\n!.git/\n")
    assert paths(tmp_path) == ["a.py", "pkg"]


def test_detignore_and_pedlignore_rules_apply_and_are_not_uploaded(tmp_path: Path) -> None:
    write(tmp_path, "train.py")
    write(tmp_path, "data/big.csv")
    write(tmp_path, "data/small.csv")
    write(tmp_path, "logs/run1.log")
    write(tmp_path, "sub/logs/keep.txt")
    write(tmp_path, "notes.md")
    write(tmp_path, ".detignore", "# comment\n/logs/\n*.md\n")
    write(tmp_path, ".pedlignore", "data/*.csv\n!data/small.csv\n")
    assert paths(tmp_path) == ["data", "data/small.csv", "sub", "sub/logs", "sub/logs/keep.txt", "train.py"]


def test_pedlignore_can_override_detignore(tmp_path: Path) -> None:
    write(tmp_path, "a.txt")
    write(tmp_path, ".detignore", "*.txt\n")
    write(tmp_path, ".pedlignore", "!a.txt\n")
    assert paths(tmp_path) == ["a.txt"]


def test_files_under_an_ignored_directory_stay_out(tmp_path: Path) -> None:
    write(tmp_path, "out/keep.py")
    write(tmp_path, ".pedlignore", "out/\n!out/keep.py\n")
    assert paths(tmp_path) == []


def test_missing_model_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="nope.*does not exist"):
        pack_model_dir(tmp_path / "nope")


def test_a_file_is_not_a_model_dir(tmp_path: Path) -> None:
    f = write(tmp_path, "train.py")
    with pytest.raises(InvalidArgument, match="train.py.*is not a directory"):
        pack_model_dir(f)


def test_size_limit_names_size_and_limit_before_reading(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, "a.bin", b"\0" * 3000)
    write(tmp_path, "b.bin", b"\0" * 3000)
    monkeypatch.setenv("PEDL_MAX_MODEL_DEF_BYTES", "5000")
    with pytest.raises(InvalidArgument) as info:
        pack_model_dir(tmp_path)
    assert "6000 bytes" in info.value.message and "5000 bytes" in info.value.message
    assert str(tmp_path) in info.value.message


def test_ignored_files_do_not_count_toward_the_limit(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, "big.bin", b"\0" * 10_000)
    write(tmp_path, "train.py", "x")
    write(tmp_path, ".pedlignore", "*.bin\n")
    monkeypatch.setenv("PEDL_MAX_MODEL_DEF_BYTES", "100")
    assert [f["path"] for f in pack_model_dir(tmp_path)] == ["train.py"]


def test_symlinked_file_uploads_its_content_and_dir_links_are_skipped(tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere", "real.txt", "payload")
    model = tmp_path / "model"
    model.mkdir()
    (model / "link.txt").symlink_to(target)
    (model / "loop").symlink_to(model, target_is_directory=True)
    (model / "dangling").symlink_to(tmp_path / "missing")
    files = pack_model_dir(model)
    assert [f["path"] for f in files] == ["link.txt"]
    assert base64.b64decode(files[0]["content"]) == b"payload"


def test_ignore_files_are_never_uploaded_at_any_depth(tmp_path: Path) -> None:
    write(tmp_path, "a.py")
    write(tmp_path, "sub/.detignore", "*.py\n")  # only the root's rules apply
    write(tmp_path, "sub/.pedlignore", "*.py\n")
    write(tmp_path, "sub/b.py")
    assert paths(tmp_path) == ["a.py", "sub", "sub/b.py"]
