"""What an AWS agent boots with, and how the master reaches EC2: the instance's UserData (the
agent's bootstrap), the region, and EC2 clients from one shared boto3 session."""

from __future__ import annotations

import base64
import logging
import os
import shlex
import threading
from typing import Any

import boto3.session
import httpx
from botocore.config import Config as BotoConfig

from pedl.master.provisioner.master_address import imds_get
from pedl.master.provisioner.providers.base import CloudError, CloudErrorKind

log = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
# botocore retries once at most; the provisioner owns backoff (and shows it to users)
BOTO_CONFIG = BotoConfig(
    retries={"total_max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30, user_agent_extra="pedl"
)

USER_DATA_LIMIT = 16 * 1024  # EC2's limit, before base64
SECRET_PLACEHOLDER = "x" * 43  # as long as an enrollment secret: the size is checked before one is made
STARTUP_SCRIPT_PATH = "/usr/local/pedl/startup_script"
PACKAGE_PATH = "/api/v1/pedl/package"

# Install the master's own pedl unless the image has that version: a stock GPU image (an AWS Deep
# Learning AMI) needs no custom AMI. The wheel comes from the master (with the instance's enrollment
# secret, valid until the agent registers); its dependencies from the image's package index. PEDL_HOME
# and PEDL_IMDS_URL only exist so tests can sandbox this.
_INSTALL = """\
PEDL_BIN=$(command -v pedl || true)
installed=""
if [ -n "$PEDL_BIN" ]; then
  PEDL_PY=$(head -n 1 "$PEDL_BIN" | sed 's/^#!//')
  installed=$("$PEDL_PY" -c 'import pedl.version; print(pedl.version.__version__)' 2>/dev/null || true)
fi
if [ "$installed" != "$PEDL_VERSION" ]; then
  echo "pedl: installing pedl $PEDL_VERSION from the master (the image has ${installed:-none})"
  PY=""
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY=$candidate; break
    fi
  done
  if [ -z "$PY" ]; then
    echo "pedl: this image has no Python 3.11 or newer; install one in the pool's startup script" >&2
    exit 1
  fi
  mkdir -p "$PEDL_HOME"
  WHEEL="$PEDL_HOME/pedl-$PEDL_VERSION-py3-none-any.whl"
  @CURL@ ${PEDL_MASTER_CERT:+--cacert "$PEDL_MASTER_CERT"} -H "X-Pedl-Agent-Token: ${PEDL_AGENT_TOKEN:-}" \\
    "$PEDL_MASTER@PACKAGE@" -o "$WHEEL" || {
    echo "pedl: could not download pedl $PEDL_VERSION from $PEDL_MASTER@PACKAGE@ (401: wrong or used secret)" >&2
    exit 1; }
  "$PY" -m venv --system-site-packages "$PEDL_HOME/venv"
  "$PEDL_HOME/venv/bin/pip" install --quiet "$WHEEL" || {
    echo "pedl: could not install pedl $PEDL_VERSION with $PY; its dependencies come from this image's pip index" >&2
    exit 1; }
  PEDL_BIN="$PEDL_HOME/venv/bin/pedl"
fi"""


def agent_user_data(
    *,
    master_url: str,
    pool: str,
    slots: int,
    spot: bool,
    startup_script: str = "",
    enrollment_secret: str | None = None,
    version: str | None = None,
    master_ca: str | None = None,
) -> str:
    """The instance's UserData: run the config's startup_script, learn the instance id through
    IMDSv2, install the master's pedl when the image lacks that version, then become `pedl agent run`
    with that id. User data is readable through IMDS by every process on the instance, tasks included,
    so `enrollment_secret` is never the cluster's agent token but this instance's single-use secret: the
    master takes it once, from the agent with this instance's id, and issues the agent a credential of its
    own (kept in its work dir) before any task can run here. It travels in the environment, not in argv
    (where `ps` would show it), and the agent removes it from its environment as it starts. `master_ca`
    (PEM) is what the agent, its tasks and the download verify an https:// master against."""
    from pedl.version import __version__

    lines = ["#!/bin/bash", "# pedl agent bootstrap, written by the pedl master", "set -e -o pipefail"]
    if startup_script.strip():
        # a file of its own, as Determined does: it may have its own shebang, and an `exit` in it
        # must not skip the agent
        encoded = base64.b64encode(startup_script.encode()).decode()
        lines += [
            "mkdir -p /usr/local/pedl",
            f"echo {encoded} | base64 --decode > {STARTUP_SCRIPT_PATH}",
            f"chmod +x {STARTUP_SCRIPT_PATH}",
            STARTUP_SCRIPT_PATH,
        ]
    curl = "curl -sSf --retry 10 --retry-connrefused --retry-delay 1"
    lines += [
        "IMDS=${PEDL_IMDS_URL:-http://169.254.169.254}",
        f'IMDS_TOKEN=$({curl} -X PUT "$IMDS/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
        f'INSTANCE_ID=$({curl} -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" "$IMDS/latest/meta-data/instance-id")',
    ]
    if enrollment_secret:
        lines.append(f"export PEDL_AGENT_TOKEN={shlex.quote(enrollment_secret)}")
    lines.append("PEDL_HOME=${PEDL_HOME:-/usr/local/pedl}")
    if master_ca:
        encoded_ca = base64.b64encode(master_ca.encode()).decode()
        lines += [
            'mkdir -p "$PEDL_HOME"',
            f'echo {encoded_ca} | base64 --decode > "$PEDL_HOME/master-ca.pem"',
            'export PEDL_MASTER_CERT="$PEDL_HOME/master-ca.pem"',
        ]  # `pedl agent run` and its tasks read it
    lines += [
        f"PEDL_VERSION={shlex.quote(version or __version__)}",
        f"PEDL_MASTER={shlex.quote(master_url.rstrip('/'))}",
        _INSTALL.replace("@CURL@", "curl -sSf --retry 30 --retry-connrefused --retry-delay 2").replace(
            "@PACKAGE@", PACKAGE_PATH
        ),
    ]
    argv = [
        'exec "$PEDL_BIN" agent run',
        "--master",
        '"$PEDL_MASTER"',
        "--id",
        '"$INSTANCE_ID"',
        "--resource-pool",
        shlex.quote(pool),
    ]
    if slots > 0:
        argv += ["--slots", str(slots)]
    if spot:
        argv.append("--spot-watch")
    lines.append(" ".join(argv))
    return "\n".join(lines) + "\n"


def sized(script: str) -> str:
    """The user data, if EC2 takes it; a config error naming startup_script otherwise."""
    if len(script.encode()) > USER_DATA_LIMIT:
        raise CloudError(
            CloudErrorKind.INVALID_CONFIG,
            f"startup_script is too long: the instance user data would be {len(script.encode())} "
            f"bytes, EC2 allows {USER_DATA_LIMIT}",
            "UserDataTooLarge",
        )
    return script


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
    log.warning(
        "aws provider: no region configured and none found in the environment or the instance metadata; using %s",
        DEFAULT_REGION,
    )
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
