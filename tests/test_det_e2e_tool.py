"""tools/det_e2e.py's judgement of a run of Determined's e2e suite against its exclusion list."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location("det_e2e", ROOT / "tools" / "det_e2e.py")
det_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(det_e2e)

JUNIT = """<testsuites><testsuite>
<testcase classname="tests.cluster.test_users" name="test_a" />
<testcase classname="tests.cluster.test_users" name="test_b[x-1]"><failure message="boom" /></testcase>
<testcase classname="tests.cluster.test_users" name="test_b[x-1]"><error message="teardown" /></testcase>
<testcase classname="tests.experiment.test_core" name="test_c"><skipped message="no hook" /></testcase>
<testcase classname="tests.experiment.test_core" name="test_d"><error message="fixture" /></testcase>
</testsuite></testsuites>"""


def test_outcomes_name_tests_as_pytest_does_and_keep_the_worst(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    got = det_e2e.outcomes(junit)
    assert got == {
        "tests/cluster/test_users.py::test_a": "passed",
        "tests/cluster/test_users.py::test_b[x-1]": "failed",
        "tests/experiment/test_core.py::test_c": "skipped",
        "tests/experiment/test_core.py::test_d": "error",
    }
    files = det_e2e.per_file(got)
    assert files["tests/cluster/test_users.py"]["failed"] == 1 and files["tests/experiment/test_core.py"]["error"] == 1


def test_a_failure_or_skip_outside_the_list_and_a_listed_pass_fail_the_run() -> None:
    results = {
        "f.py::ok": "passed",
        "f.py::bad": "failed",
        "f.py::skipped": "skipped",
        "f.py::known": "failed",
        "f.py::fixed": "passed",
        "f.py::known_skip": "skipped",
    }
    exclusions = {
        "f.py::known": "needs a GPU",
        "f.py::fixed": "needs a GPU",
        "f.py::known_skip": "needs Slurm",
        "f.py::gone": "renamed upstream",
    }
    problems = det_e2e.judge(results, exclusions, whole_suite=True)
    assert problems == [
        "f.py::bad failed",
        "f.py::fixed passes now: remove it from the exclusion list",
        "f.py::skipped skipped",
        "f.py::gone is in the exclusion list but not in the suite",
    ]
    # a run of part of the suite (pytest -k ...) does not miss the tests it did not select
    assert "f.py::gone" not in " ".join(det_e2e.judge(results, exclusions, whole_suite=False))
    assert det_e2e.judge({"f.py::ok": "passed", "f.py::known": "error"}, {"f.py::known": "why"}, whole_suite=True) == []


@pytest.mark.parametrize("text", ["- a list\n", "t.py::x: ''\n", "t.py::x: 3\n"])
def test_an_exclusion_list_without_a_reason_per_test_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "exclusions.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match="reason"):
        det_e2e.read_exclusions(path)


def test_the_projects_exclusion_list_reads_and_gives_each_test_a_reason() -> None:
    exclusions = det_e2e.read_exclusions(ROOT / "tools" / "det_e2e_exclusions.yaml")
    assert exclusions and all("::" in test and test.startswith("tests/") for test in exclusions)


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_per_test_timeout_below_one_second_is_refused_naming_the_option(value: str, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.argv", ["det_e2e.py", "--timeout", value])
    with pytest.raises(SystemExit) as exited:
        det_e2e.main()
    assert exited.value.code == 2 and "--timeout" in capsys.readouterr().err
