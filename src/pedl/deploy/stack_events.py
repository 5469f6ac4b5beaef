"""A stack's events as they happen (DescribeStackEvents polled, the new ones reported oldest first) and
the wait for a create, update or delete to end: its final status and, when it failed, the reasons
CloudFormation gave for each resource that failed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pedl.deploy.aws_session import AwsSession, DeployError, aws_errors, error_code, error_message
from pedl.deploy.stacks import describe_stack
from pedl.deploy.waiting import Progress, wait_until

STACK_WAIT_S = 90 * 60  # RDS alone takes 10-20 minutes; CloudFormation's own timeouts come first


def format_event(event: dict[str, Any]) -> str:
    """time, resource, status, reason."""
    when = event["Timestamp"].astimezone().strftime("%H:%M:%S")
    line = f"{when}  {event['LogicalResourceId']:<28} {event['ResourceStatus']:<20}"
    reason = event.get("ResourceStatusReason")
    return f"{line} {reason}".rstrip() if reason else line.rstrip()


@dataclass
class EventFeed:
    """The events of one stack newer than `after` (an event id), each returned once, oldest first."""

    aws: AwsSession
    stack_id: str
    after: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # every event returned so far, oldest first
    _seen: set[str] = field(default_factory=set)

    @classmethod
    def from_now(cls, aws: AwsSession, stack_id: str) -> EventFeed:
        """A feed of the events after the newest one there is now (for an update of an existing stack)."""
        with aws_errors("DescribeStackEvents"):
            page = aws.client("cloudformation").describe_stack_events(StackName=stack_id)
        newest = page.get("StackEvents") or []
        return cls(aws, stack_id, after=newest[0]["EventId"] if newest else None)

    def poll(self) -> list[dict[str, Any]]:
        new: list[dict[str, Any]] = []
        try:
            pages = (
                self.aws.client("cloudformation")
                .get_paginator("describe_stack_events")
                .paginate(StackName=self.stack_id)
            )
            for page in pages:  # newest first: stop at the first event already known
                for event in page.get("StackEvents", []):
                    if event["EventId"] == self.after or event["EventId"] in self._seen:
                        break
                    new.append(event)
                else:
                    continue
                break
        except ClientError as exc:
            if not (error_code(exc) == "ValidationError" and "does not exist" in str(exc)):
                raise DeployError(f"DescribeStackEvents failed: {error_message(exc)}") from None
            # deleted and forgotten (moto forgets a deleted stack): no events to tell
        except BotoCoreError as exc:
            raise DeployError(f"DescribeStackEvents failed: {exc}") from None
        new.reverse()
        self._seen.update(e["EventId"] for e in new)
        self.events.extend(new)
        return new


@dataclass(frozen=True)
class Outcome:
    status: str
    ok: bool
    failures: list[str]  # "Resource (Type) STATUS: reason", in the order they happened


def _failures(feed: EventFeed, description: dict[str, Any] | None) -> list[str]:
    out = [
        f"{e['LogicalResourceId']} ({e.get('ResourceType', '?')}) {e['ResourceStatus']}: "
        f"{e.get('ResourceStatusReason') or 'no reason given'}"
        for e in feed.events
        if e["ResourceStatus"].endswith("_FAILED")
    ]
    reason = (description or {}).get("StackStatusReason")
    if reason and not any(reason in line for line in out):
        out.append(f"{(description or {}).get('StackName', 'the stack')}: {reason}")
    return out


def wait_for_stack(
    aws: AwsSession,
    stack_id: str,
    *,
    operation: str,
    what: str,
    feed: EventFeed,
    progress: Progress,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float = STACK_WAIT_S,
) -> Outcome:
    """Report the stack's events until `operation` (CREATE, UPDATE or DELETE) ends; its outcome."""
    last: dict[str, Any] = {}

    def report_new_events() -> None:
        for event in feed.poll():
            progress.event(format_event(event))
            if on_event is not None:
                on_event(event)

    def ended() -> str | None:
        report_new_events()
        description = describe_stack(aws, stack_id)
        if description is None:  # gone: deleted (moto forgets a deleted stack)
            return "DELETE_COMPLETE"
        last["description"] = description
        status = str(description["StackStatus"])
        return None if status.endswith("_IN_PROGRESS") else status

    status = wait_until(
        ended,
        what=what,
        timeout_s=timeout_s,
        progress=progress,
        hint="CloudFormation goes on: follow it with `pedl deploy aws describe` or the AWS console",
    )
    report_new_events()  # those that came with the final status
    ok = status == f"{operation}_COMPLETE"
    return Outcome(status, ok, [] if ok else _failures(feed, last.get("description")))
