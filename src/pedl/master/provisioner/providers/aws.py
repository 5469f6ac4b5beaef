"""The AWS provider: agents are EC2 instances (on-demand or one-time spot requests) found again by
the configured tag pair and the pool tag. It makes only the calls of the seeds' IAM policy. Each
instance is launched by a call of its own, so that its user data carries an enrollment secret of its
own (single-use, bound to that instance), never the cluster's agent token."""

from __future__ import annotations

import base64
import logging
import threading
from collections import Counter, OrderedDict
from datetime import UTC, datetime
from typing import Any

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from pedl.config.provider_config import AWSProviderConfig
from pedl.master.provisioner.providers.aws_boot import (
    SECRET_PLACEHOLDER,
    agent_user_data,
    make_ec2_client,
    resolve_region,
    sized,
)
from pedl.master.provisioner.providers.aws_errors import NOT_FOUND_CODES, classify_error
from pedl.master.provisioner.providers.aws_iam import ALLOWED_OPERATIONS, UnlistedOperation
from pedl.master.provisioner.providers.aws_records import (
    LIVE_STATES,
    POOL_TAG,
    TOKEN_TAG,
    chunks,
    client_token,
    instance_state,
    is_ours,
    launch_spec,
    ownership_filters,
    requested_instance,
    spot_price,
    tag_dict,
    tags,
    to_cloud,
)
from pedl.master.provisioner.providers.base import (
    CloudError,
    CloudInstance,
    CloudState,
    ForeignInstance,
    InstanceSecrets,
    LaunchRequest,
)

log = logging.getLogger(__name__)

REMEMBERED_TOKENS = 512
SPOT_VALID_MARGIN = 300.0  # an open request expires by itself this long after pedl would cancel it


# -- the provider ------------------------------------------------------------------------------


class AWSProvider:
    """See providers/base.py for the contract. Ownership is the tag pair plus the pool tag; spot
    instances are tagged (CreateTags) as soon as their request is seen fulfilled, since EC2 puts a
    spot request's tags on the request only."""

    name = "aws"

    def __init__(
        self,
        cfg: AWSProviderConfig,
        *,
        pool: str,
        cluster_id: str,
        master_url: str,
        instance_secrets: InstanceSecrets | None,
        clock: Any,
        client: Any = None,
        master_ca: str | None = None,
    ) -> None:
        self.cfg, self.pool, self.cluster_id, self.master_url = cfg, pool, cluster_id, master_url
        # makes each instance's single-use enrollment secret (None: its user data carries none)
        self.instance_secrets, self.clock = instance_secrets, clock
        self.master_ca = master_ca  # PEM the agents verify an https:// master against (through user data)
        self.region = resolve_region(cfg.region) if client is None else client.meta.region_name
        self.client = client if client is not None else make_ec2_client(self.region, cfg.endpoint_url)
        self.operations: Counter[str] = Counter()  # API calls made, by operation name
        self.attempts: Counter[str] = Counter()  # HTTP requests sent (calls plus botocore's retries)
        self.client.meta.events.register("before-call.ec2", self._before_call)
        self.client.meta.events.register("before-send.ec2", self._before_send)
        self._launch_lock = threading.Lock()
        self._launched: OrderedDict[str, list[CloudInstance]] = OrderedDict()
        self._requested_at: dict[str, float] = {}  # spot request id -> when this master asked for it
        self._spot_used = cfg.spot

    # -- plumbing ------------------------------------------------------------------------------

    def _before_call(self, model: Any, **_: Any) -> None:
        if model.name not in ALLOWED_OPERATIONS:
            raise UnlistedOperation(f"ec2:{model.name} is not in the master's IAM policy")
        self.operations[model.name] += 1

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        self.attempts[event_name.rsplit(".", 1)[-1]] += 1

    def _call(self, operation: str, **params: Any) -> dict:
        method = getattr(self.client, xform_name(operation))
        try:
            return method(**params)
        except (ClientError, BotoCoreError) as exc:
            raise classify_error(exc, operation) from exc

    def _paginate(self, operation: str, key: str, **params: Any) -> list[dict]:
        try:
            out: list[dict] = []
            for page in self.client.get_paginator(xform_name(operation)).paginate(**params):
                out.extend(page.get(key) or [])
            return out
        except (ClientError, BotoCoreError) as exc:
            raise classify_error(exc, operation) from exc

    def _describe_instances(self, filters: list[dict]) -> list[dict]:
        reservations = self._paginate("DescribeInstances", "Reservations", Filters=filters)
        return [i for r in reservations for i in r.get("Instances") or []]

    def _instances_by_id(self, ids: list[str]) -> dict[str, dict]:
        """Instances by id, whatever their tags or state; unknown ids are simply absent (a filter,
        unlike InstanceIds=, does not fail the whole call on one unknown id)."""
        out: dict[str, dict] = {}
        for chunk in chunks(sorted(set(ids))):
            for inst in self._describe_instances([{"Name": "instance-id", "Values": chunk}]):
                out[inst["InstanceId"]] = inst
        return out

    def _describe_spot_requests(self, filters: list[dict]) -> list[dict]:
        return self._paginate("DescribeSpotInstanceRequests", "SpotInstanceRequests", Filters=filters)

    def _requested(self, req: dict) -> CloudInstance:
        asked_at = self._requested_at.get(req["SpotInstanceRequestId"])
        return requested_instance(req, asked_at, self.clock.now())

    # -- list ----------------------------------------------------------------------------------

    def list_instances(self) -> list[CloudInstance]:
        found = {
            i["InstanceId"]: i
            for i in self._describe_instances(
                [*ownership_filters(self.cfg, self.pool), {"Name": "instance-state-name", "Values": list(LIVE_STATES)}]
            )
        }
        out = [to_cloud(i, self.clock.now()) for i in found.values()]
        if not self._spot_used:
            return out  # without spot the IAM policy may lack the spot calls
        requests = self._describe_spot_requests(
            [*ownership_filters(self.cfg, self.pool), {"Name": "state", "Values": ["open", "active"]}]
        )
        by_id = {c.id: n for n, c in enumerate(out)}
        fulfilled: dict[str, dict] = {}
        for req in requests:
            inst_id = req.get("InstanceId")
            if not inst_id:
                if req.get("State") == "open":
                    out.append(self._requested(req))
                continue
            if inst_id in by_id:  # moto leaves the instance's own SpotInstanceRequestId empty: join here
                n = by_id[inst_id]
                if out[n].spot_request_id is None:
                    out[n] = to_cloud(found[inst_id], self.clock.now(), req["SpotInstanceRequestId"])
            else:
                fulfilled[inst_id] = req
        if fulfilled:
            out += self._adopt_fulfilled(fulfilled)
        return out

    def _adopt_fulfilled(self, requests_by_instance: dict[str, dict]) -> list[CloudInstance]:
        """Instances of our fulfilled spot requests that do not carry our tags yet: tag them (and
        their volumes) so that they are found by tag from now on, after a restart too."""
        instances = self._instances_by_id(list(requests_by_instance))
        out, to_tag = [], []
        for inst_id, req in requests_by_instance.items():
            inst = instances.get(inst_id)
            rid = req["SpotInstanceRequestId"]
            if inst is None:  # EC2 is eventually consistent: fulfilled, but not described yet
                spec = req.get("LaunchSpecification") or {}
                out.append(
                    CloudInstance(
                        inst_id,
                        spec.get("InstanceType", ""),
                        CloudState.PENDING,
                        self.clock.now(),
                        spot=True,
                        spot_request_id=rid,
                    )
                )
                continue
            if instance_state(inst) not in LIVE_STATES:
                continue
            if not is_ours(self.cfg, self.pool, inst):
                volumes = [
                    m["Ebs"]["VolumeId"]
                    for m in inst.get("BlockDeviceMappings") or []
                    if (m.get("Ebs") or {}).get("VolumeId")
                ]
                to_tag.append(([inst_id, *volumes], tag_dict(req).get(TOKEN_TAG)))
            out.append(to_cloud(inst, self.clock.now(), rid))
        for resources, token in to_tag:
            try:
                self._call("CreateTags", Resources=resources, Tags=tags(self.cfg, self.pool, self.cluster_id, token))
            except CloudError as exc:  # still reported (through its request); tagging is retried next time
                log.warning("aws provider: cannot tag spot instance %s: %s", resources[0], exc)
        return out

    # -- launch --------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> list[CloudInstance]:
        if request.count <= 0:
            return []
        with self._launch_lock:
            if request.token in self._launched:
                return list(self._launched[request.token])
            # EC2 honours ClientToken; moto does not, and a restarted master has no memory: the
            # token tag finds a launch that went through before a crash or a lost response
            again = self._find_launch(request)
            if again is not None:
                created = again
            elif request.spot:
                created = self._request_spot(request)
            else:
                created = self._run_instances(request)
            self._launched[request.token] = created
            while len(self._launched) > REMEMBERED_TOKENS:
                self._launched.popitem(last=False)
            return list(created)

    def _find_launch(self, request: LaunchRequest) -> list[CloudInstance] | None:
        token_filter = [
            *ownership_filters(self.cfg, self.pool),
            {"Name": f"tag:{TOKEN_TAG}", "Values": [request.token]},
        ]
        if request.spot:
            requests = self._describe_spot_requests(token_filter)
            if not requests:
                return None
            out = [self._requested(r) for r in requests if r.get("State") == "open" and not r.get("InstanceId")]
            fulfilled = {r["InstanceId"]: r for r in requests if r.get("InstanceId")}
            return out + (self._adopt_fulfilled(fulfilled) if fulfilled else [])
        instances = self._describe_instances(token_filter)
        if not instances:
            return None
        return [to_cloud(i, self.clock.now()) for i in instances if instance_state(i) in LIVE_STATES]

    def _user_data(self, request: LaunchRequest, secret: str | None) -> str:
        return sized(
            agent_user_data(
                master_url=self.master_url,
                pool=self.pool,
                slots=request.slots,
                spot=request.spot,
                startup_script=self.cfg.startup_script,
                enrollment_secret=secret,
                master_ca=self.master_ca,
            )
        )

    def _secret(self, request: LaunchRequest) -> str | None:
        """A new single-use enrollment secret for one instance of this launch (stored before the call)."""
        self._user_data(request, SECRET_PLACEHOLDER)  # a config error fails before anything is stored
        return self.instance_secrets.issue(request.token) if self.instance_secrets is not None else None

    def _bind(self, secret: str | None, resource_id: str) -> None:
        if secret is not None and self.instance_secrets is not None:
            self.instance_secrets.bind(secret, resource_id)

    def _run_instances(self, request: LaunchRequest) -> list[CloudInstance]:
        instance_tags = tags(self.cfg, self.pool, self.cluster_id, request.token)
        out: list[CloudInstance] = []
        for n in range(request.count):
            secret = self._secret(request)
            reply = self._call(
                "RunInstances",
                MinCount=1,
                MaxCount=1,
                ClientToken=client_token(request, n),
                UserData=self._user_data(request, secret),  # botocore base64-encodes it for RunInstances
                # IMDSv2 only; hop limit 2 so that task containers on a bridge network can still use
                # the instance role (S3 checkpoints), as AWS advises for containers
                MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
                # a shutdown from inside (a failed boot script, an admin) ends the instance, not a
                # stopped instance that keeps its volume and is never registered
                InstanceInitiatedShutdownBehavior="terminate",
                TagSpecifications=[
                    {"ResourceType": "instance", "Tags": instance_tags},
                    {"ResourceType": "volume", "Tags": instance_tags},
                ],
                **launch_spec(self.cfg, request),
            )
            for inst in reply.get("Instances") or []:
                self._bind(secret, inst["InstanceId"])
                out.append(to_cloud(inst, self.clock.now()))
        return out

    def _request_spot(self, request: LaunchRequest) -> list[CloudInstance]:
        now = self.clock.now()
        price = spot_price(self.cfg, request.instance_type)
        self._spot_used = True
        out: list[CloudInstance] = []
        fulfilled: dict[str, dict] = {}
        for n in range(request.count):
            secret = self._secret(request)
            spec = launch_spec(self.cfg, request)
            # RequestSpotInstances takes UserData already encoded, and has no MetadataOptions
            spec["UserData"] = base64.b64encode(self._user_data(request, secret).encode()).decode()
            params: dict[str, Any] = {
                "InstanceCount": 1,
                "Type": "one-time",
                "ClientToken": client_token(request, n),
                "LaunchSpecification": spec,
                "TagSpecifications": [
                    {
                        "ResourceType": "spot-instances-request",
                        "Tags": tags(self.cfg, self.pool, self.cluster_id, request.token),
                    }
                ],
                # a request left open by a master that died expires by itself
                "ValidUntil": datetime.fromtimestamp(now + self.cfg.spot_request_timeout + SPOT_VALID_MARGIN, tz=UTC),
            }
            if price:
                params["SpotPrice"] = price
            reply = self._call("RequestSpotInstances", **params)
            for req in reply.get("SpotInstanceRequests") or []:
                self._requested_at[req["SpotInstanceRequestId"]] = now
                if req.get("InstanceId"):  # moto fulfils at once; EC2 sometimes does
                    self._bind(secret, req["InstanceId"])
                    fulfilled[req["InstanceId"]] = req
                else:  # the instance that fulfils it later is found through the request
                    self._bind(secret, req["SpotInstanceRequestId"])
                    out.append(self._requested(req))
        if fulfilled:
            out += self._adopt_fulfilled(fulfilled)
        return out

    def spot_request_instance(self, request_id: str) -> str | None:
        """The instance that fulfilled one of this pool's spot requests; None while it is open."""
        req = self._spot_requests_by_id([request_id]).get(request_id)
        return req.get("InstanceId") if req is not None and is_ours(self.cfg, self.pool, req) else None

    # -- terminate -----------------------------------------------------------------------------

    def terminate(self, ids: list[str]) -> None:
        ids = list(dict.fromkeys(ids))
        request_ids = [i for i in ids if i.startswith("sir-")]
        instance_ids = [i for i in ids if not i.startswith("sir-")]
        requests = self._spot_requests_by_id(request_ids)
        instances = self._instances_by_id(instance_ids)

        # check everything before touching anything: one foreign id and nothing is done
        foreign = [rid for rid, req in requests.items() if not is_ours(self.cfg, self.pool, req)]
        untagged = [iid for iid, inst in instances.items() if not is_ours(self.cfg, self.pool, inst)]
        if untagged:
            launched_by_us = self._fulfilled_by_our_requests(untagged)
            foreign += [iid for iid in untagged if iid not in launched_by_us]
        if foreign:
            raise ForeignInstance(
                f"refusing to terminate {', '.join(sorted(foreign))}: not tagged "
                f"{self.cfg.tag_key}={self.cfg.tag_value} and {POOL_TAG}={self.pool}; nothing was terminated"
            )

        to_end = {iid for iid, inst in instances.items() if instance_state(inst) in LIVE_STATES}
        to_cancel = [rid for rid, req in requests.items() if req.get("State") in ("open", "active")]
        if to_cancel:
            self._tolerating_not_found("CancelSpotInstanceRequests", "SpotInstanceRequestIds", to_cancel)
            # a request fulfilled since it was listed (or between the look and the cancel) leaves
            # its instance running, untagged, under a cancelled request that no listing shows:
            # it goes too, or it would leak
            open_then = [rid for rid in to_cancel if not requests[rid].get("InstanceId")]
            spot_instances = {req["InstanceId"] for req in requests.values() if req.get("InstanceId")}
            spot_instances |= {
                req["InstanceId"] for req in self._spot_requests_by_id(open_then).values() if req.get("InstanceId")
            }
            to_end |= {
                iid
                for iid, inst in self._instances_by_id(sorted(spot_instances - to_end)).items()
                if instance_state(inst) in LIVE_STATES
            }
        if to_end:
            self._tolerating_not_found("TerminateInstances", "InstanceIds", sorted(to_end))

    def _spot_requests_by_id(self, ids: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for chunk in chunks(sorted(set(ids))):
            for req in self._describe_spot_requests([{"Name": "spot-instance-request-id", "Values": chunk}]):
                out[req["SpotInstanceRequestId"]] = req
        return out

    def _fulfilled_by_our_requests(self, instance_ids: list[str]) -> set[str]:
        """Of these untagged instances, those that one of our spot requests launched (a crash
        between fulfilment and CreateTags leaves them so)."""
        if not self._spot_used:
            return set()
        ours: set[str] = set()
        for chunk in chunks(instance_ids):
            for req in self._describe_spot_requests(
                [*ownership_filters(self.cfg, self.pool), {"Name": "instance-id", "Values": chunk}]
            ):
                if req.get("InstanceId"):
                    ours.add(req["InstanceId"])
        return ours

    def _tolerating_not_found(self, operation: str, key: str, ids: list[str]) -> None:
        """Already gone is success. EC2 fails a whole batch for one unknown id, so on NotFound the
        batch is retried one id at a time."""
        for chunk in chunks(ids):
            try:
                self._call(operation, **{key: chunk})
            except CloudError as exc:
                if exc.code not in NOT_FOUND_CODES:
                    raise
                for one in chunk:
                    try:
                        self._call(operation, **{key: [one]})
                    except CloudError as exc1:
                        if exc1.code not in NOT_FOUND_CODES:
                            raise

    def close(self) -> None:
        """Instances keep running when the master stops; only the HTTP connections are closed."""
        self.client.close()
