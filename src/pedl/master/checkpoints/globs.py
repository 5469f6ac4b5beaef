"""Which entries of a checkpoint a user's globs name (det checkpoint rm, the SDK's remove_files), decided
on the checkpoint's listing alone, as Determined's storage managers decide with glob.glob(recursive=True):
`*`, `?` and `[...]` within one name (not matching a leading "."), `**` across directories, a trailing "/"
for directories only, and a matched directory taking everything under it. Pure: no storage, no database."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping

from pedl.errors import InvalidArgument

MAX_GLOBS = 100  # per request
GLOB_MAX = 1024  # characters
_MAGIC = re.compile(r"[*?\[]")


def check_globs(globs: Iterable[str], field: str = "checkpointGlobs") -> list[str]:
    """The globs, without repeats; each must name entries inside the checkpoint: relative, never
    through "..", and never the checkpoint itself (Determined refuses "" and ".." likewise)."""
    globs = list(globs)
    if len(globs) > MAX_GLOBS:
        raise InvalidArgument.at(field, f"{len(globs)} globs, more than the limit of {MAX_GLOBS}")
    for i, glob in enumerate(globs):
        where = f"{field}[{i}]"
        if not isinstance(glob, str) or not glob.strip():
            raise InvalidArgument.at(where, "must not be empty: an empty glob would name the whole checkpoint")
        if len(glob) > GLOB_MAX:
            raise InvalidArgument.at(where, f"is {len(glob)} characters long, more than the limit of {GLOB_MAX}")
        if glob.startswith("/"):
            raise InvalidArgument.at(where, f"{glob!r} is absolute; globs are relative to the checkpoint")
        if ".." in glob:
            raise InvalidArgument.at(where, f"{glob!r} contains '..'; globs never leave the checkpoint")
        if not _components(glob):
            raise InvalidArgument.at(where, f"{glob!r} names the checkpoint itself; delete the checkpoint instead")
    return list(dict.fromkeys(globs))


def _components(glob: str) -> tuple[str, ...]:
    return tuple(part for part in glob.split("/") if part not in ("", "."))


def _name_matches(pattern: str, name: str) -> bool:
    if not _MAGIC.search(pattern):
        return pattern == name
    if name.startswith(".") and not pattern.startswith("."):  # glob.glob leaves hidden names out
        return False
    return fnmatch.fnmatchcase(name, pattern)


def matches(glob: str, path: str, *, is_dir: bool) -> bool:
    """Whether `glob` names the entry `path` (relative, "/"-separated, without a trailing "/")."""
    pattern, names = _components(glob), tuple(path.split("/"))
    if glob.endswith("/") and not is_dir:
        return False

    @functools.cache
    def match(p: int, n: int) -> bool:
        if p == len(pattern):
            return n == len(names)
        if pattern[p] == "**":  # zero directories, or one more (not a hidden one) and still "**"
            return match(p + 1, n) or (n < len(names) and not names[n].startswith(".") and match(p, n + 1))
        return n < len(names) and _name_matches(pattern[p], names[n]) and match(p + 1, n + 1)

    return match(0, 0)


def doomed(listing: Mapping[str, int] | Iterable[str], globs: Iterable[str]) -> set[str]:
    """The entries of `listing` (relative paths; directories end in "/") that `globs` delete: those
    a glob names, and everything under a directory a glob names. A directory that only the paths
    under it imply (S3 keeps no entry for it) can be named too."""
    entries = list(listing)
    globs = list(globs)
    if any(set(_components(g)) == {"**"} for g in globs):  # glob.glob's "**" names the checkpoint itself too
        return set(entries)
    dirs = {e.rstrip("/") for e in entries if e.endswith("/")}
    for entry in entries:
        parts = entry.rstrip("/").split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    named_dirs = {d for d in dirs if any(matches(g, d, is_dir=True) for g in globs)}

    def named(entry: str) -> bool:
        path = entry.rstrip("/")
        parts = path.split("/")
        if path in named_dirs or any("/".join(parts[:i]) in named_dirs for i in range(1, len(parts))):
            return True
        return not entry.endswith("/") and any(matches(g, path, is_dir=False) for g in globs)

    return {entry for entry in entries if named(entry)}
