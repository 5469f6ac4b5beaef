"""A small gitignore-style matcher for `.pedlignore` / `.detignore`: `*`, `?`, `[...]`, `**`,
trailing `/` (directories only), leading or inner `/` (anchored to the root), `!` negation, `#`."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class IgnoreRule:
    pattern: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                j = i + 2
                at_segment_start = i == 0 or pattern[i - 1] == "/"
                if at_segment_start and j == n:
                    out.append(".*")  # `dir/**`: everything inside
                    i = j
                    continue
                if at_segment_start and pattern[j] == "/":
                    out.append("(?:.*/)?")  # `**/x`, `a/**/b`: zero or more directories
                    i = j + 1
                    continue
                i = j
            else:
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse_rule(line: str) -> IgnoreRule | None:
    """One line of an ignore file, or None for blank lines and comments."""
    text = line.rstrip("\n").rstrip("\r")
    if not text.endswith("\\ "):
        text = text.rstrip(" ")
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    if negated or text.startswith(("\\!", "\\#")):
        text = text[1:]
    dir_only = text.endswith("/")
    text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    body = _translate(text.lstrip("/"))
    regex = re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)
    return IgnoreRule(pattern=line.strip(), regex=regex, negated=negated, dir_only=dir_only)


class IgnoreRules:
    """Ordered rules; the last rule matching a path decides. Paths are POSIX, relative to the root."""

    def __init__(self, lines: list[str] | None = None) -> None:
        self.rules: list[IgnoreRule] = []
        self.extend(lines or [])

    def extend(self, lines: list[str]) -> None:
        for line in lines:
            rule = parse_rule(line)
            if rule is not None:
                self.rules.append(rule)

    def ignored(self, path: str, is_dir: bool) -> bool:
        verdict = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.fullmatch(path):
                verdict = not rule.negated
        return verdict
