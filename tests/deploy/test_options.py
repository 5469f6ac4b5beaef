"""DeployOptions: defaults, the names derived from the cluster id, and bad options refused with an error
that names the option."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pedl.deploy.options import DeployOptionError, DeployOptions, stack_name, tag_pair
from pedl.version import __version__

BASE: dict[str, Any] = {"cluster_id": "demo", "keypair": "my-key"}


def test_defaults() -> None:
    o = DeployOptions(**BASE)
    assert o.master_instance_type == "t3.medium"
    assert o.agent_instance_types == ("g5.xlarge",)
    assert o.max_instances == 5 and not o.spot and o.db == "embedded" and not o.tls and not o.elastic_ip
    assert o.inbound_cidr == "0.0.0.0/0"
    assert o.pedl_version == __version__ and o.package_spec == f"pedl=={__version__}"
    assert o.port == 8080 and o.scheme == "http" and o.creates_network


def test_tls_moves_the_master_to_8443() -> None:
    o = DeployOptions(**BASE, tls=True)
    assert (o.port, o.scheme) == (8443, "https")


def test_names_derived_from_the_cluster_id() -> None:
    assert stack_name("demo") == "pedl-demo" == DeployOptions(**BASE).stack_name
    assert tag_pair("demo") == ("pedl-cluster", "demo") == DeployOptions(**BASE).tag_pair


def test_lists_become_tuples_and_options_stay_frozen() -> None:
    o = DeployOptions(**BASE, agent_instance_types=["g5.xlarge", "g6.xlarge"])  # type: ignore[arg-type]
    assert o.agent_instance_types == ("g5.xlarge", "g6.xlarge")
    hash(o)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.spot = True  # type: ignore[misc]


def test_package_override() -> None:
    assert (
        DeployOptions(**BASE, package="/tmp/pedl-0.1.0-py3-none-any.whl").package_spec
        == "/tmp/pedl-0.1.0-py3-none-any.whl"
    )


@pytest.mark.parametrize(
    ("change", "option", "words"),
    [
        ({"cluster_id": "Demo"}, "cluster-id", "lower-case"),
        ({"cluster_id": "1demo"}, "cluster-id", "starting with a letter"),
        ({"cluster_id": "de--mo"}, "cluster-id", "single hyphens"),
        ({"cluster_id": "demo-"}, "cluster-id", "not ending with a hyphen"),
        ({"cluster_id": "a" * 33}, "cluster-id", "1-32 characters"),
        ({"cluster_id": "de_mo"}, "cluster-id", "cannot name"),
        ({"keypair": ""}, "keypair", "key pair name"),
        ({"keypair": "kéy"}, "keypair", "printable ASCII"),
        ({"keypair": "a${X}"}, "keypair", "without $"),
        ({"region": "mars-1"}, "region", "AWS region"),
        ({"master_instance_type": "big"}, "master-instance-type", "instance type"),
        ({"agent_instance_types": ()}, "agent-instance-type", "at least one"),
        ({"agent_instance_types": ("t3.medium",)}, "agent-instance-type", "has no GPUs"),
        ({"agent_instance_types": ("g99.huge",)}, "agent-instance-type", "not a GPU instance type"),
        ({"agent_instance_types": ("g5.xlarge", "g5.xlarge")}, "agent-instance-type", "twice"),
        ({"max_instances": 0}, "max-instances", "from 1"),
        ({"max_instances": -3}, "max-instances", "from 1"),
        ({"max_instances": 10_000}, "max-instances", "to 1000"),
        ({"max_instances": True}, "max-instances", "number of agent instances"),
        ({"agent_ami": "ubuntu"}, "agent-ami", "AMI id"),
        ({"db": "mysql"}, "db", "embedded, rds"),
        ({"inbound_cidr": "10.0.0.0/33"}, "inbound-cidr", "not a CIDR block"),
        ({"inbound_cidr": "everyone"}, "inbound-cidr", "not a CIDR block"),
        ({"inbound_cidr": "10.0.0.1/24"}, "inbound-cidr", "did you mean 10.0.0.0/24"),
        ({"inbound_cidr": "::/0"}, "inbound-cidr", "IPv6"),
        ({"vpc_id": "vpc-12345678"}, "subnet-id", "--vpc-id needs --subnet-id"),
        ({"subnet_id": "subnet-12345678"}, "vpc-id", "--subnet-id needs --vpc-id"),
        ({"vpc_id": "my-vpc", "subnet_id": "subnet-12345678"}, "vpc-id", "not a VPC id"),
        ({"vpc_id": "vpc-12345678", "subnet_id": "sub-1"}, "subnet-id", "not a subnet id"),
        ({"vpc_id": "vpc-12345678", "subnet_id": "subnet-12345678", "db": "rds"}, "db-subnet-id", "two or more"),
        (
            {
                "vpc_id": "vpc-12345678",
                "subnet_id": "subnet-12345678",
                "db": "rds",
                "db_subnet_ids": ("subnet-aaaaaaaa", "subnet-aaaaaaaa"),
            },
            "db-subnet-id",
            "two or more",
        ),
        ({"db_subnet_ids": ("subnet-aaaaaaaa", "subnet-bbbbbbbb"), "db": "rds"}, "db-subnet-id", "only with"),
        ({"availability_zone": "moon"}, "availability-zone", "availability zone"),
        ({"availability_zone": "eu-west-1a", "region": "us-east-1"}, "availability-zone", "not in --region"),
        ({"pedl_version": "latest"}, "pedl-version", "release version"),
        ({"package": "pedl; rm -rf /'"}, "package", "no quotes"),
        ({"package": " "}, "package", "pip requirement"),
    ],
)
def test_bad_options_name_the_option(change: dict[str, Any], option: str, words: str) -> None:
    with pytest.raises(DeployOptionError) as info:
        DeployOptions(**{**BASE, **change})
    assert info.value.option == option
    assert str(info.value).startswith(f"--{option}: ")
    assert words in str(info.value)


@pytest.mark.parametrize("cluster_id", ["a", "demo", "team-7", "x" * 32])
def test_good_cluster_ids(cluster_id: str) -> None:
    assert DeployOptions(cluster_id=cluster_id, keypair="k").stack_name == f"pedl-{cluster_id}"


def test_an_existing_network() -> None:
    o = DeployOptions(
        **BASE,
        vpc_id="vpc-0123456789abcdef0",
        subnet_id="subnet-0123456789abcdef0",
        db="rds",
        db_subnet_ids=("subnet-aaaaaaaa", "subnet-bbbbbbbb"),
        availability_zone="us-east-1b",
        region="us-east-1",
    )
    assert not o.creates_network
