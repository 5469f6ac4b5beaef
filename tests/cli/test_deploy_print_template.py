"""`pedl deploy aws print-template`: the template `up` would deploy, as YAML; a bad option ends it
with status 2 and a message naming the option."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.deploy.options import DeployOptions
from pedl.deploy.template import build_template


def run(*args: str):  # click's Result
    return CliRunner().invoke(app, ["deploy", "aws", "print-template", *args])


def test_it_prints_the_template_as_yaml() -> None:
    result = run("--cluster-id", "demo", "--keypair", "k")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == build_template(DeployOptions(cluster_id="demo", keypair="k"))


def test_every_option_reaches_the_template() -> None:
    result = run(
        "--cluster-id",
        "team-7",
        "--keypair",
        "k",
        "--region",
        "eu-west-1",
        "--master-instance-type",
        "t3.large",
        "--agent-instance-type",
        "g5.2xlarge",
        "--agent-instance-type",
        "g6.xlarge",
        "--max-instances",
        "12",
        "--spot",
        "--agent-ami",
        "ami-0123456789abcdef0",
        "--db",
        "rds",
        "--inbound-cidr",
        "198.51.100.0/24",
        "--vpc-id",
        "vpc-0123456789abcdef0",
        "--subnet-id",
        "subnet-0123456789abcdef0",
        "--db-subnet-id",
        "subnet-0aaaaaaaaaaaaaaaa",
        "--db-subnet-id",
        "subnet-0bbbbbbbbbbbbbbbb",
        "--availability-zone",
        "eu-west-1b",
        "--tls",
        "--elastic-ip",
    )
    assert result.exit_code == 0, result.output
    expected = DeployOptions(
        cluster_id="team-7",
        keypair="k",
        region="eu-west-1",
        master_instance_type="t3.large",
        agent_instance_types=("g5.2xlarge", "g6.xlarge"),
        max_instances=12,
        spot=True,
        agent_ami="ami-0123456789abcdef0",
        db="rds",
        inbound_cidr="198.51.100.0/24",
        vpc_id="vpc-0123456789abcdef0",
        subnet_id="subnet-0123456789abcdef0",
        db_subnet_ids=("subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"),
        availability_zone="eu-west-1b",
        tls=True,
        elastic_ip=True,
    )
    assert yaml.safe_load(result.stdout) == build_template(expected)


def test_a_bad_option_is_named() -> None:
    result = run("--cluster-id", "demo", "--keypair", "k", "--inbound-cidr", "10.0.0.0/33")
    assert result.exit_code == 2
    assert "--inbound-cidr" in result.stderr and "CIDR" in result.stderr
    assert result.stdout == ""
    result = run("--cluster-id", "Demo_1", "--keypair", "k")
    assert result.exit_code == 2 and "--cluster-id" in result.stderr


def test_vpc_without_subnet_is_refused() -> None:
    result = run("--cluster-id", "demo", "--keypair", "k", "--vpc-id", "vpc-0123456789abcdef0")
    assert result.exit_code == 2 and "--subnet-id" in result.stderr


def test_required_options() -> None:
    result = run("--keypair", "k")
    assert result.exit_code != 0 and "--cluster-id" in result.output
