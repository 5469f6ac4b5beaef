"""Options for every combination the template varies on, and readers of a built template (rules of
its security groups, its IAM statements), for the deploy tests."""

from __future__ import annotations

import itertools
from typing import Any

from pedl.deploy.options import DeployOptions

VPC = "vpc-0a1b2c3d4e5f60718"
SUBNET = "subnet-0a1b2c3d4e5f60718"
DB_SUBNETS = ("subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb")
AMI = "ami-0123456789abcdef0"
AXES = ("spot", "db", "vpc", "tls", "elastic_ip", "agent_ami")


def options_for(
    spot: bool, db: str, vpc: bool, tls: bool, elastic_ip: bool, agent_ami: bool, **more: Any
) -> DeployOptions:
    network: dict[str, Any] = {}
    if vpc:
        network = {"vpc_id": VPC, "subnet_id": SUBNET}
        if db == "rds":
            network["db_subnet_ids"] = DB_SUBNETS
    return DeployOptions(
        cluster_id="demo",
        keypair="demo-key",
        spot=spot,
        db=db,
        tls=tls,  # type: ignore[arg-type]
        elastic_ip=elastic_ip,
        agent_ami=AMI if agent_ami else None,
        inbound_cidr="203.0.113.0/24",
        **network,
        **more,
    )


def combinations() -> list[tuple[bool, str, bool, bool, bool, bool]]:
    return list(
        itertools.product(
            [False, True], ["embedded", "rds"], [False, True], [False, True], [False, True], [False, True]
        )
    )


def covering_combinations(strength: int = 3) -> list[tuple[bool, str, bool, bool, bool, bool]]:
    """Combinations in which every value of every `strength` axes meets every value of the others at least once
    (a covering array, picked greedily): a fault that needs up to three options set a certain way shows in one
    of them. For six two-valued axes that is 12 of the 64; cfn-lint takes ~0.5 s of CPU a template."""
    everything = combinations()
    axes = list(itertools.combinations(range(len(AXES)), strength))

    def keys(combo: tuple[Any, ...]) -> set[tuple[Any, ...]]:
        return {(which, tuple(combo[i] for i in which)) for which in axes}

    uncovered = set().union(*(keys(c) for c in everything))
    picked: list[tuple[bool, str, bool, bool, bool, bool]] = []
    while uncovered:
        best = max(everything, key=lambda c: len(keys(c) & uncovered))  # the first of the best: deterministic
        picked.append(best)
        uncovered -= keys(best)
    return picked


def combination_id(combo: tuple[Any, ...]) -> str:
    return "-".join(f"{axis}={value}" for axis, value in zip(AXES, combo, strict=True))


def resources_of_type(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _group(value: Any) -> str:
    """A security group reference as the logical id it names."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0]
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    raise AssertionError(f"not a reference to a group of the stack: {value!r}")


def _peer(rule: dict[str, Any]) -> str:
    for key in ("CidrIp",):
        if key in rule:
            return f"cidr:{rule[key]}"
    for key in ("SourceSecurityGroupId", "DestinationSecurityGroupId"):
        if key in rule:
            return f"sg:{_group(rule[key])}"
    raise AssertionError(f"a rule without a peer: {rule!r}")


def _port(rule: dict[str, Any], key: str) -> int | None:
    return None if rule["IpProtocol"] == "-1" else int(rule[key])


def security_group_rules(template: dict[str, Any]) -> set[tuple[str, str, str, int | None, int | None, str]]:
    """Every rule as (group, "in"|"out", protocol, from port, to port, peer), whether written inside the
    group or as a SecurityGroupIngress/Egress resource of its own."""
    rules = set()
    for name, group in resources_of_type(template, "AWS::EC2::SecurityGroup").items():
        for direction, key in (("in", "SecurityGroupIngress"), ("out", "SecurityGroupEgress")):
            for rule in group["Properties"].get(key, []):
                rules.add(
                    (name, direction, rule["IpProtocol"], _port(rule, "FromPort"), _port(rule, "ToPort"), _peer(rule))
                )
    for direction, kind in (("in", "AWS::EC2::SecurityGroupIngress"), ("out", "AWS::EC2::SecurityGroupEgress")):
        for rule in resources_of_type(template, kind).values():
            props = rule["Properties"]
            rules.add(
                (
                    _group(props["GroupId"]),
                    direction,
                    props["IpProtocol"],
                    _port(props, "FromPort"),
                    _port(props, "ToPort"),
                    _peer(props),
                )
            )
    return rules


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    props = template["Resources"][role]["Properties"]
    return [s for policy in props["Policies"] for s in policy["PolicyDocument"]["Statement"]]


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)
