"""`pedl deploy aws up`: plan (check the region, find the cluster's stack, pin the master's AMI, build
the template and compare it with the stack's) without changing anything, then apply (upload pedl's own
wheel to the bucket, create or update the stack, report its events until it is ready)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from pedl.common.package import Wheel, own_wheel
from pedl.deploy import logical_ids as ids
from pedl.deploy.aws_session import AwsSession, DeployError, aws_errors, error_code, error_message
from pedl.deploy.options import TAG_KEY, DeployOptions
from pedl.deploy.preflight import preflight, resolve_master_image
from pedl.deploy.stack_changes import master_changes, refused_changes
from pedl.deploy.stack_events import EventFeed, Outcome, wait_for_stack
from pedl.deploy.stacks import ONLY_DELETABLE, ClusterStack, find_stack, pinned_master_image, stack_template
from pedl.deploy.template import build_template, template_yaml
from pedl.deploy.waiting import Progress
from pedl.deploy.wheel_upload import upload_wheel

CAPABILITIES = ["CAPABILITY_IAM"]  # the stack makes the master's and agents' roles (with generated names)
NO_UPDATES = "No updates are to be performed"


@dataclass(frozen=True)
class UpPlan:
    options: DeployOptions
    existing: ClusterStack | None
    template: dict[str, Any]
    wheel: Wheel | None  # None with options.package (tests): the master installs that instead
    master_image_id: str
    changed: bool  # False: the stack runs this template already
    master_changes: tuple[str, ...]  # the master's properties an update changes: each restarts it

    @property
    def action(self) -> Literal["create", "update", "none"]:
        if self.existing is None:
            return "create"
        return "update" if self.changed else "none"


@dataclass(frozen=True)
class UpResult:
    action: Literal["created", "updated", "up to date"]
    stack: ClusterStack
    wheel_url: str | None


def _stack_problems(stack: ClusterStack) -> list[DeployError]:
    reason = f" ({stack.reason})" if stack.reason else ""
    if stack.status in ONLY_DELETABLE:
        return [
            DeployError(
                f"the stack {stack.name} is {stack.status}{reason}: CloudFormation cannot update it, only delete it. "
                f"Run `pedl deploy aws down --cluster-id {stack.cluster_id}` (the bucket and data volume are kept), "
                "then `up` again",
                option="cluster-id",
            )
        ]
    if stack.busy:
        return [
            DeployError(
                f"the stack {stack.name} is busy ({stack.status}): wait until it ends "
                f"(`pedl deploy aws describe --cluster-id {stack.cluster_id}`), then `up` again",
                option="cluster-id",
            )
        ]
    return []


def plan_up(aws: AwsSession, options: DeployOptions, progress: Progress) -> UpPlan:
    """What `up` would do; a DeployError listing every problem found, with nothing created or changed."""
    progress.step(f"checking {aws.region}: key pair {options.keypair}, instance types, the stack {options.stack_name}")
    existing = find_stack(aws, options.cluster_id)
    problems = _stack_problems(existing) if existing else []
    options, found = preflight(aws, options)
    problems += found
    if problems:
        raise DeployError("\n".join(str(p) for p in problems))
    wheel = None if options.package else own_wheel()
    image = pinned_master_image(aws, existing) if existing else None
    image = image or resolve_master_image(aws)
    template = build_template(options, master_image_id=image, wheel_sha256=wheel.sha256 if wheel else None)
    if existing is None:
        return UpPlan(options, None, template, wheel, image, True, ())
    current = stack_template(aws, existing)
    refused = refused_changes(current, template)
    if refused:
        raise DeployError("\n".join(str(p) for p in refused))
    return UpPlan(
        options, existing, template, wheel, image, current != template, tuple(master_changes(current, template))
    )


def _upload(aws: AwsSession, bucket: str | None, wheel: Wheel | None, progress: Progress) -> str | None:
    if wheel is None or not bucket:
        return None
    return upload_wheel(aws, bucket, wheel, progress)


def _failed(plan: UpPlan, doing: str, outcome: Outcome) -> DeployError:
    lines = [f"{doing} {plan.options.stack_name} failed ({outcome.status}):"]
    lines += [f"  {line}" for line in outcome.failures or ["CloudFormation gave no reason"]]
    if outcome.status in ONLY_DELETABLE:
        lines.append(
            "the stack can only be deleted now: "
            f"`pedl deploy aws down --cluster-id {plan.options.cluster_id}`, then `up` again"
        )
    elif outcome.status == "UPDATE_ROLLBACK_COMPLETE":
        lines.append("CloudFormation rolled the stack back: the cluster runs as before this update")
    return DeployError("\n".join(lines))


def _create(aws: AwsSession, plan: UpPlan, progress: Progress) -> str | None:
    cfn = aws.client("cloudformation")
    progress.step(f"creating the stack {plan.options.stack_name} in {aws.region}")
    with aws_errors(f"CreateStack {plan.options.stack_name}"):
        stack_id = cfn.create_stack(
            StackName=plan.options.stack_name,
            TemplateBody=template_yaml(plan.template),
            Capabilities=CAPABILITIES,
            Tags=[{"Key": TAG_KEY, "Value": plan.options.cluster_id}],
        )["StackId"]
    uploaded: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        # the master waits for the wheel at boot: upload it as soon as the bucket exists
        if event["LogicalResourceId"] == ids.BUCKET and event["ResourceStatus"] == "CREATE_COMPLETE" and not uploaded:
            url = _upload(aws, event.get("PhysicalResourceId"), plan.wheel, progress)
            uploaded.extend([url] if url else [])

    try:
        outcome = wait_for_stack(
            aws,
            stack_id,
            operation="CREATE",
            what=f"the stack {plan.options.stack_name}",
            feed=EventFeed(aws, stack_id),
            progress=progress,
            on_event=on_event,
        )
    except DeployError as exc:
        raise DeployError(
            f"{exc}\nthe stack's creation goes on; `up` again once it is CREATE_COMPLETE uploads pedl's "
            "wheel if it is not there yet"
        ) from None
    if not outcome.ok:
        raise _failed(plan, "creating", outcome)
    if uploaded:
        return uploaded[0]
    stack = find_stack(aws, plan.options.cluster_id)
    return _upload(aws, stack.outputs.get("CheckpointBucket") if stack else None, plan.wheel, progress)


def _update(aws: AwsSession, plan: UpPlan, progress: Progress) -> tuple[bool, str | None]:
    """(whether CloudFormation changed anything, the wheel's URL)."""
    assert plan.existing is not None
    stack = plan.existing
    url = _upload(aws, stack.outputs.get("CheckpointBucket"), plan.wheel, progress)  # before the master restarts
    feed = EventFeed.from_now(aws, stack.stack_id)
    progress.step(
        f"updating the stack {stack.name}"
        + (f" (the master restarts: its {', '.join(plan.master_changes)} change)" if plan.master_changes else "")
    )
    try:
        aws.client("cloudformation").update_stack(
            StackName=stack.stack_id,
            TemplateBody=template_yaml(plan.template),
            Capabilities=CAPABILITIES,
            Tags=[{"Key": TAG_KEY, "Value": plan.options.cluster_id}],
        )
    except ClientError as exc:
        if error_code(exc) == "ValidationError" and NO_UPDATES in str(exc):
            return False, url
        raise DeployError(f"UpdateStack {stack.name} failed: {error_message(exc)}") from None
    except BotoCoreError as exc:
        raise DeployError(f"UpdateStack {stack.name} failed: {exc}") from None
    outcome = wait_for_stack(
        aws, stack.stack_id, operation="UPDATE", what=f"the update of {stack.name}", feed=feed, progress=progress
    )
    if not outcome.ok:
        raise _failed(plan, "updating", outcome)
    return True, url


def apply_up(aws: AwsSession, plan: UpPlan, progress: Progress) -> UpResult:
    if plan.action == "create":
        url = _create(aws, plan, progress)
        action: Literal["created", "updated", "up to date"] = "created"
    elif plan.action == "update":
        changed, url = _update(aws, plan, progress)
        action = "updated" if changed else "up to date"
    else:
        assert plan.existing is not None
        url = _upload(aws, plan.existing.outputs.get("CheckpointBucket"), plan.wheel, progress)
        action = "up to date"
    stack = find_stack(aws, plan.options.cluster_id)
    if stack is None:
        raise DeployError(f"the stack {plan.options.stack_name} is gone")
    return UpResult(action, stack, url)
