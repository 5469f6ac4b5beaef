"""The launcher as a real process: one worker per slot, rank-prefixed output, and a failed
worker stops the others and decides the exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pedl.launch.torch_distributed import parse_args

LAUNCH = [sys.executable, "-m", "pedl.launch.torch_distributed"]
CLEAN = {
    k: v
    for k, v in os.environ.items()
    if k
    not in {
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "NNODES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "PEDL_NODE_SLOTS",
        "DET_SLOT_IDS",
    }
}

SHOW = (
    "import os; print(' '.join(f'{k}={os.environ[k]}' for k in "
    "('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT')))"
)


def launch(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAUNCH, *args], env={**CLEAN, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )


def test_every_slot_gets_a_worker_with_its_rank() -> None:
    done = launch("--", sys.executable, "-c", SHOW, env={"DET_SLOT_IDS": "[0, 1, 2]"})
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert [line.split(" ", 1)[0] for line in lines] == ["[rank=0]", "[rank=1]", "[rank=2]"]
    for rank, line in enumerate(lines):
        assert (
            f"RANK={rank} LOCAL_RANK={rank} WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 NODE_RANK=0 MASTER_ADDR=127.0.0.1"
        ) in line
    assert len({line.rsplit("MASTER_PORT=", 1)[1] for line in lines}) == 1  # one rendezvous
    assert "node 0 of 1, ranks 0-2 of 3" in done.stderr


def test_the_second_node_of_a_trial_numbers_its_workers_after_the_first() -> None:
    env = {
        "DET_SLOT_IDS": "[0, 1]",
        "NODE_RANK": "1",
        "NNODES": "2",
        "PEDL_NODE_SLOTS": "[3, 2]",
        "MASTER_ADDR": "10.1.2.3",
        "MASTER_PORT": "29400",
    }
    done = launch("--no-log-prefix", sys.executable, "-c", SHOW, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "RANK=3 LOCAL_RANK=0 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 NODE_RANK=1 MASTER_ADDR=10.1.2.3 MASTER_PORT=29400",
        "RANK=4 LOCAL_RANK=1 WORLD_SIZE=5 LOCAL_WORLD_SIZE=2 NODE_RANK=1 MASTER_ADDR=10.1.2.3 MASTER_PORT=29400",
    ]


def test_a_failed_worker_stops_the_others_and_its_status_is_the_launchers(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "rank = int(os.environ['RANK'])\n"
        "if rank == 1:\n"
        "    time.sleep(0.5); print('rank 1 fails', flush=True); sys.exit(7)\n"
        "def bye(*_):\n"
        f"    open(r'{tmp_path}/stopped-' + str(rank), 'w').close(); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    done = launch("--", sys.executable, str(script), env={"DET_SLOT_IDS": "[0, 1, 2]"})
    assert done.returncode == 7, done.stderr
    assert "[rank=1] rank 1 fails" in done.stdout
    assert "rank 1 exited with code 7; stopping the other 2 rank(s)" in done.stderr
    assert sorted(p.name for p in tmp_path.glob("stopped-*")) == ["stopped-0", "stopped-2"]


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "if os.environ['RANK'] == '0':\n"
        "    time.sleep(0.5); sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "time.sleep(120)\n"
    )
    done = launch("--grace-period", "1", "--", sys.executable, str(script), env={"DET_SLOT_IDS": "[0, 1]"})
    assert done.returncode == 3
    assert "rank 0 exited with code 3; stopping the other 1 rank(s)" in done.stderr


def test_sigterm_to_the_launcher_reaches_every_worker(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "def bye(*_):\n"
        f"    open(r'{tmp_path}/term-' + os.environ['RANK'], 'w').close(); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        f"open(r'{tmp_path}/up-' + os.environ['RANK'], 'w').close()\n"
        "time.sleep(60)\n"
    )
    # its own process group, as the agent runs it, but the signal goes to the launcher alone
    proc = subprocess.Popen(
        [*LAUNCH, "--", sys.executable, str(script)],
        env={**CLEAN, "DET_SLOT_IDS": "[0, 1]"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("up-*"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "workers did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # both handled it and exited cleanly
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert sorted(p.name for p in tmp_path.glob("term-*")) == ["term-0", "term-1"]


def test_a_killed_launcher_takes_its_workers_with_it(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(f"import os, time\nopen(r'{tmp_path}/pid-' + str(os.getpid()), 'w').close()\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [*LAUNCH, "--", sys.executable, str(script)],
        env={**CLEAN, "DET_SLOT_IDS": "[0, 1]"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pid-*"))) < 2:
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.05)
    pids = [int(p.name.split("-")[1]) for p in tmp_path.glob("pid-*")]
    proc.kill()  # the launcher alone, not its group
    proc.wait()
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"workers {pids} outlived their launcher"
        time.sleep(0.05)


def test_a_command_that_cannot_run_is_reported() -> None:
    done = launch("--", "/no/such/trainer", env={"DET_SLOT_IDS": "[0]"})
    assert done.returncode == 127
    assert "cannot run '/no/such/trainer'" in done.stderr


def test_a_bad_environment_is_an_error_naming_the_variable() -> None:
    done = launch("--", sys.executable, "-c", "pass", env={"PEDL_NODE_SLOTS": "[1, 1]", "NODE_RANK": "1"})
    assert done.returncode == 2
    assert "MASTER_ADDR and MASTER_PORT" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the argument COMMAND is required"),
        (["--"], "the argument COMMAND is required"),
        (["--grace-period", "-1", "--", "x"], "argument --grace-period: must not be negative"),
        (["--nproc-per-node", "two", "--", "x"], "argument --nproc-per-node: invalid int value"),
    ],
)
def test_bad_arguments_name_the_argument(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_options_before_the_command_and_the_commands_own_options_after() -> None:
    args = parse_args(["--nproc-per-node", "2", "python3", "train.py", "--lr", "0.1"])
    assert args.nproc_per_node == 2 and args.command == ["python3", "train.py", "--lr", "0.1"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie whose parent is gone is reaped by init soon; count it as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
