"""What `pedl deploy aws` is asked to build: one frozen, validated set of options, and the names derived
from the cluster id (stack name, tag pair) that the template and `up`/`down` agree on."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pedl.config import instance_types
from pedl.version import __version__

DEFAULT_MASTER_INSTANCE_TYPE = "t3.medium"  # the seeds: >= 2 CPUs, 4 GB (t2.medium or better)
DEFAULT_AGENT_INSTANCE_TYPES = ("g5.xlarge",)
DEFAULT_MAX_INSTANCES = 5  # the seeds' default
DEFAULT_INBOUND_CIDR = "0.0.0.0/0"
HTTP_PORT = 8080  # the seeds' master port, 8443 with TLS
TLS_PORT = 8443

# The cluster's tag pair: on every stack resource and, as the pool's tag_key/tag_value, on every agent
# instance and spot request the master launches. The provider owns an instance only with the pair AND its
# pool tag (POOL_TAG), which the master instance does not carry, so the master never manages itself.
TAG_KEY = "pedl-cluster"
STACK_PREFIX = "pedl-"

# A cluster id goes into the stack name, every physical name CloudFormation derives from it (the bucket's
# among them: lower case only) and tags. RDS's identifier rules are the strictest of those names.
_CLUSTER_ID = re.compile(r"^[a-z](?:[a-z0-9]|-(?!-)){0,30}[a-z0-9]$|^[a-z]$")
_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
_REGION = re.compile(r"^[a-z]{2}(?:-gov|-iso[a-z]*)?-[a-z]+-\d$")
_AZ = re.compile(r"^[a-z]{2}(?:-gov|-iso[a-z]*)?-[a-z]+-\d[a-z](?:-[a-z0-9-]+)?$")
_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_VPC = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_KEYPAIR = re.compile(r"^[\x20-\x23\x25-\x7e]{1,255}$")  # printable ASCII but "$" (Fn::Sub's)
_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?$")
MAX_INSTANCES_LIMIT = 1000

Bad = Callable[[str, str], None]  # (option, message)


class DeployOptionError(ValueError):
    """A bad option; `option` names it as the CLI spells it (without the leading dashes)."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"--{option}: {message}")


def stack_name(cluster_id: str) -> str:
    """The CloudFormation stack of a cluster."""
    return STACK_PREFIX + cluster_id


def tag_pair(cluster_id: str) -> tuple[str, str]:
    """(tag_key, tag_value) of a cluster: its master's pool config and every resource of its stack."""
    return TAG_KEY, cluster_id


@dataclass(frozen=True)
class DeployOptions:
    """Everything the template depends on. Construction validates; a DeployOptionError names the option."""

    cluster_id: str
    keypair: str
    region: str | None = None  # where `up` creates the stack; the template itself is region-independent
    master_instance_type: str = DEFAULT_MASTER_INSTANCE_TYPE
    agent_instance_types: tuple[str, ...] = DEFAULT_AGENT_INSTANCE_TYPES
    max_instances: int = DEFAULT_MAX_INSTANCES
    spot: bool = False
    agent_ami: str | None = None  # None: the AWS Deep Learning Base GPU AMI of the stack's region (SSM)
    db: Literal["embedded", "rds"] = "embedded"
    inbound_cidr: str = DEFAULT_INBOUND_CIDR
    vpc_id: str | None = None
    subnet_id: str | None = None
    db_subnet_ids: tuple[str, ...] = ()  # db=rds in a given VPC: two or more subnets in different AZs
    availability_zone: str | None = None  # of the master's subnet (and data volume)
    tls: bool = False
    elastic_ip: bool = False
    pedl_version: str = __version__
    package: str | None = None  # what the master pip-installs; default pedl==<pedl_version>

    def __post_init__(self) -> None:
        # tuples, so that the options stay hashable and frozen even when given lists
        object.__setattr__(self, "agent_instance_types", tuple(self.agent_instance_types))
        object.__setattr__(self, "db_subnet_ids", tuple(self.db_subnet_ids))
        for problem in _problems(self):
            raise problem

    @property
    def port(self) -> int:
        return TLS_PORT if self.tls else HTTP_PORT

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def stack_name(self) -> str:
        return stack_name(self.cluster_id)

    @property
    def tag_pair(self) -> tuple[str, str]:
        return tag_pair(self.cluster_id)

    @property
    def creates_network(self) -> bool:
        return self.vpc_id is None

    @property
    def package_spec(self) -> str:
        return self.package or f"pedl=={self.pedl_version}"


def _problems(o: DeployOptions) -> list[DeployOptionError]:
    """Every check, in the order the CLI lists the options; the first problem is raised."""
    out: list[DeployOptionError] = []

    def bad(option: str, message: str) -> None:
        out.append(DeployOptionError(option, message))

    if not _CLUSTER_ID.match(o.cluster_id or ""):
        bad(
            "cluster-id",
            f"{o.cluster_id!r} cannot name the stack's resources: use 1-32 characters, lower-case "
            "letters, digits and single hyphens, starting with a letter and not ending with a hyphen",
        )
    if not _KEYPAIR.match(o.keypair or ""):
        bad(
            "keypair",
            f"{o.keypair!r} is not an EC2 key pair name pedl can use (1-255 printable ASCII characters, without $)",
        )
    if o.region is not None and not _REGION.match(o.region):
        bad("region", f"{o.region!r} is not an AWS region such as us-east-1")
    if not _INSTANCE_TYPE.match(o.master_instance_type or ""):
        bad("master-instance-type", f"{o.master_instance_type!r} is not an EC2 instance type such as t3.medium")
    _check_agent_types(o.agent_instance_types, bad)
    if (
        isinstance(o.max_instances, bool)
        or not isinstance(o.max_instances, int)
        or not 1 <= o.max_instances <= MAX_INSTANCES_LIMIT
    ):
        bad("max-instances", f"{o.max_instances!r} is not a number of agent instances from 1 to {MAX_INSTANCES_LIMIT}")
    if o.agent_ami is not None and not _AMI.match(o.agent_ami):
        bad("agent-ami", f"{o.agent_ami!r} is not an AMI id (ami- and 8 or 17 hex digits)")
    if o.db not in ("embedded", "rds"):
        bad("db", f"{o.db!r} is not one of: embedded, rds")
    _check_cidr(o.inbound_cidr, bad)
    _check_network(o, bad)
    if not _VERSION.match(o.pedl_version or ""):
        bad("pedl-version", f"{o.pedl_version!r} is not a release version such as 0.1.0")
    if o.package is not None and (not o.package.strip() or any(c in o.package for c in "\n\r'\"`$\\")):
        bad("package", f"{o.package!r} is not a pip requirement, URL or path (no quotes, $, ` or backslashes)")
    return out


def _check_agent_types(types: tuple[str, ...], bad: Bad) -> None:
    if not types:
        bad("agent-instance-type", "give at least one agent instance type")
    gpu_types = sorted(n for n, t in instance_types.AWS_TYPES.items() if t.gpus)
    for name in types:
        info = instance_types.lookup(name)
        if info is None or not info.gpus:
            why = "has no GPUs" if info is not None else "is not a GPU instance type pedl knows"
            bad("agent-instance-type", f"{name!r} {why}; choose from: {', '.join(gpu_types)}")
    if len(set(types)) != len(types):
        bad("agent-instance-type", f"{', '.join(types)} names a type twice")


def _check_cidr(cidr: str, bad: Bad) -> None:
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        bad("inbound-cidr", f"{cidr!r} is not a CIDR block such as 203.0.113.0/24")
        return
    if net.version != 4:
        bad("inbound-cidr", f"{cidr!r} is IPv6; give an IPv4 CIDR block")
    elif str(net) != cidr:
        bad("inbound-cidr", f"{cidr!r} has host bits set or is not in CIDR form; did you mean {net}?")


def _check_network(o: DeployOptions, bad: Bad) -> None:
    if (o.vpc_id is None) != (o.subnet_id is None):
        given, missing = ("vpc-id", "subnet-id") if o.subnet_id is None else ("subnet-id", "vpc-id")
        bad(missing, f"--{given} needs --{missing} too: give both, or neither to create a VPC")
    if o.vpc_id is not None and not _VPC.match(o.vpc_id):
        bad("vpc-id", f"{o.vpc_id!r} is not a VPC id (vpc- and 8 or 17 hex digits)")
    if o.subnet_id is not None and not _SUBNET.match(o.subnet_id):
        bad("subnet-id", f"{o.subnet_id!r} is not a subnet id (subnet- and 8 or 17 hex digits)")
    for s in o.db_subnet_ids:
        if not _SUBNET.match(s):
            bad("db-subnet-id", f"{s!r} is not a subnet id (subnet- and 8 or 17 hex digits)")
    if o.db_subnet_ids and (o.db != "rds" or o.vpc_id is None):
        bad("db-subnet-id", "only with --db rds and --vpc-id (a created VPC gets its own database subnets)")
    if o.db == "rds" and o.vpc_id is not None and len(set(o.db_subnet_ids)) < 2:
        bad(
            "db-subnet-id",
            "--db rds in an existing VPC needs two or more subnets in different availability "
            "zones for the database (give --db-subnet-id twice)",
        )
    if o.availability_zone is not None and not _AZ.match(o.availability_zone):
        bad("availability-zone", f"{o.availability_zone!r} is not an availability zone such as us-east-1a")
    if o.availability_zone and o.region and not o.availability_zone.startswith(o.region):
        bad("availability-zone", f"{o.availability_zone} is not in --region {o.region}")
