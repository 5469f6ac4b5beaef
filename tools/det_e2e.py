"""Runs Determined 0.38.1's own end-to-end suite (the e2e_cpu tests of its run.sh FILES) against a
fresh pedl master on SQLite with one local agent, and prints passed/failed/error/skipped per file.

    python tools/det_e2e.py [--suite DIR] [--det-venv DIR] [--slots N] [--timeout S] [--keep] [PYTEST ARGS...]

The suite is an outside conformance check: it is run here, never copied into pedl. As on Determined's
CI cluster, trials import `determined`: the agent's tasks get the det venv first on PATH (the master's
task_container_defaults), and experiments may keep checkpoints under /tmp and ~/.cache/determined, as the
suite's configs ask.
The suite is ../shared/determined-e2e-0.38.1 beside the checkout unless --suite or PEDL_DET_E2E names another.
run.sh always names every file of FILES: select one file's tests with `-k test_users`. --timeout replaces
run.sh's 120 s per test (make test runs the suite beside its own on two busy cores). Exit status:
run.sh's (pytest's). With --keep the work directory (master and agent logs, junit.xml) stays.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import yaml

from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for

REPO = Path(__file__).resolve().parents[1]
OUTCOMES = ("passed", "failed", "error", "skipped")
WORST_LAST = ("passed", "skipped", "error", "failed")


def master_config(work: Path, det_venv: Path) -> dict:
    # storage_path as in Determined's own CI master config (its devcluster's), which the suite's
    # tests join into paths (test_delete_tensorboard_for_experiment)
    return {
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(work / "checkpoints"),
            "storage_path": "determined-checkpoint",
        },
        # where the suite's configs keep checkpoints, as on Determined's CI: /tmp, and the cache
        # directory of the user running it (test_non_root_experiment)
        "security": {"checkpoint_storage_roots": ["/tmp", str(Path.home() / ".cache" / "determined")]},
        # startup hooks at both levels, as on Determined's CI cluster (the suite's *_combined logging
        # tests look for the pool's in a task's logs)
        # one OpenMP thread per task: the agent has one slot on a machine of two busy cores, where torch's
        # default of a thread per core made the mnist_pytorch fixture's training twice as slow, with twice the CPU
        "task_container_defaults": {
            "environment_variables": [f"PATH={det_venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "OMP_NUM_THREADS=1"],
            "startup_hook": 'echo "hello from master tcd startup hook"',
        },
        "resource_pools": [
            {
                "pool_name": "default",
                "task_container_defaults": {"startup_hook": 'echo "hello from rp tcd startup hook"'},
            }
        ],
    }


def outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return "failed" if tag == "failure" else tag
    return "passed"


def test_id(case: ET.Element) -> str:
    """`tests/cluster/test_users.py::test_name[param]`, as pytest names it, from a junit testcase."""
    file = case.get("file") or case.get("classname", "?").replace(".", "/") + ".py"
    return f"{file}::{case.get('name', '?')}"


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome; a test reported twice (a failed call, then an error in teardown) counts
    once, by its worst outcome."""
    worst: dict[str, str] = {}
    for case in ET.parse(junit).iter("testcase"):
        key = test_id(case)
        worst[key] = max(outcome(case), worst.get(key, "passed"), key=WORST_LAST.index)
    return worst


def per_file(results: dict[str, str]) -> dict[str, Counter]:
    files: dict[str, Counter] = {}
    for test, got in results.items():
        files.setdefault(test.partition("::")[0], Counter())[got] += 1
    return files


def read_exclusions(path: Path) -> dict[str, str]:
    """The exclusion list: a YAML mapping of test id to the reason it is expected to fail here."""
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in data.items()
    ):
        raise ValueError(f"{path}: must map each test id (file::name) to its reason, a non-empty string")
    return data


def judge(results: dict[str, str], exclusions: dict[str, str], *, whole_suite: bool) -> list[str]:
    """What fails the run: a test outside the list that failed, errored or was skipped (a skip is not a
    pass: the suite skips what it finds the master lacks); a listed test that passed
    (the list only shrinks: remove it); with the whole suite run, a listed test the suite lacks."""
    problems = []
    for test, got in sorted(results.items()):
        if test in exclusions and got == "passed":
            problems.append(f"{test} passes now: remove it from the exclusion list")
        elif test not in exclusions and got in ("failed", "error", "skipped"):
            problems.append(f"{test} {got}")
    if whole_suite:
        problems += [
            f"{test} is in the exclusion list but not in the suite"
            for test in sorted(exclusions)
            if test not in results
        ]
    return problems


def print_table(files: dict[str, Counter], seconds: float) -> None:
    total: Counter = Counter()
    width = max([len(f) for f in files] + [5])
    print(f"\n{'file':<{width}}  " + "  ".join(f"{o:>7}" for o in OUTCOMES))
    for file in sorted(files):
        total.update(files[file])
        print(f"{file:<{width}}  " + "  ".join(f"{files[file][o]:>7}" for o in OUTCOMES))
    print(f"{'total':<{width}}  " + "  ".join(f"{total[o]:>7}" for o in OUTCOMES))
    print(f"{sum(total.values())} tests in {seconds:.0f} s")


def run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="pedl-det-e2e-"))
    work.chmod(0o711)  # tasks run as their users' own uids and pass through it to the checkpoint storage
    master = Master(work, master_config(work, args.det_venv))
    agent: LocalAgent | None = None
    try:
        master.start()
        agent = LocalAgent(work, master.url, "e2e-agent", slots=args.slots, token=master.agent_token).start()
        wait_for(lambda: agent_connected(master, "e2e-agent"), 60, what="the agent to connect")
        print(f"pedl master {master.url}, agent e2e-agent with {args.slots} slot(s), work dir {work}", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "PEDL_"))}
        env["XDG_CONFIG_HOME"] = str(work / "det-config")
        junit = work / "junit.xml"
        started = time.monotonic()
        timeout = ["--timeout", str(args.timeout)] if args.timeout else []  # after run.sh's: the last one counts
        rc = subprocess.call(
            [
                str(args.suite / "run.sh"),
                "127.0.0.1",
                str(master.port),
                "-o",
                "junit_family=xunit1",
                f"--junitxml={junit}",
                *timeout,
                *pytest_args,
            ],
            env=env,
        )
        if not junit.exists():
            return rc or 1
        results = outcomes(junit)
        print_table(per_file(results), time.monotonic() - started)
        if args.exclusions is None:
            return rc
        exclusions = read_exclusions(args.exclusions)
        problems = judge(results, exclusions, whole_suite=not pytest_args)
        passed = sum(got == "passed" for got in results.values())
        print(
            f"{passed} of {len(results)} passed; {len(exclusions)} excluded ({args.exclusions.name}), "
            f"{len(problems)} problem(s)"
        )
        for problem in problems:
            print(f"  {problem}")
        return 1 if problems else 0
    finally:
        if agent is not None:
            agent.stop()
        master.stop()
        if args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument(
        "--suite",
        type=Path,
        default=Path(os.environ.get("PEDL_DET_E2E", REPO.parent / "shared" / "determined-e2e-0.38.1")),
        help="the suite with run.sh",
    )
    parser.add_argument(
        "--det-venv",
        type=Path,
        default=REPO / ".venv-det",
        help="a venv with determined==0.38.1, first on the tasks' PATH",
    )
    parser.add_argument("--slots", type=int, default=1, help="the agent's slots (the suite expects 1)")
    parser.add_argument(
        "--timeout", type=int, default=None, help="seconds each test may take (run.sh's pytest-timeout: 120)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory and its logs")
    parser.add_argument(
        "--exclusions",
        type=Path,
        default=None,
        help="the tests expected to fail, with reasons (YAML): the run fails on any other failure, "
        "and on a listed test that passes",
    )
    args, pytest_args = parser.parse_known_args()
    if args.timeout is not None and args.timeout < 1:
        parser.error(f"--timeout: {args.timeout} is not a number of seconds (1 or more)")
    for need in (args.suite / "run.sh", args.det_venv / "bin" / "python3"):
        if not need.exists():
            parser.error(f"{need} is missing (--suite / --det-venv; `make det-venv` makes the det venv)")
    args.det_venv = args.det_venv.resolve()
    return run(args, pytest_args)


if __name__ == "__main__":
    sys.exit(main())
