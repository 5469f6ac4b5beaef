"""The AWS provider against moto (real boto3 calls over HTTP): what a launch carries, ownership by
tags, idempotent launches, spot requests, termination that never touches a foreign instance, error
classification, and the IAM-policy limit on the calls it makes."""

from __future__ import annotations

import base64
import socket
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber

from pedl.clock import SystemClock
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.provisioner.providers.aws import AWSProvider
from pedl.master.provisioner.providers.aws_boot import agent_user_data, resolve_region
from pedl.master.provisioner.providers.aws_errors import classify_error
from pedl.master.provisioner.providers.aws_iam import ALLOWED_OPERATIONS, UnlistedOperation
from pedl.master.provisioner.providers.aws_records import CLUSTER_TAG, POOL_TAG, TOKEN_TAG
from pedl.master.provisioner.providers.base import (
    CloudError,
    CloudErrorKind,
    CloudState,
    ForeignInstance,
    LaunchRequest,
)
from tests.support.moto_server import (  # noqa: F401 - the *_fixture names are fixtures
    FakeMetadataServer,
    MotoNetwork,
    ec2_client,
    make_instance_profile,
    make_network,
    metadata_server_fixture,
    moto_endpoint_fixture,
    moto_server_fixture,
)

# The master's permissions as seed 002 lists them ("Master IAM Role", with the spot calls).
SEED_PERMISSIONS = {
    "ec2:CreateTags",
    "ec2:DescribeInstances",
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:RequestSpotInstances",
    "ec2:CancelSpotInstanceRequests",
    "ec2:DescribeSpotInstanceRequests",
}
TAG_KEY, TAG_VALUE = "pedl-test", "agents"
MASTER_URL = "http://10.0.0.5:8080"


@pytest.fixture
def net(moto_endpoint: str) -> MotoNetwork:
    return make_network(moto_endpoint)


@pytest.fixture
def ec2(moto_endpoint: str) -> Any:
    return ec2_client(moto_endpoint)


def config(endpoint: str, net: MotoNetwork, **over: Any) -> AWSProviderConfig:
    data: dict[str, Any] = {
        "type": "aws",
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "image_id": net.image_id,
        "ssh_key_name": net.key_name,
        "tag_key": TAG_KEY,
        "tag_value": TAG_VALUE,
        "instance_name": "pedl-agent",
        "root_volume_size": 150,
        "instance_type": "p3.8xlarge",
        "startup_script": "echo booting > /tmp/boot\n",
        "network_interface": {
            "public_ip": True,
            "subnet_id": net.subnet_id,
            "security_group_id": net.security_group_id,
        },
    }
    data.update(over)
    return AWSProviderConfig.model_validate(data)


class FakeSecrets:
    """The master's single-use enrollment secrets, in memory: what was issued for which launch, and bound to what."""

    def __init__(self) -> None:
        self.issued: list[tuple[str, str]] = []  # (launch token, secret)
        self.bound: dict[str, str] = {}  # secret -> instance or spot request id

    def issue(self, launch_token: str) -> str:
        secret = f"secret-{len(self.issued)}-of-{launch_token}"
        self.issued.append((launch_token, secret))
        return secret

    def bind(self, secret: str, instance_id: str) -> None:
        self.bound[secret] = instance_id


def provider(
    endpoint: str, net: MotoNetwork, *, pool: str = "gpu", secrets: FakeSecrets | None = None, **over: Any
) -> AWSProvider:
    return AWSProvider(
        config(endpoint, net, **over),
        pool=pool,
        cluster_id="cluster-1",
        master_url=MASTER_URL,
        instance_secrets=FakeSecrets() if secrets is None else secrets,
        clock=SystemClock(),
    )


def request(
    count: int = 1, *, spot: bool = False, token: str = "tok-1", slots: int = 4, instance_type: str = "p3.8xlarge"
) -> LaunchRequest:
    return LaunchRequest(instance_type, count, spot, token, slots)


def describe(ec2: Any, ids: list[str]) -> dict[str, dict]:
    reservations = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i for r in reservations for i in r["Instances"]}


def tags_of(resource: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def user_data(ec2: Any, instance_id: str) -> str:
    value = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(value).decode()


def launch_foreign(ec2: Any, net: MotoNetwork, tags: dict[str, str]) -> str:
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
    reply = ec2.run_instances(
        ImageId=net.image_id, InstanceType="t3.medium", MinCount=1, MaxCount=1, TagSpecifications=spec
    )
    return reply["Instances"][0]["InstanceId"]


def state_of(ec2: Any, instance_id: str) -> str:
    return describe(ec2, [instance_id])[instance_id]["State"]["Name"]


# -- launch ------------------------------------------------------------------------------------


def test_launch_carries_tags_user_data_imdsv2_volume_network_profile_and_key(
    moto_endpoint: str, net: MotoNetwork, ec2: Any
) -> None:
    profile_arn = make_instance_profile(moto_endpoint)
    secrets = FakeSecrets()
    p = provider(moto_endpoint, net, iam_instance_profile_arn=profile_arn, secrets=secrets)
    before = time.time()
    created = p.launch(request(2, token="tok-launch"))
    assert len(created) == 2
    # one call, and one single-use secret, per instance: each is bound to its instance
    assert p.operations["RunInstances"] == 2
    assert [t for t, _ in secrets.issued] == ["tok-launch", "tok-launch"]
    assert sorted(secrets.bound.values()) == sorted(c.id for c in created)
    assert all(c.state == CloudState.PENDING and c.instance_type == "p3.8xlarge" and not c.spot for c in created)
    assert all(before - 5 <= c.launched_at <= time.time() + 5 for c in created)

    instances = describe(ec2, [c.id for c in created])
    # moto shows the profile as an association only (not in DescribeInstances), and keeps one
    # association per launch rather than per instance
    associations = ec2.describe_iam_instance_profile_associations()["IamInstanceProfileAssociations"]
    assert {a["IamInstanceProfile"]["Arn"] for a in associations} == {profile_arn}
    assert {a["InstanceId"] for a in associations} <= set(instances)
    for inst in instances.values():
        assert tags_of(inst) == {
            TAG_KEY: TAG_VALUE,
            "Name": "pedl-agent",
            POOL_TAG: "gpu",
            CLUSTER_TAG: "cluster-1",
            TOKEN_TAG: "tok-launch",
        }
        assert inst["InstanceType"] == "p3.8xlarge"
        assert inst["ImageId"] == net.image_id
        assert inst["KeyName"] == net.key_name
        assert inst["MetadataOptions"]["HttpTokens"] == "required"  # IMDSv2 only
        assert inst["MetadataOptions"]["HttpEndpoint"] == "enabled"
        assert inst["ClientToken"] in ("tok-launch-0", "tok-launch-1")
        (iface,) = inst["NetworkInterfaces"]
        assert iface["SubnetId"] == net.subnet_id
        assert [g["GroupId"] for g in iface["Groups"]] == [net.security_group_id]
        assert iface["Attachment"]["DeviceIndex"] == 0
        assert iface.get("Association", {}).get("PublicIp")  # public_ip: true
        (root,) = inst["BlockDeviceMappings"]
        assert root["DeviceName"] == "/dev/sda1"
        assert root["Ebs"]["DeleteOnTermination"] is True
        volume = ec2.describe_volumes(VolumeIds=[root["Ebs"]["VolumeId"]])["Volumes"][0]
        assert volume["Size"] == 150 and volume["VolumeType"] == "gp3"
        assert tags_of(volume)[TAG_KEY] == TAG_VALUE and tags_of(volume)[POOL_TAG] == "gpu"

        shutdown = ec2.describe_instance_attribute(
            InstanceId=inst["InstanceId"], Attribute="instanceInitiatedShutdownBehavior"
        )
        assert shutdown["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"

        script = user_data(ec2, inst["InstanceId"])
        assert script.startswith("#!/bin/bash\n")
        assert "set -e" in script
        encoded_startup = base64.b64encode(b"echo booting > /tmp/boot\n").decode()
        assert encoded_startup in script  # the config's startup_script, run from its own file
        assert '-X PUT "$IMDS/latest/api/token"' in script  # IMDSv2 token, then the instance id
        assert 'X-aws-ec2-metadata-token: $IMDS_TOKEN" "$IMDS/latest/meta-data/instance-id"' in script
        assert script.index(encoded_startup) < script.index('exec "$PEDL_BIN" agent run')
        last = script.strip().splitlines()[-1]
        assert last == (
            'exec "$PEDL_BIN" agent run --master "$PEDL_MASTER" --id "$INSTANCE_ID" --resource-pool gpu --slots 4'
        )
        assert f"PEDL_MASTER={MASTER_URL}" in script.splitlines()
        # the instance's own secret, in the environment (not in argv), never the cluster's agent token
        (secret,) = [s for s, i in secrets.bound.items() if i == inst["InstanceId"]]
        assert f"export PEDL_AGENT_TOKEN={secret}" in script.splitlines()
        assert "--token" not in script and "--spot-watch" not in script


def test_launch_without_network_interface_profile_or_token(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = AWSProvider(
        config(moto_endpoint, net, network_interface={}, startup_script=""),
        pool="gpu",
        cluster_id="cluster-1",
        master_url=MASTER_URL,
        instance_secrets=None,
        clock=SystemClock(),
    )
    (created,) = p.launch(request(token="tok-plain"))
    assert ec2.describe_iam_instance_profile_associations()["IamInstanceProfileAssociations"] == []
    script = user_data(ec2, created.id)
    assert "export PEDL_AGENT_TOKEN" not in script and "startup_script" not in script


def test_a_startup_script_too_long_for_user_data_is_invalid_config(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net, startup_script="echo x\n" * 3000)
    with pytest.raises(CloudError) as info:
        p.launch(request(1))
    assert info.value.kind == CloudErrorKind.INVALID_CONFIG and "startup_script" in info.value.message
    assert "RunInstances" not in p.operations


def test_user_data_quotes_values_and_watches_spot() -> None:
    script = agent_user_data(master_url="http://m:8080", pool="a b", slots=0, spot=True, enrollment_secret="it's")
    last = script.strip().splitlines()[-1]
    assert last == (
        'exec "$PEDL_BIN" agent run --master "$PEDL_MASTER" --id "$INSTANCE_ID" --resource-pool \'a b\' --spot-watch'
    )
    assert "PEDL_MASTER=http://m:8080" in script.splitlines()
    assert "export PEDL_AGENT_TOKEN='it'\"'\"'s'" in script


def test_launch_is_idempotent_by_token(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net)
    first = p.launch(request(2, token="tok-same"))
    again = p.launch(request(2, token="tok-same"))
    assert [c.id for c in again] == [c.id for c in first]
    assert p.operations["RunInstances"] == 2  # one per instance, none again

    # a restarted master has no memory of the token: the launch-token tag finds the instances
    restarted = provider(moto_endpoint, net)
    described = p.operations["DescribeInstances"]
    after_restart = restarted.launch(request(2, token="tok-same"))
    assert sorted(c.id for c in after_restart) == sorted(c.id for c in first)
    assert restarted.operations == {"DescribeInstances": 1}
    assert p.operations["DescribeInstances"] == described  # each provider counts its own calls
    assert len(p.list_instances()) == 2

    other = p.launch(request(1, token="tok-other"))
    assert other[0].id not in {c.id for c in first}
    assert len(p.list_instances()) == 3


# -- list --------------------------------------------------------------------------------------


def test_lists_only_its_own_pool_and_tag_pair(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net)
    ours = {c.id for c in p.launch(request(2))}
    other_pool = provider(moto_endpoint, net, pool="cpu")
    theirs = {c.id for c in other_pool.launch(request(1, token="tok-cpu"))}
    untagged = launch_foreign(ec2, net, {})
    other_value = launch_foreign(ec2, net, {TAG_KEY: "someone-else", POOL_TAG: "gpu"})
    pair_only = launch_foreign(ec2, net, {TAG_KEY: TAG_VALUE})  # no pool tag: not this pool's

    listed = p.list_instances()
    assert {c.id for c in listed} == ours
    assert all(c.state == CloudState.RUNNING and c.address for c in listed)
    assert {c.id for c in other_pool.list_instances()} == theirs
    assert not {untagged, other_value, pair_only} & {c.id for c in listed}


def test_list_maps_states_and_records_launch_time(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net)
    a, b, c = (x.id for x in p.launch(request(3)))
    launch_times = {i: inst["LaunchTime"].timestamp() for i, inst in describe(ec2, [a, b, c]).items()}
    ec2.stop_instances(InstanceIds=[b])
    ec2.terminate_instances(InstanceIds=[c])
    listed = {x.id: x for x in p.list_instances()}
    assert listed[a].state == CloudState.RUNNING
    assert listed[b].state == CloudState.TERMINATING  # stopping/stopped: on its way out
    assert c not in listed  # terminated: not reported at all
    assert listed[a].launched_at == launch_times[a]


def test_many_instances_are_paginated(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net)
    created = {c.id for c in p.launch(request(30, token="tok-many"))}
    assert {c.id for c in p.list_instances()} == created


# -- terminate ---------------------------------------------------------------------------------


def test_terminate_ends_its_instances(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net)
    a, b = (c.id for c in p.launch(request(2)))
    p.terminate([a])
    assert state_of(ec2, a) in ("shutting-down", "terminated")
    assert state_of(ec2, b) == "running"
    assert {c.id for c in p.list_instances()} == {b}


@pytest.mark.parametrize(
    "foreign_tags",
    [{}, {TAG_KEY: "someone-else", POOL_TAG: "gpu"}, {TAG_KEY: TAG_VALUE, POOL_TAG: "cpu"}, {TAG_KEY: TAG_VALUE}],
)
def test_a_foreign_instance_is_never_terminated(
    moto_endpoint: str, net: MotoNetwork, ec2: Any, foreign_tags: dict[str, str]
) -> None:
    p = provider(moto_endpoint, net)
    (ours,) = (c.id for c in p.launch(request(1)))
    foreign = launch_foreign(ec2, net, foreign_tags)
    with pytest.raises(ForeignInstance, match=foreign):
        p.terminate([ours, foreign])
    # nothing at all was terminated, not even the id that was ours
    assert state_of(ec2, foreign) == "running"
    assert state_of(ec2, ours) == "running"
    assert p.operations["TerminateInstances"] == 0


def test_terminating_what_is_already_gone_is_success(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net)
    (a,) = (c.id for c in p.launch(request(1)))
    p.terminate([a])
    p.terminate([a])  # already terminated
    p.terminate(["i-0123456789abcdef0", "sir-0123456789abcdef"])  # never existed
    p.terminate([])
    assert state_of(ec2, a) == "terminated"


def test_terminate_tolerates_an_instance_vanishing_mid_batch(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net)
    a, b = (c.id for c in p.launch(request(2)))
    # EC2 fails a whole batch for one unknown id; the provider then goes one by one
    stub_error = ClientError({"Error": {"Code": "InvalidInstanceID.NotFound", "Message": "gone"}}, "TerminateInstances")
    real = p.client.terminate_instances
    calls: list[list[str]] = []

    def terminate_instances(**kw: Any) -> Any:
        calls.append(kw["InstanceIds"])
        if len(kw["InstanceIds"]) > 1:
            raise stub_error
        return real(**kw)

    p.client.terminate_instances = terminate_instances  # type: ignore[method-assign]
    p.terminate([a, b])
    assert calls == [sorted([a, b]), *([i] for i in sorted([a, b]))]
    assert p.list_instances() == []


# -- spot --------------------------------------------------------------------------------------


def test_spot_request_fulfilled_at_once_is_tagged_and_followed(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    secrets = FakeSecrets()
    p = provider(moto_endpoint, net, spot=True, secrets=secrets)
    created = p.launch(request(2, spot=True, token="tok-spot"))
    assert len(created) == 2
    # a request, and a single-use secret, per instance; bound to the instance that fulfilled it
    assert p.operations["RequestSpotInstances"] == 2
    assert sorted(secrets.bound.values()) == sorted(c.id for c in created)
    assert {p.spot_request_instance(c.spot_request_id or "") for c in created} == {c.id for c in created}
    assert all(c.spot and c.spot_request_id and c.spot_request_id.startswith("sir-") for c in created)
    assert all(c.id.startswith("i-") and c.state in (CloudState.PENDING, CloudState.RUNNING) for c in created)

    requests = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[c.spot_request_id for c in created])[
        "SpotInstanceRequests"
    ]
    for req in requests:
        assert req["Type"] == "one-time"
        assert float(req["SpotPrice"]) == pytest.approx(12.24)  # the on-demand price of p3.8xlarge
        assert tags_of(req)[TAG_KEY] == TAG_VALUE and tags_of(req)[POOL_TAG] == "gpu"
        assert req["LaunchSpecification"]["InstanceType"] == "p3.8xlarge"
    for inst in describe(ec2, [c.id for c in created]).values():
        # EC2 puts the request's tags on the request only; the provider tags the instance itself
        assert tags_of(inst)[TAG_KEY] == TAG_VALUE and tags_of(inst)[POOL_TAG] == "gpu"
        assert tags_of(inst)[TOKEN_TAG] == "tok-spot"
        assert inst["InstanceLifecycle"] == "spot"
        script = user_data(ec2, inst["InstanceId"])
        assert script.strip().splitlines()[-1].endswith("--spot-watch")

    listed = {c.id: c for c in p.list_instances()}
    assert set(listed) == {c.id for c in created}
    for c in created:
        assert listed[c.id].spot and listed[c.id].spot_request_id == c.spot_request_id


def test_spot_max_price_is_used_when_set(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net, spot=True, spot_max_price="3.5")
    (created,) = p.launch(request(1, spot=True))
    (req,) = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[created.spot_request_id])[
        "SpotInstanceRequests"
    ]
    assert float(req["SpotPrice"]) == 3.5


def test_an_untagged_instance_of_our_spot_request_is_tagged_by_list(
    moto_endpoint: str, net: MotoNetwork, ec2: Any
) -> None:
    # as if the master died between the fulfilment and CreateTags
    req = ec2.request_spot_instances(
        InstanceCount=1,
        LaunchSpecification={"ImageId": net.image_id, "InstanceType": "p3.8xlarge"},
        TagSpecifications=[
            {
                "ResourceType": "spot-instances-request",
                "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}, {"Key": POOL_TAG, "Value": "gpu"}],
            }
        ],
    )["SpotInstanceRequests"][0]
    inst_id = req["InstanceId"]
    assert tags_of(describe(ec2, [inst_id])[inst_id]) == {}

    p = provider(moto_endpoint, net, spot=True)
    (listed,) = p.list_instances()
    assert listed.id == inst_id and listed.spot_request_id == req["SpotInstanceRequestId"] and listed.spot
    assert tags_of(describe(ec2, [inst_id])[inst_id])[TAG_KEY] == TAG_VALUE
    assert p.operations["CreateTags"] == 1
    p.list_instances()
    assert p.operations["CreateTags"] == 1  # tagged once


def test_a_spot_request_of_another_pool_is_not_listed(moto_endpoint: str, net: MotoNetwork) -> None:
    provider(moto_endpoint, net, pool="cpu", spot=True).launch(request(1, spot=True))
    assert provider(moto_endpoint, net, spot=True).list_instances() == []


def test_cancelling_a_spot_request_ends_its_instance(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net, spot=True)
    (created,) = p.launch(request(1, spot=True))
    p.terminate([created.spot_request_id])
    assert p.operations["CancelSpotInstanceRequests"] == 1
    # moto drops a cancelled request (EC2 keeps it as "cancelled"); neither is open/active
    open_or_active = ec2.describe_spot_instance_requests(Filters=[{"Name": "state", "Values": ["open", "active"]}])[
        "SpotInstanceRequests"
    ]
    assert open_or_active == []
    assert state_of(ec2, created.id) in ("shutting-down", "terminated")
    assert p.list_instances() == []
    p.terminate([created.spot_request_id])  # gone: success


def test_a_foreign_spot_request_is_never_cancelled(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    req = ec2.request_spot_instances(
        InstanceCount=1,
        LaunchSpecification={"ImageId": net.image_id, "InstanceType": "p3.8xlarge"},
        TagSpecifications=[
            {
                "ResourceType": "spot-instances-request",
                "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}, {"Key": POOL_TAG, "Value": "cpu"}],
            }
        ],
    )["SpotInstanceRequests"][0]
    p = provider(moto_endpoint, net, spot=True)
    with pytest.raises(ForeignInstance):
        p.terminate([req["SpotInstanceRequestId"]])
    with pytest.raises(ForeignInstance):
        p.terminate([req["InstanceId"]])
    assert p.operations["CancelSpotInstanceRequests"] == 0
    assert state_of(ec2, req["InstanceId"]) == "running"


def test_the_untagged_instance_of_our_spot_request_may_be_terminated(
    moto_endpoint: str, net: MotoNetwork, ec2: Any
) -> None:
    req = ec2.request_spot_instances(
        InstanceCount=1,
        LaunchSpecification={"ImageId": net.image_id, "InstanceType": "p3.8xlarge"},
        TagSpecifications=[
            {
                "ResourceType": "spot-instances-request",
                "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}, {"Key": POOL_TAG, "Value": "gpu"}],
            }
        ],
    )["SpotInstanceRequests"][0]
    provider(moto_endpoint, net, spot=True).terminate([req["InstanceId"]])
    assert state_of(ec2, req["InstanceId"]) in ("shutting-down", "terminated")


def _stubbed(p: AWSProvider) -> Stubber:
    stubber = Stubber(p.client)
    stubber.activate()
    return stubber


OPEN_REQUEST = {
    "SpotInstanceRequestId": "sir-open1234",
    "State": "open",
    "Status": {"Code": "capacity-not-available"},
    "LaunchSpecification": {"InstanceType": "p3.8xlarge"},
    "Tags": [{"Key": TAG_KEY, "Value": TAG_VALUE}, {"Key": POOL_TAG, "Value": "gpu"}],
}


def test_an_open_spot_request_is_a_requested_pseudo_instance(moto_endpoint: str, net: MotoNetwork) -> None:
    # moto fulfils every request at once, so an open one is stubbed
    p = provider(moto_endpoint, net, spot=True)
    stubber = _stubbed(p)
    stubber.add_response("describe_spot_instance_requests", {"SpotInstanceRequests": []})  # token lookup
    stubber.add_response("request_spot_instances", {"SpotInstanceRequests": [OPEN_REQUEST]})
    stubber.add_response("describe_instances", {"Reservations": []})
    stubber.add_response("describe_spot_instance_requests", {"SpotInstanceRequests": [OPEN_REQUEST]})
    before = time.time()
    (created,) = p.launch(request(1, spot=True, token="tok-open"))
    (listed,) = p.list_instances()
    stubber.assert_no_pending_responses()
    for c in (created, listed):
        assert c.id == "sir-open1234" and c.state == CloudState.REQUESTED and c.spot
        assert c.instance_type == "p3.8xlarge" and c.launched_at >= before - 1


def test_a_request_fulfilled_while_being_cancelled_loses_its_instance_too(moto_endpoint: str, net: MotoNetwork) -> None:
    # open when looked at, fulfilled by the time it is cancelled: EC2 leaves that instance running
    # under a cancelled request that no listing shows, so terminate ends it
    p = provider(moto_endpoint, net, spot=True)
    stubber = _stubbed(p)
    stubber.add_response("describe_spot_instance_requests", {"SpotInstanceRequests": [OPEN_REQUEST]})
    stubber.add_response(
        "cancel_spot_instance_requests",
        {"CancelledSpotInstanceRequests": [{"SpotInstanceRequestId": "sir-open1234", "State": "cancelled"}]},
        expected_params={"SpotInstanceRequestIds": ["sir-open1234"]},
    )
    stubber.add_response(
        "describe_spot_instance_requests",
        {"SpotInstanceRequests": [{**OPEN_REQUEST, "State": "cancelled", "InstanceId": "i-0late0000000000001"}]},
    )
    stubber.add_response(
        "describe_instances",
        {
            "Reservations": [
                {"Instances": [{"InstanceId": "i-0late0000000000001", "State": {"Name": "pending", "Code": 0}}]}
            ]
        },
    )
    stubber.add_response(
        "terminate_instances", {"TerminatingInstances": []}, expected_params={"InstanceIds": ["i-0late0000000000001"]}
    )
    p.terminate(["sir-open1234"])
    stubber.assert_no_pending_responses()


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("InsufficientInstanceCapacity", 500, CloudErrorKind.CAPACITY),
        ("InsufficientCapacity", 400, CloudErrorKind.CAPACITY),
        ("SpotMaxPriceTooLow", 400, CloudErrorKind.CAPACITY),
        ("Unsupported", 400, CloudErrorKind.CAPACITY),
        ("InstanceLimitExceeded", 400, CloudErrorKind.QUOTA),
        ("VcpuLimitExceeded", 400, CloudErrorKind.QUOTA),
        ("MaxSpotInstanceCountExceeded", 400, CloudErrorKind.QUOTA),
        ("RequestLimitExceeded", 503, CloudErrorKind.THROTTLED),
        ("Throttling", 400, CloudErrorKind.THROTTLED),
        ("InvalidAMIID.NotFound", 400, CloudErrorKind.INVALID_CONFIG),
        ("InvalidAMIID.Malformed", 400, CloudErrorKind.INVALID_CONFIG),
        ("InvalidSubnetID.NotFound", 400, CloudErrorKind.INVALID_CONFIG),
        ("InvalidGroup.NotFound", 400, CloudErrorKind.INVALID_CONFIG),
        ("InvalidKeyPair.NotFound", 400, CloudErrorKind.INVALID_CONFIG),
        ("InvalidParameterValue", 400, CloudErrorKind.INVALID_CONFIG),
        ("UnauthorizedOperation", 403, CloudErrorKind.INVALID_CONFIG),
        ("InternalError", 500, CloudErrorKind.UNAVAILABLE),
        ("SomethingNew", 503, CloudErrorKind.UNAVAILABLE),
        ("SomethingNew", 400, CloudErrorKind.UNKNOWN),
    ],
)
def test_launch_errors_are_classified(
    moto_endpoint: str, net: MotoNetwork, code: str, status: int, kind: CloudErrorKind
) -> None:
    p = provider(moto_endpoint, net)
    stubber = _stubbed(p)
    stubber.add_response("describe_instances", {"Reservations": []})  # the token lookup
    stubber.add_client_error(
        "run_instances", service_error_code=code, service_message=f"{code} happened", http_status_code=status
    )
    with pytest.raises(CloudError) as info:
        p.launch(request(1))
    err = info.value
    assert (err.kind, err.code) == (kind, code)
    assert "RunInstances" in err.message and f"{code} happened" in err.message
    assert err.details["operation"] == "RunInstances"


def test_real_moto_errors_are_classified(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net, network_interface={"subnet_id": "subnet-0123456789abcdef0"})
    with pytest.raises(CloudError) as info:
        p.launch(request(1))
    assert info.value.kind == CloudErrorKind.INVALID_CONFIG and info.value.code == "InvalidSubnetID.NotFound"
    p = provider(moto_endpoint, net, iam_instance_profile_arn="arn:aws:iam::123456789012:instance-profile/none")
    with pytest.raises(CloudError) as info:
        p.launch(request(1))
    assert info.value.kind == CloudErrorKind.INVALID_CONFIG


def test_transport_errors_are_unavailable() -> None:
    err = classify_error(EndpointConnectionError(endpoint_url="http://x"), "DescribeInstances")
    assert err.kind == CloudErrorKind.UNAVAILABLE and "DescribeInstances" in err.message
    err = classify_error(ReadTimeoutError(endpoint_url="http://x"), "RunInstances")
    assert err.kind == CloudErrorKind.UNAVAILABLE


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_endpoint_is_unavailable_after_one_retry(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(f"http://127.0.0.1:{_closed_port()}", net)
    started = time.monotonic()
    with pytest.raises(CloudError) as info:
        p.list_instances()
    assert info.value.kind == CloudErrorKind.UNAVAILABLE
    assert p.attempts["DescribeInstances"] <= 2  # botocore retries once at most: the provisioner backs off
    assert time.monotonic() - started < 15
    with pytest.raises(CloudError) as info:
        p.launch(request(1))
    assert info.value.kind == CloudErrorKind.UNAVAILABLE


# -- region and the IAM policy -----------------------------------------------------------------


def test_region_comes_from_config_env_then_metadata(
    metadata_server: FakeMetadataServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PEDL_IMDS_URL", metadata_server.url)
    metadata_server.ec2["placement/region"] = "eu-west-1"
    assert resolve_region("ap-south-1") == "ap-south-1"
    assert resolve_region(None) == "eu-west-1"
    assert ("GET", "/latest/meta-data/placement/region", True) in metadata_server.requests
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert resolve_region(None) == "us-west-2"


def test_region_defaults_to_us_east_1_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PEDL_IMDS_URL", f"http://127.0.0.1:{_closed_port()}")
    assert resolve_region(None) == "us-east-1"
    assert "us-east-1" in caplog.text


def test_only_the_seeds_iam_permissions_are_used(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    from pedl.cli.deploy import iam_policy

    p = provider(moto_endpoint, net, spot=True)
    on_demand = p.launch(request(2, token="tok-a"))
    spot = p.launch(request(1, spot=True, token="tok-b"))
    ec2.create_tags(Resources=[spot[0].id], Tags=[{"Key": TAG_KEY, "Value": "x"}])  # force a re-tag
    p.list_instances()
    p.terminate([on_demand[0].id, spot[0].spot_request_id])
    p.terminate([on_demand[1].id, "i-0123456789abcdef0"])
    p.list_instances()
    used = {f"ec2:{op}" for op in p.operations}
    assert used <= SEED_PERMISSIONS
    assert {
        "ec2:RunInstances",
        "ec2:RequestSpotInstances",
        "ec2:DescribeInstances",
        "ec2:TerminateInstances",
        "ec2:CreateTags",
        "ec2:DescribeSpotInstanceRequests",
        "ec2:CancelSpotInstanceRequests",
    } == used
    assert {f"ec2:{op}" for op in ALLOWED_OPERATIONS} == SEED_PERMISSIONS
    assert set(iam_policy(spot=True)["Statement"][0]["Action"]) == SEED_PERMISSIONS


def test_a_call_outside_the_policy_is_refused(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net)
    with pytest.raises(UnlistedOperation, match="DescribeImages"):
        p.client.describe_images(ImageIds=[net.image_id])


def test_without_spot_no_spot_call_is_made(moto_endpoint: str, net: MotoNetwork) -> None:
    p = provider(moto_endpoint, net)
    p.launch(request(1))
    p.list_instances()
    p.terminate([c.id for c in p.list_instances()])
    assert set(p.operations) <= {"RunInstances", "DescribeInstances", "TerminateInstances", "CreateTags"}


def test_close_keeps_instances(moto_endpoint: str, net: MotoNetwork, ec2: Any) -> None:
    p = provider(moto_endpoint, net)
    (a,) = (c.id for c in p.launch(request(1)))
    p.close()
    assert state_of(ec2, a) == "running"


def test_user_data_installs_the_masters_version_unless_the_image_has_it() -> None:
    script = agent_user_data(master_url="http://m:8080/", pool="p", slots=1, spot=False, version="9.8.7")
    lines = script.splitlines()
    assert "PEDL_VERSION=9.8.7" in lines and "PEDL_MASTER=http://m:8080" in lines
    assert '"$PEDL_MASTER/api/v1/pedl/package"' in script and "X-Pedl-Agent-Token" in script
    assert 'if [ "$installed" != "$PEDL_VERSION" ]; then' in lines
    assert len(script.encode()) < 16 * 1024 // 4  # leaves room for a startup_script in EC2's 16 KiB


def test_user_data_hands_an_https_masters_ca_to_the_agent_and_the_download() -> None:
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    script = agent_user_data(master_url="https://m:8443", pool="p", slots=1, spot=False, master_ca=ca)
    encoded = base64.b64encode(ca.encode()).decode()
    lines = script.splitlines()
    assert f'echo {encoded} | base64 --decode > "$PEDL_HOME/master-ca.pem"' in lines
    assert 'export PEDL_MASTER_CERT="$PEDL_HOME/master-ca.pem"' in lines  # the agent and its tasks read it
    assert '${PEDL_MASTER_CERT:+--cacert "$PEDL_MASTER_CERT"}' in script  # the wheel's download verifies too
    assert "export PEDL_MASTER_CERT" not in agent_user_data(master_url="http://m:8080", pool="p", slots=1, spot=False)
