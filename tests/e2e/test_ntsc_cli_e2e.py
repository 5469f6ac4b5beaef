"""`pedl cmd|notebook|shell|tensorboard` against real processes (a master and a local agent): cmd run
prints the command's output with its context files and exits with its code, and a detached command is
listed, logged and killed; a notebook's and a TensorBoard's URL serve them through the master's proxy;
pedl shell open runs a command over ssh through the master."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pedl.common.mount_namespace import probe
from pedl.devcluster import pedl_command, wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config

pytestmark = pytest.mark.e2e

NO_NAMESPACE = probe()
POOL_HOOK = 'export POOL_HOOK_RAN=yes\necho "the pool\'s startup hook ran"'


@pytest.fixture(scope="module")
def ntsc_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # the default pool's startup hook (Determined's task_container_defaults.startup_hook, set per pool)
    # runs before every task of the module: the notebook, shell and TensorBoard tests run with it too
    pool = {"pool_name": "default", "task_container_defaults": {"startup_hook": POOL_HOOK}}
    c = Cluster(tmp_path_factory.mktemp("pedl-ntsc"), None, {"resource_pools": [pool]}).start()
    try:
        c.add_agent("cmd-agent-1", slots=1)
        yield c
    finally:
        c.stop()


@pytest.fixture
def pedl(ntsc_cluster: Cluster, tmp_path: Path):
    env = {**os.environ, "PEDL_CONFIG_DIR": str(tmp_path / "cli"), "COLUMNS": "250"}
    for name in ("PEDL_MASTER", "DET_MASTER", "PEDL_USER"):
        env.pop(name, None)

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*pedl_command(), "-m", ntsc_cluster.master.url, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    return run


def test_cmd_run_prints_the_output_of_the_command_with_its_context(pedl, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "note.txt").write_text("from the context\n")
    done = pedl("cmd", "run", "-c", str(ctx), "sh", "-c", "echo hi; cat note.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["the pool's startup hook ran", "hi", "from the context"], done.stdout
    assert "Launched command" in done.stderr
    # it has ended: listed as terminated (for a day)
    listed = json.loads(pedl("cmd", "list", "--json").stdout)
    assert [c["state"] for c in listed if c["id"] in done.stderr] == ["STATE_TERMINATED"], (listed, done.stderr)


def test_the_pools_startup_hook_then_the_contexts_startup_hook_run_before_the_command(pedl, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "startup-hook.sh").write_text(
        'echo "the context\'s hook sees POOL_HOOK_RAN=$POOL_HOOK_RAN"\nexport CONTEXT_HOOK_RAN=yes\n'
    )
    done = pedl("cmd", "run", "-c", str(ctx), "sh", "-c", 'echo "the command sees $POOL_HOOK_RAN $CONTEXT_HOOK_RAN"')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == [
        "the pool's startup hook ran",
        "the context's hook sees POOL_HOOK_RAN=yes",
        "the command sees yes yes",
    ], done.stdout
    # a hook that fails ends the task with its code, before the command runs
    (ctx / "startup-hook.sh").write_text("echo broken hook; exit 7\n")
    done = pedl("cmd", "run", "-c", str(ctx), "echo", "never")
    assert done.returncode == 7, (done.stdout, done.stderr)
    assert "broken hook" in done.stdout and "never" not in done.stdout


@pytest.mark.skipif(NO_NAMESPACE is not None, reason=f"no mount namespaces here: {NO_NAMESPACE}")
def test_a_command_gets_a_dev_shm_of_its_resources_shm_size(pedl) -> None:
    done = pedl("cmd", "run", "--config", "resources.shm_size=1.5g", "sh", "-c", "df -k /dev/shm | tail -1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split()[1] == "1572864", done.stdout  # KiB: 1.5 GiB


@pytest.mark.skipif(NO_NAMESPACE is not None, reason=f"no mount namespaces here: {NO_NAMESPACE}")
def test_a_process_command_sees_its_bind_mounts_absolute_and_relative(pedl, enterable_tmp: Path) -> None:
    data = enterable_tmp / "data"  # the command runs as its user's own uid: a path that user may read
    data.mkdir(mode=0o755)
    (data / "x.txt").write_text("from the host\n")
    at = enterable_tmp / "in-the-task"  # an absolute mountpoint made in the task's view only
    config = enterable_tmp / "cmd.yaml"
    config.write_text(
        f"bind_mounts:\n  - {{host_path: {data}, container_path: {at}, read_only: true}}\n"
        f"  - {{host_path: {data}, container_path: rel-data}}\n"
        f"  - {{host_path: {enterable_tmp / 'absent'}, container_path: absent-data}}\n"
    )
    done = pedl(
        "cmd",
        "run",
        "--config-file",
        str(config),
        "sh",
        "-c",
        f"cat {at}/x.txt rel-data/x.txt; touch {at}/y 2>/dev/null || echo read-only",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["from the host", "from the host", "read-only"], done.stdout
    assert not at.exists()  # the host never saw the mountpoint
    said = f"host_path {enterable_tmp / 'absent'} does not exist here; absent-data is not mounted"
    assert said in done.stderr + done.stdout
    assert not (enterable_tmp / "absent").exists()  # the agent makes no host path a config names


def test_cmd_run_exits_with_the_commands_code(pedl) -> None:
    done = pedl("cmd", "run", "sh", "-c", "echo failing >&2; exit 3")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "failing" in done.stdout and "exited with code 3" in done.stderr


def test_a_detached_command_is_listed_logged_and_killed(pedl, ntsc_cluster: Cluster) -> None:
    started = pedl("cmd", "run", "-d", "--config", "description=sleeper", "sh", "-c", "echo started; sleep 600")
    assert started.returncode == 0, started.stderr
    cmd_id = started.stdout.strip()
    listed = pedl("cmd", "list")
    assert cmd_id in listed.stdout and "sleeper" in listed.stdout, listed.stdout
    wait_for(lambda: "started" in pedl("cmd", "logs", cmd_id).stdout, 60, what="the command's output")
    killed = pedl("cmd", "kill", cmd_id[:8])  # a unique prefix names it
    assert killed.returncode == 0 and f"Killed command {cmd_id}" in killed.stdout, killed.stderr
    wait_for(
        lambda: ntsc_cluster.master.api("GET", f"/api/v1/commands/{cmd_id}")["command"]["state"] == "STATE_TERMINATED",
        60,
        what="the command to end",
    )
    assert ntsc_cluster.master.api("GET", f"/api/v1/commands/{cmd_id}")["command"]["state"] == "STATE_TERMINATED"
    # its logs stay, and following an ended command's logs returns at once
    followed = pedl("cmd", "logs", "-f", cmd_id)
    assert followed.returncode == 0 and "started" in followed.stdout


def test_bad_arguments_name_the_argument(pedl, tmp_path: Path) -> None:
    cases = [
        (("cmd", "run"), "CMD"),
        (("cmd", "run", "--config", "nonsense", "true"), "--config"),
        (("cmd", "run", "--context", str(tmp_path / "missing"), "true"), "--context"),
        (("cmd", "run", "--config-file", str(tmp_path / "missing.yaml"), "true"), "--config-file"),
        (("cmd", "run", "--workspace", "no-such-workspace", "true"), "--workspace"),
        (("cmd", "run", "--config", "resources.slots=-1", "true"), "resources.slots"),
        (("cmd", "kill", "ffffffff"), "ffffffff"),
    ]
    before = pedl("cmd", "list", "-a", "--json").stdout
    for args, named in cases:
        done = pedl(*args)
        assert done.returncode != 0 and named in done.stderr, (args, done.stdout, done.stderr)
    assert pedl("cmd", "list", "-a", "--json").stdout == before  # nothing was started


def require_ssh() -> None:
    if shutil.which("ssh") is None:
        message = "OpenSSH's ssh is missing (apt-get install openssh-client; make test installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def test_notebook_start_prints_a_url_that_serves_jupyter_and_open_prints_it_again(pedl, ntsc_cluster: Cluster) -> None:
    started = pedl("notebook", "start", "--config", "resources.slots=0", timeout=300)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    nb_id = url.rstrip("/").rsplit("/", 1)[-1]
    try:
        assert url == f"{ntsc_cluster.master.url}/proxy/{nb_id}/" and "is ready" in started.stderr
        status = httpx.get(
            url + "api/status", headers={"Authorization": f"Bearer {ntsc_cluster.master.token()}"}, timeout=30
        )
        assert status.status_code == 200 and "kernels" in status.json(), status.text
        opened = pedl("notebook", "open", "--no-browser", nb_id[:8])
        assert opened.returncode == 0 and opened.stdout.strip() == url, opened.stderr
    finally:
        pedl("notebook", "kill", nb_id)
    wait_for(
        lambda: ntsc_cluster.master.api("GET", f"/api/v1/notebooks/{nb_id}")["notebook"]["state"] == "STATE_TERMINATED",
        60,
        what="the notebook to end",
    )


def test_shell_open_runs_a_command_over_ssh_through_the_master(pedl) -> None:
    require_ssh()
    started = pedl("shell", "start", "-d")
    assert started.returncode == 0, started.stderr
    shell_id = started.stdout.strip()
    try:
        opened = pedl("shell", "open", shell_id, "--", "-o", "BatchMode=yes", "echo", "hi", "$DET_TASK_ID", timeout=300)
        assert opened.returncode == 0, opened.stderr
        assert opened.stdout.split() == ["hi", shell_id]
        assert f"pedl shell open {shell_id}" in opened.stderr
    finally:
        pedl("shell", "kill", shell_id)


def test_tensorboard_start_serves_an_experiments_tensorboard(pedl, ntsc_cluster: Cluster) -> None:
    exp_id = ntsc_cluster.create(steps_config(name="tb-cli", steps=4))
    ended = wait_experiment(ntsc_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert ended["state"] == "STATE_COMPLETED", ended
    started = pedl("tensorboard", "start", str(exp_id), timeout=300)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    tb_id = url.rstrip("/").rsplit("/", 1)[-1]
    try:
        page = httpx.get(
            url, headers={"Authorization": f"Bearer {ntsc_cluster.master.token()}"}, timeout=30, follow_redirects=True
        )
        assert page.status_code == 200 and "tb-relative-root" in page.text, page.text[:300]
        listed = pedl("tensorboard", "list")
        assert f"TensorBoard (Experiment {exp_id})" in listed.stdout
    finally:
        pedl("tensorboard", "kill", tb_id)
