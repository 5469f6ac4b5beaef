"""The AWS agent's user data, run for real with bash against a real master, in a sandbox: its own
PEDL_HOME and HOME, a fake IMDSv2 for the instance id, and a PATH (/usr/bin:/bin) on which no
`pedl` is found, as on a stock image. The user data carries the instance's single-use enrollment
secret (issued in the master's database, as the AWS provider has it at launch). Where the image lacks
the master's pedl, the script downloads the master's wheel with that secret, installs it into a venv
under PEDL_HOME (dependencies from this machine's pip index) and becomes `pedl agent run` under the
instance's id, which registers with it (using it up) and then runs a trial. Where the image has that
version, nothing is installed; another instance's secret registers nothing; with a wrong or used
secret, the download fails and the script stops with the error in its output.

One pip install per session: only the first test installs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.config.master_config import load_master_config
from pedl.devcluster import agent_connected, wait_experiment, wait_for
from pedl.master.agents.credentials import new_secret, secret_hash
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.provisioner.providers.aws_boot import agent_user_data
from pedl.version import __version__
from tests.e2e.conftest import Cluster, steps_config
from tests.support.moto_server import FakeMetadataServer
from tests.support.shared_dirs import enterable_twin

pytestmark = pytest.mark.e2e

SANDBOX_PATH = "/usr/bin:/bin"
INSTANCE_ID = "i-0a1b2c3d4e5f60718"
POOL = "default"
DONE = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}
PIP_USER_CONFIGS = (Path.home() / ".config" / "pip" / "pip.conf", Path.home() / ".pip" / "pip.conf")


def sandbox_python() -> str | None:
    """The Python >= 3.11 the user data would pick on SANDBOX_PATH (it tries the same names)."""
    for name in ("python3.13", "python3.12", "python3.11", "python3"):
        for directory in SANDBOX_PATH.split(":"):
            exe = Path(directory) / name
            if (
                exe.exists()
                and subprocess.run([str(exe), "-c", "import sys; sys.exit(sys.version_info < (3, 11))"]).returncode == 0
            ):
                return str(exe)
    return None


def pip_env() -> dict[str, str]:
    """This machine's pip index settings, which the sandbox's own HOME would otherwise hide: on an
    instance the image's pip configuration is where the dependencies come from."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    # the sandbox's HOME is new each time: without this every run downloads and builds every
    # dependency again (minutes each); an instance has no cache, but installs the same packages
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    # nor compile every installed module (most of the install's CPU; Python compiles what it imports).
    # pip reads its negative options' variables inverted: "0" here means --no-compile
    env.setdefault("PIP_NO_COMPILE", "0")
    if "PIP_CONFIG_FILE" not in env:
        user_config = next((p for p in PIP_USER_CONFIGS if p.is_file()), None)
        if user_config is not None:
            env["PIP_CONFIG_FILE"] = str(user_config)
    return env


class UserData:
    """The user data script run with bash in its own process group, its output in a file."""

    def __init__(self, work: Path, script: str, *, imds_url: str, path: str = SANDBOX_PATH) -> None:
        self.work = work
        self.home = work / "home"
        # the venv the agent installs there gives its tasks their `python3`: they run as their users' own
        # uids, who may not enter tmp_path (root's alone), as they may an instance's /usr/local/pedl
        self.pedl_home = enterable_twin(work) / "pedl-home"
        self.script = work / "user-data.sh"
        self.log_path = work / "user-data.log"
        self.home.mkdir(parents=True)
        self.script.write_text(script)
        # a clean environment, as cloud-init gives: none of this test process's virtualenv or PYTHONPATH
        self.env = {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PEDL_HOME": str(self.pedl_home),
            "PEDL_IMDS_URL": imds_url,
            "PYTHONUNBUFFERED": "1",
            **pip_env(),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> UserData:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["bash", str(self.script)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.work,
                start_new_session=True,
            )
        return self

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the user data still runs after {timeout:g}s:\n{self.output()[-3000:]}") from None

    def cmdline(self) -> list[str]:
        """The argv of the script's process: after its `exec`, the agent's."""
        assert self.proc is not None
        return Path(f"/proc/{self.proc.pid}/cmdline").read_bytes().decode().split("\0")

    def stop(self) -> None:
        """Ends the whole process group: bash, pip, or the agent it became, and the agent's tasks."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture
def imds() -> Iterator[FakeMetadataServer]:
    fake = FakeMetadataServer(ec2={"instance-id": INSTANCE_ID}).start()
    yield fake
    fake.stop()


@pytest.fixture
def run_user_data(tmp_path: Path, imds: FakeMetadataServer) -> Iterator:
    """Starts the user data for a master (with the given token) in a sandbox under tmp_path; every
    run is ended at teardown."""
    runs: list[UserData] = []

    def run(c: Cluster, token: str, path: str = SANDBOX_PATH) -> UserData:
        script = agent_user_data(master_url=c.master.url, pool=POOL, slots=1, spot=False, enrollment_secret=token)
        ud = UserData(tmp_path / f"user-data-{len(runs)}", script, imds_url=imds.url, path=path).start()
        runs.append(ud)
        return ud

    yield run
    for ud in runs:
        ud.stop()


def instance_secret(c: Cluster, instance_id: str = INSTANCE_ID) -> str:
    """A single-use enrollment secret bound to `instance_id`, stored (its digest) in the master's database
    as the AWS provider has the master do at launch (this cluster has no AWS pool)."""
    secret = new_secret()
    db = Database(load_master_config(c.master.config_path).database_url())
    try:
        with db.session() as s:
            s.add(
                models.InstanceEnrollment(
                    secret_hash=secret_hash(secret),
                    resource_pool=POOL,
                    launch_token="e2e",
                    instance_id=instance_id,
                    created_at=time.time(),
                )
            )
    finally:
        db.dispose()
    return secret


def wait_registered(c: Cluster, ud: UserData, timeout: float) -> None:
    def connected() -> bool:
        if not ud.running():
            raise AssertionError(f"the user data exited with {ud.proc.returncode}:\n{ud.output()[-3000:]}")
        return agent_connected(c.master, INSTANCE_ID)

    try:
        wait_for(connected, timeout, interval=0.5, what=f"agent {INSTANCE_ID} to register")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nuser data output:\n{ud.output()[-3000:]}") from None


def venv_pedl(pedl_home: Path) -> tuple[str, str]:
    """The version and the file of the pedl that the venv under PEDL_HOME imports."""
    out = subprocess.run(
        [
            str(pedl_home / "venv" / "bin" / "python"),
            "-c",
            "import pedl, pedl.version; print(pedl.version.__version__); print(pedl.__file__)",
        ],
        capture_output=True,
        text=True,
        env={"PATH": SANDBOX_PATH},
        cwd="/",
        check=True,
    ).stdout
    version, file = out.split()
    return version, file


def test_a_stock_image_installs_the_masters_pedl_and_runs_a_trial(
    tmp_path: Path, run_user_data, imds: FakeMetadataServer
) -> None:
    python = sandbox_python()
    if python is None:
        pytest.skip(f"no Python 3.11 or newer on {SANDBOX_PATH}: the user data would stop there")
    # the install must be needed: no `pedl` on the sandbox's PATH, none importable by its python
    assert not any((Path(d) / "pedl").exists() for d in SANDBOX_PATH.split(":"))
    assert subprocess.run([python, "-c", "import pedl"], capture_output=True, cwd="/").returncode != 0

    c = Cluster(tmp_path / "cluster", None).start()
    try:
        secret = instance_secret(c)
        ud = run_user_data(c, secret)
        wait_registered(c, ud, timeout=300)  # a pip install with every dependency on the way

        out = ud.output()
        assert f"pedl: installing pedl {__version__} from the master (the image has none)" in out
        home = ud.pedl_home
        wheel = home / f"pedl-{__version__}-py3-none-any.whl"
        assert wheel.is_file() and wheel.stat().st_size > 0
        version, file = venv_pedl(home)
        assert version == __version__
        assert Path(file).is_relative_to(home / "venv"), file  # the installed copy, not this checkout
        # the script became the venv's agent, under the instance's id, with the secret from the environment,
        # which it removed from there; it holds a credential of its own now, and the secret is used up
        argv = ud.cmdline()
        assert str(home / "venv" / "bin" / "pedl") in argv and INSTANCE_ID in argv
        assert secret not in " ".join(argv)
        assert secret.encode() not in Path(f"/proc/{ud.proc.pid}/environ").read_bytes()
        credential = ud.home / ".local" / "share" / "pedl" / "agent" / INSTANCE_ID / "agent.credential"
        assert credential.stat().st_mode & 0o777 == 0o600
        package = subprocess.run(
            [
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-H",
                f"X-Pedl-Agent-Token: {secret}",
                f"{c.master.url}/api/v1/pedl/package",
            ],
            capture_output=True,
            text=True,
        )
        assert package.stdout == "401"
        assert ("PUT", "/latest/api/token", False) in imds.requests
        assert ("GET", "/latest/meta-data/instance-id", True) in imds.requests
        (agent,) = [a for a in c.master.api("GET", "/api/v1/agents")["agents"] if a["id"] == INSTANCE_ID]
        assert agent["resourcePools"] == [POOL] and agent["pedlVersion"] == __version__

        exp_id = c.create(steps_config(steps=3, delay=0.01))
        exp = wait_experiment(c.master, exp_id, DONE, timeout=180)
        assert exp["state"] == "STATE_COMPLETED", f"{exp['state']}; the agent's output:\n{ud.output()[-3000:]}"
        (trial,) = c.trials(exp_id)
        assert trial["state"] == "STATE_COMPLETED"
        assert trial["totalBatchesProcessed"] == 3
        text = c.master.api("GET", f"/api/v1/trials/{trial['id']}/logs", follow="false")
        assert INSTANCE_ID in text  # the trial's logs name the agent that ran it
    finally:
        c.stop()


def image_with_pedl(bin_dir: Path) -> Path:
    """An image's `pedl` console script of the master's version (this interpreter's pedl), alone in
    a directory, written as pip writes console scripts."""
    bin_dir.mkdir(parents=True)
    script = bin_dir / "pedl"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom pedl.cli.main import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def test_an_image_with_the_masters_version_installs_nothing(tmp_path: Path, e2e_db, run_user_data) -> None:
    image_pedl = image_with_pedl(tmp_path / "image-bin")
    c = Cluster(tmp_path / "cluster", e2e_db).start()
    try:
        ud = run_user_data(c, instance_secret(c), path=f"{image_pedl.parent}:{SANDBOX_PATH}")
        wait_registered(c, ud, timeout=60)
        out = ud.output()
        assert "pedl: installing" not in out and "could not install" not in out, out
        assert not (ud.pedl_home / "venv").exists()
        assert not list(ud.pedl_home.glob("*.whl"))
        assert str(image_pedl) in ud.cmdline()  # exec'd the image's own pedl
    finally:
        c.stop()


def test_a_wrong_agent_token_stops_the_script_at_the_download(tmp_path: Path, run_user_data) -> None:
    if sandbox_python() is None:
        pytest.skip(f"no Python 3.11 or newer on {SANDBOX_PATH}: the user data would stop before the download")
    c = Cluster(tmp_path / "cluster", None).start()
    try:
        ud = run_user_data(c, "not-the-agent-token")
        rc = ud.wait(60)
        out = ud.output()
        assert rc != 0, out
        assert "401" in out, out  # curl -f names the status
        assert f"pedl: could not download pedl {__version__} from {c.master.url}/api/v1/pedl/package" in out
        assert not (ud.pedl_home / "venv").exists()
        assert not any(a["id"] == INSTANCE_ID for a in c.master.api("GET", "/api/v1/agents")["agents"])
    finally:
        c.stop()


def test_another_instances_secret_or_a_used_one_registers_nothing(tmp_path: Path, run_user_data) -> None:
    """User data is readable by every process on its instance: a task that reads it finds a secret that was
    used up when its agent registered, and that was only ever good for that instance's id."""
    image_pedl = image_with_pedl(tmp_path / "image-bin")
    c = Cluster(tmp_path / "cluster", None).start()
    try:
        other = instance_secret(c, "i-0ffffffffffffffff")
        ud = run_user_data(c, other, path=f"{image_pedl.parent}:{SANDBOX_PATH}")
        assert ud.wait(60) != 0
        assert "this enrollment secret belongs to another instance" in ud.output()
        own = instance_secret(c)
        wait_registered(c, run_user_data(c, own, path=f"{image_pedl.parent}:{SANDBOX_PATH}"), timeout=60)
        # the same secret again, as a task on the instance would try it: used up (the download refuses it too)
        again = run_user_data(c, own, path=f"{image_pedl.parent}:{SANDBOX_PATH}")
        assert again.wait(60) != 0
        assert "already used" in again.output() or "credential of its own" in again.output()
    finally:
        c.stop()
