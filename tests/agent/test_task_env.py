"""The task environment follows docs/internals.md: master's env, then what the agent knows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pedl.agent.task_env import TaskHost, task_argv, task_env
from pedl.common.agent_protocol import SlotInfo, StartTask


def _spec(slot_ids: list[str], env: dict[str, str] | None = None) -> StartTask:
    return StartTask(
        allocation_id="a1",
        task_id="t1",
        name="trial 1",
        entrypoint="true",
        env=env or {},
        slot_ids=slot_ids,
        session_token="tok",
        context_url="http://m/ctx",
    )


def _host(slots: list[SlotInfo]) -> TaskHost:
    return TaskHost(master_url="http://m:8080", agent_id="agent-1", work_dir=Path("/w"), slots={s.id: s for s in slots})


def test_cpu_task_env() -> None:
    host = _host([SlotInfo(id="0"), SlotInfo(id="1")])
    env = task_env(
        _spec(["1"], {"DET_TRIAL_ID": "7", "DET_MASTER": "spoofed"}), host, base={"PATH": "/usr/bin", "HOME": "/home/x"}
    )
    assert env["HOME"] == "/home/x"
    assert env["DET_TRIAL_ID"] == "7"
    assert env["DET_MASTER"] == "http://m:8080"
    assert env["DET_AGENT_ID"] == "agent-1"
    assert json.loads(env["DET_SLOT_IDS"]) == [1]
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin"]


def test_a_task_inherits_only_the_allowed_part_of_the_agents_environment(monkeypatch) -> None:
    """Before, a task got the agent's whole environment: a trial printed PEDL_AGENT_TOKEN into its logs."""
    agent_env = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "LC_TIME": "en_GB",
        "TZ": "UTC",
        "TERM": "xterm",
        "TMPDIR": "/scratch",
        "HOME": "/root",
        "PEDL_AGENT_TOKEN": "enroll-secret",
        "AWS_SECRET_ACCESS_KEY": "agent-key",
        "PYTHONPATH": "/agent/lib",
        "LD_PRELOAD": "/x.so",
        "DET_SESSION_TOKEN": "someone-elses",
    }
    for name, value in agent_env.items():
        monkeypatch.setenv(name, value)
    for base in (None, agent_env):  # os.environ by default
        env = task_env(
            _spec(["0"], {"DET_SESSION_TOKEN": "its-own", "MY_VAR": "x"}), _host([SlotInfo(id="0")]), base=base
        )
        for name in ("LANG", "LC_ALL", "LC_TIME", "TZ", "TERM", "TMPDIR", "HOME"):
            assert env[name] == agent_env[name]
        for name in ("PEDL_AGENT_TOKEN", "AWS_SECRET_ACCESS_KEY", "PYTHONPATH", "LD_PRELOAD"):
            assert name not in env
        assert env["DET_SESSION_TOKEN"] == "its-own" and env["MY_VAR"] == "x"  # what start_task set
        assert env["PATH"].split(os.pathsep)[-1] == "/usr/bin"
        assert "enroll-secret" not in repr(env) and "agent-key" not in repr(env)


def test_gpu_task_env_lists_its_gpus() -> None:
    host = _host([SlotInfo(id=str(i), type="cuda", uuid=f"GPU-{i}") for i in range(4)])
    env = task_env(_spec(["2", "3"]), host, base={})
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-2,GPU-3"
    assert json.loads(env["DET_SLOT_IDS"]) == [2, 3]


def test_argv_of_entrypoints() -> None:
    assert task_argv("python3 train.py --x 1") == ["/bin/sh", "-c", "python3 train.py --x 1"]
    assert task_argv(["python3", "train.py"]) == ["python3", "train.py"]
    assert task_argv([]) == []  # the agent refuses it
    assert task_argv([], "echo hook", True) == ["/bin/sh", "-c", "echo hook\n. ./startup-hook.sh"]  # hooks alone


def test_startup_hooks_run_in_one_shell_before_the_entrypoint_which_takes_its_place(tmp_path: Path) -> None:
    (tmp_path / "startup-hook.sh").write_text('export B="$A+context"\necho "context hook"\n')
    pool_hook = 'export A=pool\necho "pool hook"'
    script = [sys.executable, "-c", "import os, sys; print(os.environ['B'], sys.argv[1:], os.getpid())", "a b", "$c"]
    argv = task_argv(script, pool_hook, context_hook=True)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3:] == ["pedl-task", *script]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    out = proc.communicate(timeout=30)[0].splitlines()
    # the arguments arrive as they were (no word splitting, no expansion), in the shell's own process
    assert out == ["pool hook", "context hook", f"pool+context ['a b', '$c'] {proc.pid}"]
    shell = task_argv('echo "$B"', pool_hook, context_hook=True)
    assert subprocess.run(shell, cwd=tmp_path, capture_output=True, text=True).stdout.splitlines()[-1] == "pool+context"
    # without hooks nothing is wrapped; with the pool's hook alone, no startup-hook.sh is sourced
    assert task_argv(["true"], "", context_hook=False) == ["true"]
    assert ". ./startup-hook.sh" not in task_argv(["true"], "echo x")[2]


def test_tasks_get_the_agents_master_ca_under_pedl_and_determined_names() -> None:
    host = TaskHost(
        master_url="https://m:8443",
        agent_id="agent-1",
        work_dir=Path("/w"),
        slots={},
        master_cert=Path("/etc/pedl/ca.pem"),
    )
    env = task_env(_spec([], {"DET_MASTER_CERT_FILE": "/spoofed.pem"}), host, base={"PEDL_MASTER_CERT": "/old.pem"})
    assert env["PEDL_MASTER_CERT"] == env["DET_MASTER_CERT_FILE"] == "/etc/pedl/ca.pem"
    env = task_env(_spec([]), _host([]), base={})
    assert "PEDL_MASTER_CERT" not in env and "DET_MASTER_CERT_FILE" not in env
