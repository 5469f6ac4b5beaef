"""`pedl deploy aws down`: stop the master (so that it launches no more agents), cancel the cluster's spot
requests and terminate its agents (those with its tag pair, only those), delete the stack and wait. The
stack keeps the bucket, the data volume and, with db=rds, a final snapshot and the login secret; with
delete_data they go too (the bucket emptied first)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pedl.deploy import logical_ids as ids
from pedl.deploy.aws_session import AwsSession, DeployError, aws_errors, error_code, error_message
from pedl.deploy.cluster_instances import agent_instances, cancel_spot_requests, spot_requests, terminate_instances
from pedl.deploy.stack_events import EventFeed, wait_for_stack
from pedl.deploy.stacks import ClusterStack, require_stack, stack_resources
from pedl.deploy.waiting import Progress, wait_until

VOLUME_WAIT_S = 10 * 60
MASTER_STOP_WAIT_S = 10 * 60


@dataclass(frozen=True)
class DownPlan:
    stack: ClusterStack
    resources: dict[str, str]  # physical id by logical id
    agents: list[str]  # instance ids
    spot_requests: list[str]

    @property
    def master_instance(self) -> str | None:
        return self.resources.get(ids.MASTER) or self.stack.outputs.get("MasterInstanceId") or None


@dataclass
class DownResult:
    kept: list[str] = field(default_factory=list)  # what is left and how to delete it by hand
    deleted: list[str] = field(default_factory=list)


def plan_down(aws: AwsSession, cluster_id: str) -> DownPlan:
    """What `down` will stop, terminate and delete; a DeployError for an unknown cluster."""
    stack = require_stack(aws, cluster_id)
    resources = stack_resources(aws, stack.stack_id)
    requests = spot_requests(aws, cluster_id)
    master = resources.get(ids.MASTER) or stack.outputs.get("MasterInstanceId")
    agents = agent_instances(
        aws,
        cluster_id,
        exclude={master} if master else set(),
        also={r["InstanceId"] for r in requests if r.get("InstanceId")},
    )
    return DownPlan(stack, resources, [i["InstanceId"] for i in agents], [r["SpotInstanceRequestId"] for r in requests])


def _stop_master(aws: AwsSession, instance_id: str, progress: Progress) -> None:
    """Stop the master and wait until it is down: an agent it launches until then is listed after."""
    ec2 = aws.client("ec2")
    try:
        ec2.stop_instances(InstanceIds=[instance_id])
    except ClientError as exc:
        if error_code(exc) in ("IncorrectInstanceState", "InvalidInstanceID.NotFound"):
            return  # stopped, terminated or gone already
        raise DeployError(f"StopInstances {instance_id} failed: {error_message(exc)}") from None
    progress.step(f"stopping the master {instance_id}, so that it launches no more agents")

    def stopped() -> bool | None:
        with aws_errors(f"DescribeInstances {instance_id}"):
            reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        states = {i["State"]["Name"] for r in reservations for i in r["Instances"]}
        return True if states <= {"stopped", "terminated"} else None

    wait_until(stopped, what=f"the master {instance_id} to stop", timeout_s=MASTER_STOP_WAIT_S, progress=progress)


def _delete_stack(aws: AwsSession, stack: ClusterStack, progress: Progress) -> datetime | None:
    """Delete and wait; when it began (AWS's clock), for the database's final snapshot."""
    feed = EventFeed.from_now(aws, stack.stack_id)
    progress.step(f"deleting the stack {stack.name}")
    try:
        aws.client("cloudformation").delete_stack(StackName=stack.stack_id)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"deleting the stack {stack.name} failed: {error_message(exc)}") from None
    outcome = wait_for_stack(
        aws, stack.stack_id, operation="DELETE", what=f"the deletion of {stack.name}", feed=feed, progress=progress
    )
    if not outcome.ok:
        lines = [f"deleting the stack {stack.name} failed ({outcome.status}):"]
        lines += [f"  {line}" for line in outcome.failures or ["CloudFormation gave no reason"]]
        lines.append("fix or delete those resources by hand, then run `down` again")
        raise DeployError("\n".join(lines))
    return feed.events[0]["Timestamp"] if feed.events else None


def _empty_and_delete_bucket(aws: AwsSession, bucket: str) -> bool:
    s3 = aws.client("s3")
    try:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            objects = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for start in range(0, len(objects), 1000):
                s3.delete_objects(Bucket=bucket, Delete={"Objects": objects[start : start + 1000], "Quiet": True})
        s3.delete_bucket(Bucket=bucket)
    except ClientError as exc:
        if error_code(exc) == "NoSuchBucket":
            return False
        raise DeployError(f"deleting the bucket {bucket} failed: {error_message(exc)}") from None
    return True


def _delete_volume(aws: AwsSession, volume_id: str, progress: Progress) -> bool:
    ec2 = aws.client("ec2")

    def detached() -> str | None:
        try:
            (volume,) = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"]
        except ClientError as exc:
            if error_code(exc) == "InvalidVolume.NotFound":
                return "gone"
            raise DeployError(f"DescribeVolumes {volume_id} failed: {error_message(exc)}") from None
        return "available" if volume["State"] == "available" else None

    if (
        wait_until(
            detached, what=f"the data volume {volume_id} to be detached", timeout_s=VOLUME_WAIT_S, progress=progress
        )
        == "gone"
    ):
        return False
    with aws_errors(f"DeleteVolume {volume_id}"):
        ec2.delete_volume(VolumeId=volume_id)
    return True


def _delete_database_leftovers(aws: AwsSession, plan: DownPlan, since: datetime | None, result: DownResult) -> None:
    """The login secret and the final snapshot (taken at or after `since`) the stack keeps with db=rds."""
    secret, database = plan.resources.get(ids.DB_SECRET), plan.resources.get(ids.DATABASE)
    if secret:
        try:
            aws.client("secretsmanager").delete_secret(SecretId=secret, ForceDeleteWithoutRecovery=True)
            result.deleted.append(f"the database login secret {secret}")
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise DeployError(f"deleting the secret {secret} failed: {error_message(exc)}") from None
    if not database:
        return
    with aws_errors("DescribeDBSnapshots"):
        snapshots = aws.client("rds").describe_db_snapshots(DBInstanceIdentifier=database, SnapshotType="manual")[
            "DBSnapshots"
        ]
    for snapshot in snapshots:
        created = snapshot.get("SnapshotCreateTime")
        if since is None or created is None or created < since:
            result.kept.append(f"the database snapshot {snapshot['DBSnapshotIdentifier']} (not the final one)")
            continue
        with aws_errors(f"DeleteDBSnapshot {snapshot['DBSnapshotIdentifier']}"):
            aws.client("rds").delete_db_snapshot(DBSnapshotIdentifier=snapshot["DBSnapshotIdentifier"])
        result.deleted.append(f"the database's final snapshot {snapshot['DBSnapshotIdentifier']}")


def _kept(plan: DownPlan) -> list[str]:
    bucket, volume = plan.resources.get(ids.BUCKET), plan.resources.get(ids.DATA_VOLUME)
    out = []
    if bucket:
        out.append(f"the checkpoint bucket {bucket} (aws s3 rb --force s3://{bucket})")
    if volume:
        out.append(f"the master's data volume {volume} (aws ec2 delete-volume --volume-id {volume})")
    if plan.resources.get(ids.DATABASE):
        out.append(
            f"the database's final snapshot (of {plan.resources[ids.DATABASE]}) and its login secret "
            f"{plan.resources.get(ids.DB_SECRET, '')}".rstrip()
        )
    return out


def apply_down(aws: AwsSession, plan: DownPlan, *, delete_data: bool, progress: Progress) -> DownResult:
    if plan.master_instance:
        _stop_master(aws, plan.master_instance, progress)
    cancel_spot_requests(aws, plan.spot_requests, progress)
    # again, now that the master is stopped: an agent it launched since the plan is the cluster's too
    again: list[dict[str, Any]] = agent_instances(aws, plan.stack.cluster_id, exclude={plan.master_instance or ""})
    terminate_instances(aws, sorted(set(plan.agents) | {i["InstanceId"] for i in again}), progress)
    since = _delete_stack(aws, plan.stack, progress)
    result = DownResult()
    if not delete_data:
        result.kept = _kept(plan)
        return result
    bucket, volume = plan.resources.get(ids.BUCKET), plan.resources.get(ids.DATA_VOLUME)
    if bucket and _empty_and_delete_bucket(aws, bucket):
        result.deleted.append(f"the checkpoint bucket {bucket}")
    if volume and _delete_volume(aws, volume, progress):
        result.deleted.append(f"the master's data volume {volume}")
    _delete_database_leftovers(aws, plan, since, result)
    return result
