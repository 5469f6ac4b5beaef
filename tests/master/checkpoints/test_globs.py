"""Which entries of a checkpoint globs name: the same as Determined's storage managers, which run
glob.glob(recursive=True) over the checkpoint (or, for object stores, over a dummy tree of its keys);
a named directory takes what is under it. Globs that leave the checkpoint are refused, naming the field."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from pedl.errors import InvalidArgument
from pedl.master.checkpoints.globs import MAX_GLOBS, check_globs, doomed

LISTING = {
    "model.pt": 9,
    "metadata.json": 2,
    ".hidden": 1,
    "sub/": 0,
    "sub/x.pt": 3,
    "sub/y.txt": 4,
    "deep/": 0,
    "deep/er/": 0,
    "deep/er/z.pt": 5,
    "deep/er/.h.pt": 1,
}
PATTERNS = [
    "*.pt",
    "**/*.pt",
    "sub",
    "sub/",
    "sub/*",
    "**",
    "**/*",
    "*",
    "deep/**",
    "d*/er",
    "?odel.pt",
    "[ms]*",
    ".h*",
    "**/.h*",
    "model.pt/",
    "nothing*",
    "deep/*/z.pt",
]


def _by_glob_glob(root: Path, pattern: str) -> set[str]:
    """What Determined's shared_fs manager deletes: glob.glob's matches, directories with all below."""
    hits = glob.glob(f"{root}/{pattern}", recursive=True)
    out = set()
    for hit in hits:
        rel = os.path.relpath(hit, root)
        for entry in LISTING:
            path = entry.rstrip("/")
            if rel == "." or path == rel or path.startswith(rel + "/"):
                out.add(entry)
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
def test_globs_name_what_glob_glob_names(tmp_path: Path, pattern: str) -> None:
    for entry in LISTING:
        path = tmp_path / entry
        if entry.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    assert doomed(LISTING, [pattern]) == _by_glob_glob(tmp_path, pattern)


def test_directories_only_object_keys_imply_can_be_named() -> None:
    keys = {"ckpt/a.bin": 1, "ckpt/b/c.bin": 2, "top.bin": 3}  # S3: no key for "ckpt/" itself
    assert doomed(keys, ["ckpt"]) == {"ckpt/a.bin", "ckpt/b/c.bin"}
    assert doomed(keys, ["ckpt/b/"]) == {"ckpt/b/c.bin"}
    assert doomed(keys, ["*.bin"]) == {"top.bin"}
    assert doomed(keys, []) == set()


@pytest.mark.parametrize(
    ("globs", "field", "words"),
    [
        (["a", "../b"], "checkpointGlobs[1]", "'..'"),
        (["x/..y"], "checkpointGlobs[0]", "'..'"),
        (["/abs/*"], "checkpointGlobs[0]", "absolute"),
        ([""], "checkpointGlobs[0]", "empty"),
        ([" "], "checkpointGlobs[0]", "empty"),
        (["."], "checkpointGlobs[0]", "checkpoint itself"),
        (["x" * 1025], "checkpointGlobs[0]", "limit"),
        (["*"] * (MAX_GLOBS + 1), "checkpointGlobs", "limit"),
    ],
)
def test_globs_that_leave_the_checkpoint_are_refused(globs: list[str], field: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        check_globs(globs)
    assert raised.value.fields[0]["field"] == field and words in raised.value.message


def test_check_globs_drops_repeats() -> None:
    assert check_globs(["*.pt", "logs", "*.pt"]) == ["*.pt", "logs"]
