"""The gitignore-style matcher behind .pedlignore/.detignore."""

from __future__ import annotations

import pytest

from pedl.cli.ignore_rules import IgnoreRules, parse_rule


def ignored(lines: list[str], path: str, is_dir: bool = False) -> bool:
    return IgnoreRules(lines).ignored(path, is_dir)


def test_comments_and_blank_lines_are_not_rules() -> None:
    assert parse_rule("# a comment") is None
    assert parse_rule("   ") is None
    assert parse_rule("") is None
    assert IgnoreRules(["# x", "", "*.log"]).rules[0].pattern == "*.log"


@pytest.mark.parametrize(
    ("path", "expected"), [("a.log", True), ("deep/er/b.log", True), ("a.log.txt", False), ("log", False)]
)
def test_star_without_slash_matches_at_any_depth(path: str, expected: bool) -> None:
    assert ignored(["*.log"], path) is expected


def test_question_mark_and_character_class() -> None:
    assert ignored(["file?.txt"], "file1.txt")
    assert not ignored(["file?.txt"], "file12.txt")
    assert ignored(["*.py[co]"], "pkg/m.pyc")
    assert not ignored(["*.py[co]"], "pkg/m.py")
    assert ignored(["x[!0-9]"], "xa") and not ignored(["x[!0-9]"], "x1")


def test_star_does_not_cross_directories() -> None:
    assert ignored(["data/*.csv"], "data/a.csv")
    assert not ignored(["data/*.csv"], "data/sub/a.csv")


def test_double_star_forms() -> None:
    assert ignored(["**/cache"], "cache", is_dir=True)
    assert ignored(["**/cache"], "a/b/cache", is_dir=True)
    assert ignored(["a/**/b"], "a/b")
    assert ignored(["a/**/b"], "a/x/y/b")
    assert not ignored(["a/**/b"], "c/a/b")
    assert ignored(["logs/**"], "logs/x/y.txt")
    assert not ignored(["logs/**"], "other/logs/x")


def test_trailing_slash_matches_directories_only() -> None:
    assert ignored(["build/"], "build", is_dir=True)
    assert ignored(["build/"], "src/build", is_dir=True)
    assert not ignored(["build/"], "build", is_dir=False)


def test_leading_slash_anchors_to_the_root() -> None:
    assert ignored(["/out"], "out")
    assert not ignored(["/out"], "sub/out")
    assert ignored(["docs/tmp"], "docs/tmp")  # an inner slash anchors too
    assert not ignored(["docs/tmp"], "x/docs/tmp")


def test_negation_and_last_rule_wins() -> None:
    rules = ["*.txt", "!keep.txt"]
    assert ignored(rules, "a.txt")
    assert not ignored(rules, "keep.txt")
    assert not ignored(rules, "sub/keep.txt")
    assert ignored([*rules, "sub/keep.txt"], "sub/keep.txt")


def test_escaped_bang_and_hash_are_literal() -> None:
    assert ignored(["\\!important"], "!important")
    assert ignored(["\\#notes"], "#notes")
