"""What an update changes, from two templates: the master's properties (each restarts it) and the
changes `up` refuses because CloudFormation would replace the master or the data."""

from __future__ import annotations

from pedl.deploy.options import DeployOptions
from pedl.deploy.stack_changes import master_changes, refused_changes
from pedl.deploy.template import build_template

AMI = "ami-0123456789abcdef0"


def template(**options: object) -> dict:
    base: dict = {"cluster_id": "demo", "keypair": "k", **options}
    return build_template(DeployOptions(**base), master_image_id=AMI, wheel_sha256="a" * 64)


def test_the_same_options_change_nothing() -> None:
    assert template() == template()
    assert master_changes(template(), template()) == [] and refused_changes(template(), template()) == []


def test_what_restarts_the_master() -> None:
    assert master_changes(template(), template(max_instances=9)) == ["UserData"]  # its master.yaml
    assert master_changes(template(), template(master_instance_type="t3.large")) == ["InstanceType"]
    old, new = (
        template(),
        build_template(DeployOptions(cluster_id="demo", keypair="k"), master_image_id=AMI, wheel_sha256="b" * 64),
    )
    assert master_changes(old, new) == ["UserData"]  # a new pedl: the master reinstalls at its restart
    assert master_changes(template(), template(inbound_cidr="10.0.0.0/8")) == []  # security groups only


def test_a_new_key_pair_network_zone_or_database_is_refused() -> None:
    (keypair,) = refused_changes(template(), template(keypair="other"))
    assert keypair.option == "keypair" and "'k'" in str(keypair)
    given = {"vpc_id": "vpc-0a1b2c3d4e5f60718", "subnet_id": "subnet-0a1b2c3d4e5f60718"}
    (network,) = refused_changes(template(), template(**given))
    assert network.option == "subnet-id" and "a VPC of its own" in str(network)
    (zone,) = refused_changes(
        template(**given, availability_zone="us-east-1a"), template(**given, availability_zone="us-east-1b")
    )
    assert zone.option == "availability-zone" and "empty" in str(zone)
    (db,) = refused_changes(template(), template(db="rds"))
    assert db.option == "db" and "--db embedded" in str(db) and "empty database" in str(db)
    assert refused_changes(template(), template(tls=True, spot=True, max_instances=3)) == []
