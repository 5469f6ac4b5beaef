"""The master's user data, rendered as CloudFormation's Fn::Sub renders it and run for real with bash in
a sandbox: a temporary root that stands for / (every absolute path the script writes is moved under
it), a fake IMDSv2, moto's S3 holding the wheel of this pedl where `up` puts it, and a PATH whose
first directory holds recording fakes of what a test cannot run (systemctl, mkfs.ext4, blkid, mount,
useradd, chown). Everything pedl-related runs for real: the venv, the wheel fetched and checked by its
sha256, master_boot, `pedl master install-service`; the master.yaml it writes passes
`pedl master check-config` and starts a master that answers /info.

One pip install per case (dependencies from this machine's pip index), so these are e2e tests."""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

import pedl
from pedl.common.package import Wheel, build_wheel
from pedl.deploy.master_user_data import fn_sub, master_user_data, wheel_key
from pedl.deploy.options import DeployOptions
from pedl.version import DETERMINED_API_VERSION, __version__
from tests.deploy.stack_samples import BUCKET, REGION, SUBSTITUTIONS, VOLUME
from tests.deploy.template_samples import options_for
from tests.e2e.test_agent_user_data_e2e import SANDBOX_PATH, pip_env, sandbox_python
from tests.support.moto_server import (  # noqa: F401
    FAKE_AWS_ENV,
    FakeMetadataServer,
    metadata_server_fixture,
    moto_endpoint_fixture,
    moto_server_fixture,
)

pytestmark = pytest.mark.e2e

# the absolute paths the script writes (or looks at for the data volume), moved under the sandbox's root
ROOTED = (
    "/usr/local/pedl",
    "/var/lib/pedl",
    "/etc/systemd/system",
    "/etc/fstab",
    "/var/log/pedl-boot.log",
    "/dev/sdf",
    "/dev/xvdf",
    "/dev/disk/by-id",
)
_ROOTED = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(p) for p in ROOTED) + r")(?![\w-])")
INSTALL_SERVICE = 'master install-service --config "$CONFIG"'
FAKE_UUID = "0b6c1f2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e"

# Each fake appends its argv (one line) to $FAKE_LOG. blkid finds a file system once mkfs.ext4 made one.
FAKES = {
    "systemctl": 'case "$1" in is-active) exit 3;; esac',
    "mkfs.ext4": 'touch "$FAKE_STATE/formatted"',
    "blkid": '[ -e "$FAKE_STATE/formatted" ] || exit 2\n[ "$1" = -p ] || echo ' + FAKE_UUID,
    "mount": "",
    "useradd": "",
    "chown": "",
}


def block_device() -> str | None:
    """A block device of this machine for the sandbox's /dev/sdf link to point at: the script tests
    `-b` before anything else, and only the fakes (never a real mkfs or mount) ever get its name."""
    for name in sorted(os.listdir("/dev")):
        path = f"/dev/{name}"
        if name.startswith("loop") and stat.S_ISBLK(os.stat(path).st_mode):
            return path
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sandbox:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.root = work / "root"
        self.fakes = work / "fakes"
        self.state = work / "fake-state"
        self.fake_log = work / "fake-calls.log"
        for d in (
            self.root / "etc" / "systemd" / "system",
            self.root / "var" / "log",
            self.root / "dev",
            self.root / "usr" / "local",
            self.fakes,
            self.state,
            work / "home",
        ):
            d.mkdir(parents=True)
        (self.root / "etc" / "fstab").write_text("# sandbox fstab\n")
        for name, body in FAKES.items():
            fake = self.fakes / name
            fake.write_text(f'#!/bin/bash\necho "{name} $*" >> "$FAKE_LOG"\n{body}\n')
            fake.chmod(0o755)

    def path(self, real: str) -> Path:
        return self.root / real.lstrip("/")

    def rooted(self, script: str, user: str) -> str:
        """The script with the sandbox's root in front of each absolute path it writes, the sandbox's
        unit directory given to install-service (its default is the real one) and this test's user as
        the master's user (the script gives it the master's files; `pedl` does not exist here)."""
        text = _ROOTED.sub(lambda m: str(self.root) + m.group(1), script)
        assert text.count("\nSERVICE_USER=pedl\n") == 1 and text.count(INSTALL_SERVICE) == 1
        text = text.replace("\nSERVICE_USER=pedl\n", f"\nSERVICE_USER={user}\n")
        return text.replace(
            INSTALL_SERVICE, f'master install-service --unit-dir {self.path("/etc/systemd/system")} --config "$CONFIG"'
        )

    def fake_calls(self) -> list[str]:
        return self.fake_log.read_text().splitlines() if self.fake_log.exists() else []


def pedl_env(home: Path, **more: str) -> dict[str, str]:
    return {"PATH": SANDBOX_PATH, "HOME": str(home), "LANG": "C.UTF-8", **more}


def wait_info(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the master exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/info", timeout=2) as r:
                return json.loads(r.read())
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the master did not answer {url}/info in {timeout:g}s:\n{log.read_text()[-3000:]}")


def run_user_data(script: Path, env: dict[str, str]) -> str:
    """bash runs the script to its end; its output (stdout and stderr: the script tees both)."""
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parent,
        stdin=subprocess.DEVNULL,
        timeout=540,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    return out


class Boot:
    """One sandboxed machine: its block device, moto's bucket and the environment its user data runs in."""

    def __init__(self, tmp_path: Path, moto_endpoint: str, metadata_server: FakeMetadataServer) -> None:
        if sandbox_python() is None:
            pytest.skip(f"no Python 3.11 or newer on {SANDBOX_PATH}: the user data would stop there")
        device = block_device()
        if device is None:
            pytest.skip("no loop block device on this machine for the sandbox's data volume to point at")
        self.device = device
        self.work = tmp_path
        self.sandbox = Sandbox(tmp_path)
        self.sandbox.path("/dev/sdf").symlink_to(device)
        metadata_server.ec2.update({"local-ipv4": "127.0.0.1", "local-hostname": "localhost"})
        self.metadata_server = metadata_server
        self.s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
        self.s3.create_bucket(Bucket=BUCKET)
        self.user = getpass.getuser()
        self.aws = {**FAKE_AWS_ENV, "AWS_ENDPOINT_URL": moto_endpoint}
        self.env = {
            **pedl_env(
                tmp_path / "home",
                PATH=f"{self.sandbox.fakes}:{SANDBOX_PATH}",
                PEDL_IMDS_URL=metadata_server.url,
                PYTHONUNBUFFERED="1",
                FAKE_LOG=str(self.sandbox.fake_log),
                FAKE_STATE=str(self.sandbox.state),
            ),
            **self.aws,
            **pip_env(),
        }
        self.home = self.sandbox.path("/usr/local/pedl")
        self.venv_pedl = self.home / "venv" / "bin" / "pedl"
        self.data_dir = self.sandbox.path("/var/lib/pedl")
        self.config = self.home / "etc" / "master.yaml"

    def user_data(self, options: DeployOptions, wheel: Wheel) -> str:
        """The user data `up` would give the master for `options`, with `wheel` uploaded as `up` does."""
        self.s3.put_object(Bucket=BUCKET, Key=wheel_key(options.pedl_version), Body=wheel.data)
        script = fn_sub(master_user_data(options, wheel_sha256=wheel.sha256), SUBSTITUTIONS)
        (self.work / "user-data.sh").write_text(self.sandbox.rooted(script, self.user))
        return script

    def run(self) -> str:
        return run_user_data(self.work / "user-data.sh", self.env)

    def installed(self) -> tuple[str, Path]:
        """The version and the location of the pedl in the sandbox's venv."""
        found = subprocess.run(
            [
                str(self.home / "venv" / "bin" / "python"),
                "-c",
                "import pedl, pedl.version; print(pedl.version.__version__, pedl.__file__)",
            ],
            capture_output=True,
            text=True,
            env=pedl_env(self.work / "home"),
            cwd="/",
            check=True,
        )
        version, file = found.stdout.split()
        return version, Path(file)

    def check_config(self) -> None:
        checked = subprocess.run(
            [str(self.venv_pedl), "master", "check-config", str(self.config)],
            capture_output=True,
            text=True,
            env=pedl_env(self.work / "home"),
            cwd=self.work,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr

    @contextmanager
    def master(self, tls: bool = False) -> Iterator[tuple[str, dict, Any]]:
        """The installed pedl's master on the written master.yaml: its URL, its /info and what its
        HTTPS clients verify it with."""
        port = free_port()
        log = self.work / "master.log"
        with open(log, "ab") as f:
            proc = subprocess.Popen(
                [str(self.venv_pedl), "master", "run", "--config", str(self.config), "--port", str(port)],
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.work,
                env=pedl_env(self.work / "home", PEDL_IMDS_URL=self.metadata_server.url, **self.aws),
            )
        try:
            verify: Any = True
            if tls:
                import ssl

                verify = ssl.create_default_context(cafile=str(self.data_dir / "tls" / "ca.crt"))
                urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=verify)))
            url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
            yield url, wait_info(url, proc, log, timeout=60), verify
        finally:
            urllib.request.install_opener(None)
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def test_the_master_user_data_installs_pedl_and_writes_a_master_yaml_that_starts(
    tmp_path: Path, moto_endpoint: str, metadata_server: FakeMetadataServer
) -> None:
    """The first boot and the boots after it, the upgrade to the next release on the same machine, then
    TLS turned on by a stack update (every boot writes master.yaml and makes what it needs): one
    machine for all, since each fresh install of pedl costs most of a minute."""
    boot = Boot(tmp_path, moto_endpoint, metadata_server)
    sandbox, device, user = boot.sandbox, boot.device, boot.user
    wheel = build_wheel()
    options = options_for(False, "embedded", False, False, False, False)
    script = boot.user_data(options, wheel)
    out = boot.run()
    assert f"installing pedl {__version__} from the bucket" in out
    assert f"fetched s3://{BUCKET}/{wheel_key(__version__)} (sha256 {wheel.sha256})" in out

    # pedl at this version in a venv under the sandbox's /usr/local/pedl, the wheel's sha256 remembered
    home = boot.home
    version, file = boot.installed()
    assert version == __version__ and file.is_relative_to(home / "venv"), (version, file)
    assert (home / "wheel.sha256").read_text().strip() == wheel.sha256

    # the data volume: formatted once (nothing was on it), in fstab by its UUID, mounted, given to the user
    data_dir = boot.data_dir
    calls = sandbox.fake_calls()
    assert f"mkfs.ext4 -q -L pedl-data {device}" in calls
    assert f"mount {data_dir}" in calls and f"chown {user}:{user} {data_dir}" in calls
    assert f"UUID={FAKE_UUID} {data_dir} ext4 defaults,nofail 0 2" in sandbox.path("/etc/fstab").read_text()
    assert VOLUME in script

    # the agent token, made at first boot, readable by the master's user only
    token = data_dir / "agent_token"
    token_text = token.read_text()
    assert token_text.strip() and stat.S_IMODE(token.stat().st_mode) == 0o600

    # the service: the unit written into the sandbox's unit directory and enabled with (fake) systemctl
    units = sandbox.path("/etc/systemd/system")
    assert (units / "pedl-master.service").is_file() and (units / "pedl-boot.service").is_file()
    assert "RequiresMountsFor=" in (units / "pedl-master.service.d" / "data-volume.conf").read_text()
    assert "systemctl enable --now pedl-master" in calls and "systemctl enable pedl-boot.service" in calls
    assert str(boot.venv_pedl) in (units / "pedl-master.service").read_text()

    # every later boot runs it again: nothing installed, formatted or made again
    again = boot.run()
    assert "installing pedl" not in again and "formatting" not in again, again
    assert sandbox.fake_calls().count(f"mkfs.ext4 -q -L pedl-data {device}") == 1
    assert token.read_text() == token_text
    assert sandbox.path("/etc/fstab").read_text().count(f"UUID={FAKE_UUID} ") == 1

    # master.yaml: the installed pedl accepts it and a master starts on it
    boot.check_config()
    with boot.master() as (url, info, _verify):
        assert url.startswith("http://") and not (data_dir / "tls").exists()
        assert info["pedlVersion"] == __version__ and info["version"] == DETERMINED_API_VERSION
        store_a_user(url)
    version, wheel = upgrade_keeps_the_data(boot, options, tmp_path)
    tls_turned_on(boot, dataclasses.replace(options, pedl_version=version, tls=True), wheel, metadata_server)


def tls_turned_on(boot: Boot, options: DeployOptions, wheel: Wheel, metadata_server: FakeMetadataServer) -> None:
    """`up --tls` on a running cluster: the next boot makes the TLS files, publishes the CA and the master
    serves HTTPS, with nothing installed again and the data kept."""
    boot.user_data(options, wheel)
    out = boot.run()
    assert "installing pedl" not in out and "formatting" not in out, out
    boot.check_config()
    ca = boot.data_dir / "tls" / "ca.crt"
    with boot.master(True) as (url, info, _verify):
        assert url.startswith("https://")
        assert ("GET", "/latest/meta-data/local-ipv4", True) in metadata_server.requests
        assert boot.s3.get_object(Bucket=BUCKET, Key="pedl-cluster/ca.crt")["Body"].read() == ca.read_bytes()
        assert info["pedlVersion"] == options.pedl_version


def newer_release(tmp_path: Path) -> tuple[str, Wheel]:
    """A wheel of this pedl that says it is the next release, as `up` of a newer CLI would upload."""
    version = f"{__version__}.post1"
    package = tmp_path / "next-release" / "pedl"
    shutil.copytree(
        Path(pedl.__file__).resolve().parent, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    text = (package / "version.py").read_text()
    (package / "version.py").write_text(text.replace(f'__version__ = "{__version__}"', f'__version__ = "{version}"'))
    return version, build_wheel(package, version=version)


def store_a_user(url: str) -> None:
    login = httpx.post(f"{url}/api/v1/auth/login", json={"username": "admin", "password": ""}).json()
    auth = {"Authorization": f"Bearer {login['token']}"}
    made = httpx.post(
        f"{url}/api/v1/users",
        headers=auth,
        json={"user": {"username": "kept-across-upgrades", "active": True}, "password": "pw"},
    )
    assert made.status_code == 200, made.text


def upgrade_keeps_the_data(boot: Boot, options: DeployOptions, tmp_path: Path) -> tuple[str, Wheel]:
    """`up` with a newer CLI changes the master's user data; CloudFormation stops and starts the
    instance with it (the master stays, and its data volume with it). Its next boot installs the new
    release and the master it starts migrates and keeps what the old one stored."""
    token_text = (boot.data_dir / "agent_token").read_text()
    version, wheel = newer_release(tmp_path)
    boot.user_data(dataclasses.replace(options, pedl_version=version), wheel)
    out = boot.run()
    assert f"installing pedl {version} from the bucket" in out
    assert boot.installed()[0] == version
    assert (boot.home / "wheel.sha256").read_text().strip() == wheel.sha256
    assert boot.sandbox.fake_calls().count(f"mkfs.ext4 -q -L pedl-data {boot.device}") == 1  # the data stays
    assert (boot.data_dir / "agent_token").read_text() == token_text

    boot.check_config()
    with boot.master() as (url, info, _):
        assert info["pedlVersion"] == version
        login = httpx.post(f"{url}/api/v1/auth/login", json={"username": "kept-across-upgrades", "password": "pw"})
        assert login.status_code == 200, login.text
    return version, wheel
