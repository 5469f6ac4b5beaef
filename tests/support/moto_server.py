"""AWS test doubles: moto's ThreadedMotoServer on a free local port (real boto3 calls go to it over
HTTP), helpers that create an AMI, a subnet, a security group and an instance profile there, and a
fake instance metadata service (EC2 IMDSv2 and GCE) for code that asks the metadata server.

Use the fixtures by importing them into a test module or conftest (the *_fixture names keep ruff
from flagging the test parameters that use them):

    from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401

`moto_server` is one server per session; `moto_endpoint` resets its state for each test, sets
fake credentials in the environment, and yields the endpoint URL for `endpoint_url`;
`metadata_server` is a FakeMetadataServer."""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # never a real profile or the real metadata service for credentials
    "AWS_CONFIG_FILE": "/nonexistent/pedl-test-aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/pedl-test",
    "AWS_EC2_METADATA_DISABLED": "true",
}
UNSET_AWS_ENV = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")


@contextmanager
def fake_aws_env() -> Iterator[None]:
    """Fake credentials and region for boto3, restoring the environment afterwards."""
    saved = {k: os.environ.get(k) for k in (*FAKE_AWS_ENV, *UNSET_AWS_ENV)}
    os.environ.update(FAKE_AWS_ENV)
    for k in UNSET_AWS_ENV:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def running_moto_server(*, load_default_amis: bool = False) -> Iterator[str]:
    """A moto server on 127.0.0.1 and a free port; yields its URL. Without moto's thousand default
    AMIs (use make_network's), the first EC2 call after each reset takes 10 ms instead of 0.3 s."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per call otherwise
    saved = os.environ.get("MOTO_EC2_LOAD_DEFAULT_AMIS")
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "true" if load_default_amis else "false"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        if saved is None:
            os.environ.pop("MOTO_EC2_LOAD_DEFAULT_AMIS", None)
        else:
            os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = saved


def reset_moto(endpoint: str) -> None:
    """Forget every resource (all services, all regions)."""
    with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10):
        pass


@pytest.fixture(scope="session", name="moto_server")
def moto_server_fixture() -> Iterator[str]:
    with running_moto_server() as url:
        yield url


@pytest.fixture(name="moto_endpoint")
def moto_endpoint_fixture(moto_server: str) -> Iterator[str]:
    """The session's moto server, emptied, with fake AWS credentials in the environment."""
    reset_moto(moto_server)
    with fake_aws_env():
        yield moto_server


_session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


def ec2_client(endpoint: str, region: str = REGION) -> Any:
    """A plain EC2 client on the moto server, for setting up and inspecting (one shared session:
    a new one loads the EC2 service model again, a third of a second)."""
    return _session.client("ec2", endpoint_url=endpoint, region_name=region)


# an ed25519 public key whose private half was thrown away
TEST_PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICgzO8kmdGQ8JA+c5J62saBniSNw/D8wZ9xSnRcSbLRp pedl-test"


@dataclass(frozen=True)
class MotoNetwork:
    image_id: str
    vpc_id: str
    subnet_id: str
    security_group_id: str
    key_name: str


def make_network(endpoint: str, region: str = REGION, *, key_name: str = "pedl-test-key") -> MotoNetwork:
    """An AMI (root device /dev/sda1), a VPC with one subnet, a security group and a key pair."""
    ec2 = ec2_client(endpoint, region)
    image_id = ec2.register_image(
        Name="pedl-agent-test", RootDeviceName="/dev/sda1", Architecture="x86_64", VirtualizationType="hvm"
    )["ImageId"]
    vpc_id = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.77.1.0/24")["Subnet"]["SubnetId"]
    sg_id = ec2.create_security_group(GroupName="pedl-agents", Description="pedl agents", VpcId=vpc_id)["GroupId"]
    ec2.import_key_pair(KeyName=key_name, PublicKeyMaterial=TEST_PUBLIC_KEY.encode())  # create_key_pair: RSA, slow
    return MotoNetwork(image_id, vpc_id, subnet_id, sg_id, key_name)


def make_instance_profile(endpoint: str, name: str = "pedl-agent") -> str:
    """An IAM role and instance profile of that name; returns the profile's ARN (moto refuses
    RunInstances with a profile it does not know)."""
    iam = _session.client("iam", endpoint_url=endpoint, region_name=REGION)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}],
    }
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    arn = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return arn


# -- a fake instance metadata service ---------------------------------------------------------

IMDS_TOKEN = "pedl-fake-imds-token"


@dataclass
class FakeMetadataServer:
    """EC2 IMDSv2 (PUT /latest/api/token, then GET /latest/meta-data/<key> with the token header;
    401 without it, as on an instance launched with HttpTokens=required) and the GCE metadata
    server (computeMetadata/v1/..., 403 without `Metadata-Flavor: Google`). `ec2` and `gce` map
    paths to values; a missing path is 404. `requests` logs (method, path, had token/flavor)."""

    ec2: dict[str, str] = field(default_factory=dict)
    gce: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str, bool]] = field(default_factory=list)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def start(self) -> FakeMetadataServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                fake.requests.append(("PUT", self.path, False))
                if self.path != "/latest/api/token":
                    return self._send(404, "")
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(400, "missing X-aws-ec2-metadata-token-ttl-seconds")
                return self._send(200, IMDS_TOKEN)

            def do_GET(self) -> None:
                if self.path.startswith("/computeMetadata/v1/"):
                    flavored = self.headers.get("Metadata-Flavor") == "Google"
                    fake.requests.append(("GET", self.path, flavored))
                    if not flavored:
                        return self._send(403, "missing Metadata-Flavor: Google")
                    value = fake.gce.get(self.path.removeprefix("/computeMetadata/v1/"))
                    return self._send(404, "") if value is None else self._send(200, value)
                tokened = self.headers.get("X-aws-ec2-metadata-token") == IMDS_TOKEN
                fake.requests.append(("GET", self.path, tokened))
                if not tokened:
                    return self._send(401, "")
                value = fake.ec2.get(self.path.removeprefix("/latest/meta-data/"))
                return self._send(404, "") if value is None else self._send(200, value)

            def _send(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture(name="metadata_server")
def metadata_server_fixture() -> Iterator[FakeMetadataServer]:
    fake = FakeMetadataServer().start()
    yield fake
    fake.stop()
