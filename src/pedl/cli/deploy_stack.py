"""`pedl deploy aws up|down|list|describe`: the cluster's CloudFormation stack, made and removed through
pedl/deploy/ (stack_up, stack_down, cluster_info). These commands print; the deploy code does the AWS
work. `down` asks the master whether experiments are active before it deletes anything."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from pedl.cli.client import MasterClient
from pedl.cli.deploy_options import (
    AgentAmi,
    AgentInstanceTypes,
    AvailabilityZone,
    ClusterId,
    Db,
    DbSubnetIds,
    ElasticIp,
    EndpointUrl,
    InboundCidr,
    Keypair,
    MasterInstanceType,
    MaxInstances,
    Package,
    Region,
    Spot,
    SubnetId,
    Tls,
    VpcId,
    Yes,
    deploy_options,
)
from pedl.cli.output import JsonFlag, error_line, info, print_fields, print_json, print_table, say, warn
from pedl.cli.state import state_of
from pedl.deploy.deploy_error import DeployError
from pedl.deploy.options import DEFAULT_INBOUND_CIDR, DEFAULT_MASTER_INSTANCE_TYPE, DEFAULT_MAX_INSTANCES
from pedl.deploy.waiting import Progress
from pedl.errors import PedlError

if TYPE_CHECKING:  # boto3 loads only when a command talks to AWS
    from pedl.deploy.aws_session import AwsSession
    from pedl.deploy.stack_up import UpResult

MASTER_TIMEOUT_S = 5.0  # `down` asking the master about active experiments
ACTIVE = "STATE_ACTIVE"


def _progress() -> Progress:
    return Progress(step=say, event=lambda line: say(f"  {line}"), waiting=info)


def _fail(exc: DeployError) -> typer.Exit:
    for line in str(exc).splitlines():
        error_line(line)
    return typer.Exit(1)


def _session(region: str | None, endpoint_url: str | None) -> AwsSession:
    from pedl.deploy.aws_session import open_session

    try:
        return open_session(region, endpoint_url)
    except DeployError as exc:
        raise _fail(exc) from None


def _confirm(question: str, nothing_done: str) -> None:
    try:
        if typer.confirm(question, default=False):
            return
    except typer.Abort:
        pass
    error_line(f"aborted: {nothing_done}")
    raise typer.Exit(1)


def _aws_cli_flags(aws: AwsSession) -> str:
    return f" --region {aws.region}" + (f" --endpoint-url {aws.endpoint_url}" if aws.endpoint_url else "")


def _print_login(aws: AwsSession, result: UpResult) -> None:
    stack, url = result.stack, result.stack.master_url or "(no MasterUrl output)"
    say("")
    say(f"cluster {stack.cluster_id}: {result.action} ({stack.status}) in {aws.region}")
    say(f"master: {url}")
    if result.wheel_url:
        say(f"pedl: {result.wheel_url}, which the master installs as it boots (a few minutes)")
    cert = ""
    ca_url = stack.outputs.get("CaCertificateUrl")
    if ca_url:
        ca_file = f"pedl-{stack.cluster_id}-ca.crt"
        cert = f" --cert {ca_file}"
        say(f"TLS: the master makes its certificate at first boot and publishes its CA at {ca_url}; fetch it with")
        say(f"  aws s3 cp {ca_url} {ca_file}{_aws_cli_flags(aws)}")
    say("log in (admin's password is blank at first: set it, and determined's, right away):")
    say(f"  pedl -m {url}{cert} user login admin")
    say(f"  pedl -m {url}{cert} user change-password admin")
    say(f"  pedl -m {url}{cert} user change-password determined")


def up_command(
    cluster_id: ClusterId,
    keypair: Keypair,
    region: Region = None,
    master_instance_type: MasterInstanceType = DEFAULT_MASTER_INSTANCE_TYPE,
    agent_instance_types: AgentInstanceTypes = None,
    max_instances: MaxInstances = DEFAULT_MAX_INSTANCES,
    spot: Spot = False,
    agent_ami: AgentAmi = None,
    db: Db = "embedded",
    inbound_cidr: InboundCidr = DEFAULT_INBOUND_CIDR,
    vpc_id: VpcId = None,
    subnet_id: SubnetId = None,
    db_subnet_ids: DbSubnetIds = None,
    availability_zone: AvailabilityZone = None,
    tls: Tls = False,
    elastic_ip: ElasticIp = False,
    package: Package = None,
    endpoint_url: EndpointUrl = None,
    yes: Yes = False,
) -> None:
    """Create the cluster's stack, or update it in place; show its events, then the master URL and how to log in."""
    from pedl.deploy.stack_up import apply_up, plan_up

    options = deploy_options(
        cluster_id=cluster_id,
        keypair=keypair,
        region=region,
        master_instance_type=master_instance_type,
        agent_instance_types=agent_instance_types,
        max_instances=max_instances,
        spot=spot,
        agent_ami=agent_ami,
        db=db,
        inbound_cidr=inbound_cidr,
        vpc_id=vpc_id,
        subnet_id=subnet_id,
        db_subnet_ids=db_subnet_ids,
        availability_zone=availability_zone,
        tls=tls,
        elastic_ip=elastic_ip,
        package=package,
    )
    aws = _session(options.region, endpoint_url)
    progress = _progress()
    try:
        plan = plan_up(aws, options, progress)
        if plan.action == "update" and plan.master_changes and not yes:
            _confirm(
                f"This update restarts the master of {cluster_id} (its {', '.join(plan.master_changes)} "
                "change); its agents and their trials keep running. Go on?",
                "nothing was changed",
            )
        result = apply_up(aws, plan, progress)
    except DeployError as exc:
        raise _fail(exc) from None
    if result.action == "up to date":
        say(f"the stack {result.stack.name} is already up to date: nothing to change")
    _print_login(aws, result)


def _active_experiments_question(ctx: typer.Context, url: str | None) -> str | None:
    """The question to ask before deleting, or None when the master says no experiment is active."""
    if not url:
        warn("the stack has no MasterUrl: cannot ask the master whether experiments are active")
        return "Delete the cluster anyway?"
    state = state_of(ctx)
    try:
        client = MasterClient(url, user=state.user, cert=state.cert, timeout=MASTER_TIMEOUT_S)
        try:
            body = client.get("/api/v1/experiments", states=[ACTIVE], limit=100)
        finally:
            client.close()
    except PedlError as exc:
        warn(f"cannot ask the master at {url} whether experiments are active: {exc.message}")
        return "Delete the cluster anyway?"
    active = [e for e in body.get("experiments") or [] if e.get("state") in (None, ACTIVE)]
    if not active:
        info(f"no active experiments on {url}")
        return None
    listed = ", ".join(f"{e.get('id')} ({e.get('name') or 'unnamed'})" for e in active[:10])
    warn(f"{len(active)} experiment(s) are active on {url}: {listed}; deleting the cluster ends their trials")
    return "Delete the cluster and end them?"


def down_command(
    ctx: typer.Context,
    cluster_id: ClusterId,
    delete_data: bool = typer.Option(
        False,
        "--delete-data",
        help="delete the checkpoint bucket, the data volume and the database's final snapshot too (kept otherwise)",
    ),
    yes: Yes = False,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
    master_url: str | None = typer.Option(
        None,
        "--master-url",
        metavar="URL",
        help="ask this master about active experiments (default: the stack's MasterUrl), e.g. through a tunnel",
    ),
) -> None:
    """Terminate the cluster's agents, then delete its stack; the bucket, data volume and database are kept."""
    from pedl.deploy.stack_down import apply_down, plan_down

    aws = _session(region, endpoint_url)
    progress = _progress()
    try:
        plan = plan_down(aws, cluster_id)
        question = None if yes else _active_experiments_question(ctx, master_url or plan.stack.master_url)
        if question:
            _confirm(question, "nothing was deleted")
        say(
            f"deleting cluster {cluster_id} in {aws.region}: {len(plan.agents)} agent instance(s), "
            f"{len(plan.spot_requests)} spot request(s), the stack {plan.stack.name}"
        )
        result = apply_down(aws, plan, delete_data=delete_data, progress=progress)
    except DeployError as exc:
        raise _fail(exc) from None
    say(f"cluster {cluster_id} deleted")
    for line in result.deleted:
        say(f"deleted {line}")
    if result.kept:
        say("kept (`down --delete-data` deletes them with the stack; by hand now):")
        for line in result.kept:
            say(f"  {line}")


def list_command(region: Region = None, endpoint_url: EndpointUrl = None, as_json: JsonFlag = False) -> None:
    """List the region's pedl clusters: cluster id, stack status, master URL, created."""
    from pedl.deploy.cluster_info import list_clusters

    aws = _session(region, endpoint_url)
    try:
        clusters = list_clusters(aws)
    except DeployError as exc:
        raise _fail(exc) from None
    if as_json:
        print_json(clusters)
        return
    print_table(
        ["Cluster", "Status", "Master URL", "Created"],
        [[c["cluster_id"], c["status"], c["master_url"], _when(c["created"])] for c in clusters],
        title=f"pedl clusters in {aws.region}",
    )


def _when(value: Any) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def describe_command(
    cluster_id: ClusterId, region: Region = None, endpoint_url: EndpointUrl = None, as_json: JsonFlag = False
) -> None:
    """Show a cluster: its stack's status and outputs, the master URL, its agent instances."""
    from pedl.deploy.cluster_info import describe_cluster

    aws = _session(region, endpoint_url)
    try:
        cluster = describe_cluster(aws, cluster_id)
    except DeployError as exc:
        raise _fail(exc) from None
    if as_json:
        print_json(cluster)
        return
    status = cluster["status"] + (f" ({cluster['reason']})" if cluster["reason"] else "")
    print_fields(
        [
            ("cluster", cluster["cluster_id"]),
            ("stack", cluster["stack"]),
            ("region", cluster["region"]),
            ("status", status),
            ("master", cluster["master_url"]),
            ("pedl", cluster["pedl_version"]),
            ("created", _when(cluster["created"])),
        ]
    )
    print_table(["Output", "Value"], list(cluster["outputs"].items()), title="outputs")
    print_table(
        ["Instance", "Type", "State", "Market", "Pool", "Private IP", "Launched"],
        [
            [a["instance_id"], a["type"], a["state"], a["market"], a["pool"], a["private_ip"], _when(a["launched"])]
            for a in cluster["agents"]
        ],
        title=f"agent instances ({len(cluster['agents'])})",
    )
