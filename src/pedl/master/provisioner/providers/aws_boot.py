"""What an AWS agent boots with, and how the master reaches EC2: the instance's UserData (the
agent's bootstrap), the region, and EC2 clients from one shared boto3 session."""

from __future__ import annotations

import base64
import logging
import os
import shlex
import threading
from typing import Any

import boto3
import httpx
from botocore.config import Config as BotoConfig

from pedl.master.provisioner.master_address import imds_get

log = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
# botocore retries once at most; the provisioner owns backoff (and shows it to users)
BOTO_CONFIG = BotoConfig(retries={"total_max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30,
                         user_agent_extra="pedl")

STARTUP_SCRIPT_PATH = "/usr/local/pedl/startup_script"


def agent_user_data(*, master_url: str, pool: str, slots: int, spot: bool, startup_script: str = "",
                    agent_token: str | None = None) -> str:
    """The instance's UserData: run the config's startup_script, learn the instance id through
    IMDSv2, then become `pedl agent run` with that id. The agent token travels in the environment,
    not in argv (where `ps` would show it)."""
    lines = ["#!/bin/bash", "# pedl agent bootstrap, written by the pedl master", "set -e -o pipefail"]
    if startup_script.strip():
        # a file of its own, as Determined does: it may have its own shebang, and an `exit` in it
        # must not skip the agent
        encoded = base64.b64encode(startup_script.encode()).decode()
        lines += ["mkdir -p /usr/local/pedl",
                  f"echo {encoded} | base64 --decode > {STARTUP_SCRIPT_PATH}",
                  f"chmod +x {STARTUP_SCRIPT_PATH}",
                  STARTUP_SCRIPT_PATH]
    curl = "curl -sSf --retry 10 --retry-connrefused --retry-delay 1"
    lines += ["IMDS=http://169.254.169.254",
              f'IMDS_TOKEN=$({curl} -X PUT "$IMDS/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
              f'INSTANCE_ID=$({curl} -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" "$IMDS/latest/meta-data/instance-id")']
    if agent_token:
        lines.append(f"export PEDL_AGENT_TOKEN={shlex.quote(agent_token)}")
    argv = ["exec pedl agent run", "--master", shlex.quote(master_url), "--id", '"$INSTANCE_ID"',
            "--resource-pool", shlex.quote(pool)]
    if slots > 0:
        argv += ["--slots", str(slots)]
    if spot:
        argv.append("--spot-watch")
    lines.append(" ".join(argv))
    return "\n".join(lines) + "\n"


def resolve_region(configured: str | None) -> str:
    """The config's region; else the environment's (AWS_REGION, AWS_DEFAULT_REGION, as every AWS
    SDK does); else the master's own, from instance metadata; else us-east-1, with a warning."""
    if configured:
        return configured
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env:
        return env
    try:
        region = imds_get("placement/region", timeout=1.0)
        if region:
            return region
    except httpx.HTTPError:
        pass
    log.warning("aws provider: no region configured and none found in the environment or the instance "
                "metadata; using %s", DEFAULT_REGION)
    return DEFAULT_REGION


_session: boto3.session.Session | None = None
_session_lock = threading.Lock()


def make_ec2_client(region: str, endpoint_url: str | None = None) -> Any:
    """An EC2 client from one shared session: the session caches the service model (loading it
    takes a third of a second) and the credentials; sessions are not thread-safe, clients are."""
    global _session
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=BOTO_CONFIG)
