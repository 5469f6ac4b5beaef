"""The master's user data fetches pedl's wheel from the cluster's bucket: its Python step, run for real
against moto's S3 (boto3 finds the endpoint in AWS_ENDPOINT_URL), waits for a wheel not uploaded yet,
checks its sha256 and gives up with a clear line after its bounded wait. The upload side puts the wheel
once, and again only when its sha256 differs."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from pedl.common.package import Wheel
from pedl.deploy.aws_session import AwsSession
from pedl.deploy.master_user_data import WHEEL_PREFIX, master_user_data
from pedl.deploy.options import DeployOptions
from pedl.deploy.waiting import Progress
from pedl.deploy.wheel_upload import upload_wheel
from tests.deploy.moto_cluster import client
from tests.support.moto_server import REGION, moto_endpoint_fixture, moto_server_fixture  # noqa: F401

KEY = f"{WHEEL_PREFIX}pedl-9.9.9-py3-none-any.whl"
DATA = b"PK not really a wheel"
SHA = hashlib.sha256(DATA).hexdigest()


def fetch_step() -> str:
    script = master_user_data(DeployOptions(cluster_id="demo", keypair="k"), wheel_sha256=SHA)
    m = re.search(r"<<'PEDL_FETCH_WHEEL'\n(.*?)^PEDL_FETCH_WHEEL$", script, re.S | re.M)
    assert m
    return m.group(1)


def run_fetch(endpoint: str, bucket: str, dest: Path, wait: float, sha: str = SHA) -> subprocess.CompletedProcess:
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint}
    return subprocess.run(
        [sys.executable, "-", bucket, KEY, sha, str(dest), REGION, str(wait), "0.2"],
        input=fetch_step(),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_it_waits_for_the_upload_then_installs_what_up_uploaded(moto_endpoint: str, tmp_path: Path) -> None:
    s3 = client(moto_endpoint, "s3")
    s3.create_bucket(Bucket="pedl-demo-bucket")
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_endpoint, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-", "pedl-demo-bucket", KEY, SHA, str(tmp_path / "pedl.whl"), REGION, "30", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(fetch_step())
    proc.stdin.close()
    try:
        first = proc.stdout.readline()  # uploaded only once it has looked and found nothing
        s3.put_object(Bucket="pedl-demo-bucket", Key=KEY, Body=DATA)
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait(60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert (tmp_path / "pedl.whl").read_bytes() == DATA
    assert first.startswith(f"pedl boot: waiting for s3://pedl-demo-bucket/{KEY}, which `pedl deploy aws up` uploads")
    assert f"pedl boot: fetched s3://pedl-demo-bucket/{KEY} (sha256 {SHA})" in rest


def test_another_wheel_is_never_installed_and_the_wait_is_bounded(moto_endpoint: str, tmp_path: Path) -> None:
    s3 = client(moto_endpoint, "s3")
    s3.create_bucket(Bucket="pedl-demo-bucket")
    s3.put_object(Bucket="pedl-demo-bucket", Key=KEY, Body=b"an older build")
    started = time.monotonic()
    done = run_fetch(moto_endpoint, "pedl-demo-bucket", tmp_path / "pedl.whl", wait=1)
    assert done.returncode == 1 and time.monotonic() - started < 30
    assert f"gave up waiting for s3://pedl-demo-bucket/{KEY} after 1 s" in done.stderr
    assert f"not {SHA}" in done.stderr and "run `pedl deploy aws up` again" in done.stderr
    assert not (tmp_path / "pedl.whl").exists()


def test_a_missing_bucket_is_waited_for_then_named(moto_endpoint: str, tmp_path: Path) -> None:
    done = run_fetch(moto_endpoint, "no-such-bucket", tmp_path / "pedl.whl", wait=0.5)
    assert done.returncode == 1 and "NoSuchBucket" in done.stderr


def test_up_uploads_the_wheel_once_and_again_when_it_changes(moto_endpoint: str) -> None:
    s3 = client(moto_endpoint, "s3")
    s3.create_bucket(Bucket="pedl-demo-bucket")
    aws, lines = AwsSession(REGION, moto_endpoint), []
    first = Wheel("pedl-9.9.9-py3-none-any.whl", DATA, SHA)
    assert upload_wheel(aws, "pedl-demo-bucket", first, Progress(step=lines.append)) == f"s3://pedl-demo-bucket/{KEY}"
    upload_wheel(aws, "pedl-demo-bucket", first, Progress(step=lines.append))
    rebuilt = Wheel(first.filename, b"PK another build", hashlib.sha256(b"PK another build").hexdigest())
    upload_wheel(aws, "pedl-demo-bucket", rebuilt, Progress(step=lines.append))
    assert [line.split()[0] for line in lines] == ["uploaded", f"s3://pedl-demo-bucket/{KEY}", "uploaded"]
    assert s3.get_object(Bucket="pedl-demo-bucket", Key=KEY)["Body"].read() == b"PK another build"
