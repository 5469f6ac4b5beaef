"""The AWS e2e harness: a master (SQLite) whose default pool's provider is `aws`, talking to moto
through an EC2 fault proxy, and a cloud twin that starts a real `pedl agent run` for each tagged
instance running in moto (what the startup script does) and kills it when the instance goes.

Test modules import the fixtures (the *_fixture names keep ruff from flagging the parameters):

    from tests.e2e.aws_cluster import cloud_fixture, moto_url_fixture  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.common.ports import free_port
from pedl.devcluster import Master, wait_experiment, wait_for
from tests.e2e.conftest import Cluster
from tests.support.cloud_twin import CloudTwin
from tests.support.ec2_fault_proxy import EC2FaultProxy
from tests.support.moto_server import (
    REGION,
    MotoNetwork,
    ec2_client,
    fake_aws_env,
    make_network,
    reset_moto,
    running_moto_server,
)

TAG_KEY, TAG_VALUE = "pedl-e2e", "agents"
POOL_TAG = "pedl-resource-pool"
INSTANCE_NAME = "pedl-e2e-agent"
INSTANCE_TYPE = "g4dn.xlarge"  # 1 GPU: 1 slot
BACKOFF, BACKOFF_MAX = 0.5, 4.0
IDLE = 3.0
DONE = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


class AWSCluster(Cluster):
    """A master whose default pool launches EC2 instances in moto (through the fault proxy), and
    the cloud twin that turns every running tagged instance into a real agent."""

    def __init__(
        self,
        work: Path,
        moto_url: str,
        net: MotoNetwork,
        proxy: EC2FaultProxy,
        *,
        provider: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        port = free_port()  # the agents' master URL is in the pool's config: the port is chosen first
        url = f"http://127.0.0.1:{port}"
        pool_provider = {
            "type": "aws",
            "region": REGION,
            "endpoint_url": proxy.url,
            "image_id": net.image_id,
            "ssh_key_name": net.key_name,
            "tag_key": TAG_KEY,
            "tag_value": TAG_VALUE,
            "instance_name": INSTANCE_NAME,
            "master_url": url,
            "instance_type": INSTANCE_TYPE,
            "max_instances": 2,
            "max_idle_agent_period": f"{IDLE:g}s",
            "launch_error_backoff": f"{BACKOFF:g}s",
            "launch_error_backoff_max": f"{BACKOFF_MAX:g}s",
            "network_interface": {
                "public_ip": False,
                "subnet_id": net.subnet_id,
                "security_group_id": net.security_group_id,
            },
            **(provider or {}),
        }
        cfg = {
            "agent_reconnect_wait": "4s",
            "resource_pools": [{"pool_name": "default", "provider": pool_provider}],
            **(config or {}),
        }
        super().__init__(work, None, cfg)
        written = yaml.safe_load(self.master.config_path.read_text())
        written.pop("port")
        self.master = Master(work, written, port=port)
        self.proxy, self.net = proxy, net
        self.ec2 = ec2_client(moto_url)
        self.twin = CloudTwin(moto_url, url, work, tag_key=TAG_KEY, tag_value=TAG_VALUE)

    def start(self) -> AWSCluster:
        super().start()
        self.twin.agent_token = self.master.agent_token  # created by the master on its first start
        self.twin.start()
        return self

    def stop(self) -> None:
        self.twin.stop()
        super().stop()

    # -- views --
    def instances(self, all_: bool = True) -> list[dict]:
        return self.master.api("GET", "/api/v1/instances", all="true" if all_ else "false")["instances"]

    def live(self) -> list[dict]:
        return [i for i in self.instances() if i["state"] in ("REQUESTED", "STARTING", "RUNNING")]

    def pool(self) -> dict:
        return self.master.api("GET", "/api/v1/resource-pools/default")["resourcePool"]

    def events(self, exp_id: int) -> list[str]:
        return [e["message"] for e in self.master.api("GET", f"/api/v1/experiments/{exp_id}/events")["events"]]

    def moto_instance(self, inst_id: str) -> dict:
        return self.ec2.describe_instances(InstanceIds=[inst_id])["Reservations"][0]["Instances"][0]

    def moto_state(self, inst_id: str) -> str:
        return self.moto_instance(inst_id)["State"]["Name"]

    def moto_tags(self, inst_id: str) -> dict[str, str]:
        return {t["Key"]: t["Value"] for t in self.moto_instance(inst_id).get("Tags") or []}

    def running_trial(self, exp_id: int, min_step: int) -> dict:
        def ready() -> dict | None:
            trials = self.trials(exp_id)
            if trials and trials[0]["state"] == "STATE_RUNNING" and f"step {min_step} " in self.logs(trials[0]["id"]):
                return trials[0]
            return None

        return wait_for(ready, 90, what=f"the trial to reach step {min_step}")

    def wait_done(self, exp_id: int, timeout: float = 120) -> dict:
        return wait_experiment(self.master, exp_id, DONE, timeout=timeout)

    def explain(self) -> str:
        """What a failed assertion should show: the proxy's calls, the twin's view, the master's log."""
        calls = ", ".join(
            f"{c.action}{'!' + c.error if c.error else ''}"
            for c in self.proxy.calls()
            if c.action not in ("DescribeInstances", "DescribeSpotInstanceRequests")
        )
        machines = {
            i: (m.instance_type, m.spot, m.skipped, m.gone_at is not None) for i, m in self.twin.machines.items()
        }
        return (
            f"calls: {calls}\ntwin: {machines} errors: {self.twin.errors[-3:]}\n"
            f"master log:\n{self.master.log_text()[-3000:]}"
        )


@pytest.fixture(scope="module", name="moto_url")
def moto_url_fixture() -> Iterator[str]:
    """One moto server for the module, with fake AWS credentials in the environment (the master
    process inherits them)."""
    with fake_aws_env(), running_moto_server() as url:
        yield url


@pytest.fixture(name="cloud")
def cloud_fixture(moto_url: str, tmp_path: Path) -> Iterator[Callable[..., AWSCluster]]:
    """`cloud(provider={...}, config={...})`: a started AWSCluster on an emptied moto."""
    reset_moto(moto_url)
    net = make_network(moto_url)
    proxy = EC2FaultProxy(moto_url).start()
    started: list[AWSCluster] = []

    def make(provider: dict[str, Any] | None = None, config: dict[str, Any] | None = None) -> AWSCluster:
        c = AWSCluster(tmp_path, moto_url, net, proxy, provider=provider, config=config)
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.stop()
    proxy.stop()
