"""The master instance's user data: a bash script, embedded in the template through Fn::Sub so that
stack values (the data volume, the bucket, the database secret) reach it. It installs pedl at the
deploying CLI's version into a virtual environment, from the wheel `up` uploads to the cluster's bucket
(the name `pedl` on PyPI is another project's), formats (once) and mounts the data volume, writes
master.yaml and enables the master as a systemd service.

cloud-init runs it at first boot. It also installs pedl-boot.service, which runs the instance's then
current user data at every later boot: `up` with a newer pedl changes the user data, CloudFormation
stops and starts the instance (no replacement, the data volume stays attached), and the master comes
back upgraded. Every step is idempotent; the master is stopped while the script runs."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pedl.deploy import logical_ids as ids
from pedl.deploy.master_config_doc import (
    CONFIG_PATH,
    CONFIG_TEMPLATE_PATH,
    DATA_DIR,
    DB_HOST_VARIABLE,
    PEDL_HOME,
    SERVICE_USER,
    StackValues,
    master_config_yaml,
    stack_placeholders,
)
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_parts import get_att, placeholder

DEVICE = "/dev/sdf"  # where the data volume is attached; Nitro instances show it as an NVMe disk instead
LOG = "/var/log/pedl-boot.log"
USER_DATA_LIMIT = 16 * 1024  # EC2's limit on user data, before base64
WHEEL_PREFIX = "pedl-cluster/"  # in the checkpoint bucket, beside the TLS CA (master_boot.CA_KEY)
WHEEL_WAIT_S = 1800  # how long a booting master waits for `up` to upload the wheel
WHEEL_POLL_S = 10
_SUB = re.compile(r"\$\{(!?)([^}]*)\}")
_SHA256 = re.compile(r"[0-9a-f]{64}")

# Bash without `${`: Fn::Sub would take it for one of its own placeholders.
_SCRIPT = r"""#!/bin/bash
# pedl master bootstrap of cluster @CLUSTER@ (pedl @VERSION@), written by `pedl deploy aws`.
# See pedl/deploy/master_user_data.py: it runs at every boot and each step is idempotent.
set -euo pipefail
umask 022
exec > >(tee -a @LOG@) 2>&1
echo "pedl boot $(date -u +%FT%TZ): cluster @CLUSTER@, pedl @VERSION@"
PEDL_HOME=@PEDL_HOME@
VENV=$PEDL_HOME/venv
@PACKAGE_VARIABLES@VERSION=@VERSION@
DATA_DIR=@DATA_DIR@
SERVICE_USER=@USER@
CONFIG=@CONFIG@
CONFIG_TEMPLATE=@CONFIG_TEMPLATE@
VOLUME_ID=@VOLUME_ID@
REGION=@REGION@

# the master does not run while its software, data volume and config change; stopping it leaves its
# agents and their trials running (the unit's KillMode=process)
if systemctl is-active --quiet pedl-master; then systemctl stop pedl-master; fi

# 1. Python 3.11 or newer with venv, and pedl at the deploying CLI's version
pick_python() {
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null \
        && "$candidate" -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
if ! PY=$(pick_python); then
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q python3-venv
  elif command -v dnf >/dev/null; then
    dnf install -y -q python3.11
  fi
  PY=$(pick_python) || { echo "pedl boot: no Python 3.11 or newer with venv on this image" >&2; exit 1; }
fi
installed=$("$VENV/bin/python" -c 'import pedl.version; print(pedl.version.__version__)' 2>/dev/null || true)
installed_sha256=$(cat "$PEDL_HOME/wheel.sha256" 2>/dev/null || true)
if [ "$installed" != "$VERSION" ] || [ "$installed_sha256" != "$WHEEL_SHA256" ]; then
  "$PY" -m venv "$VENV"
@INSTALL@  # another project could answer to the name: the package must be this pedl, at this version
  installed=$("$VENV/bin/python" -c 'import pedl.deploy.master_boot, pedl.version; print(pedl.version.__version__)' \
    2>/dev/null || true)
  if [ "$installed" != "$VERSION" ]; then
    echo "pedl boot: $PACKAGE did not install pedl $VERSION (found: $installed)" >&2; exit 1
  fi
  echo "$WHEEL_SHA256" > "$PEDL_HOME/wheel.sha256"
fi

# 2. the data volume: found by its volume id, formatted only when it holds nothing at all, mounted
id -u "$SERVICE_USER" >/dev/null 2>&1 \
  || useradd --system --home-dir "$DATA_DIR" --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
serial=$(echo "$VOLUME_ID" | tr -d -)
device=""
for _ in $(seq 1 180); do
  for candidate in /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_$serial @DEVICE@ @XEN_DEVICE@; do
    if [ -b "$candidate" ]; then device=$(readlink -f "$candidate"); break 2; fi
  done
  sleep 5
done
[ -n "$device" ] || { echo "pedl boot: the data volume $VOLUME_ID never appeared" >&2; exit 1; }
if ! blkid -p "$device" >/dev/null 2>&1; then
  echo "pedl boot: formatting the new data volume $VOLUME_ID ($device)"
  mkfs.ext4 -q -L pedl-data "$device"
fi
uuid=$(blkid -s UUID -o value "$device")
mkdir -p "$DATA_DIR"
grep -q "UUID=$uuid " /etc/fstab || echo "UUID=$uuid $DATA_DIR ext4 defaults,nofail 0 2" >> /etc/fstab
mountpoint -q "$DATA_DIR" || mount "$DATA_DIR"
chown "$SERVICE_USER:$SERVICE_USER" "$DATA_DIR"
chmod 750 "$DATA_DIR"

# 3. master.yaml: the stack's values (below), then the agent token, TLS files and database login
mkdir -p "$(dirname "$CONFIG")"
cat > "$CONFIG_TEMPLATE" <<'PEDL_MASTER_YAML'
@MASTER_YAML@PEDL_MASTER_YAML
"$VENV/bin/python" -m pedl.deploy.master_boot --config-template "$CONFIG_TEMPLATE" --config "$CONFIG" \
  --data-dir "$DATA_DIR" --user "$SERVICE_USER" --region "$REGION"@BOOT_ARGS@

# 4. the service: the master never starts on the root disk's empty mount point, and this script runs
# again at every later boot (pedl-boot.service fetches the instance's current user data)
mkdir -p /etc/systemd/system/pedl-master.service.d "$PEDL_HOME/bin"
printf '[Unit]\nRequiresMountsFor=%s\n' "$DATA_DIR" > /etc/systemd/system/pedl-master.service.d/data-volume.conf
cat > "$PEDL_HOME/bin/pedl-boot" <<'PEDL_BOOT'
#!/bin/bash
set -euo pipefail
IMDS=http://169.254.169.254
CURL="curl -sSf --retry 10 --retry-connrefused"
token=$($CURL -X PUT "$IMDS/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
$CURL -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/user-data" -o @PEDL_HOME@/user-data.sh
exec bash @PEDL_HOME@/user-data.sh
PEDL_BOOT
chmod 755 "$PEDL_HOME/bin/pedl-boot"
cat > /etc/systemd/system/pedl-boot.service <<'PEDL_BOOT_UNIT'
[Unit]
Description=pedl master bootstrap (the instance's current user data) at every boot after the first
Wants=network-online.target
After=network-online.target cloud-final.service
[Service]
Type=oneshot
ExecStart=@PEDL_HOME@/bin/pedl-boot
TimeoutStartSec=1800
[Install]
WantedBy=multi-user.target
PEDL_BOOT_UNIT
systemctl daemon-reload
systemctl enable pedl-boot.service
"$VENV/bin/pedl" master install-service --config "$CONFIG" --user "$SERVICE_USER"
echo "pedl boot: done; the master runs as pedl-master.service (journalctl -u pedl-master)"
"""

# pip installs a wheel it is given; a requirement or URL of --package (tests) as is
_INSTALL_PACKAGE = r"""  echo "pedl boot: installing $PACKAGE into $VENV (installed: $installed)"
  "$VENV/bin/pip" install --quiet --upgrade "$PACKAGE"
"""
# the wheel `up` uploads to the bucket, fetched through the instance's role (boto3 in the venv first),
# waited for (`up` uploads it once the bucket exists) and checked against the sha256 `up` computed
_INSTALL_WHEEL = r"""  echo "pedl boot: installing pedl $VERSION from the bucket (installed: $installed)"
  "$VENV/bin/pip" install --quiet --upgrade boto3
  mkdir -p "$PEDL_HOME/wheels"
  PACKAGE=$PEDL_HOME/wheels/$(basename "$WHEEL_KEY")
  "$VENV/bin/python" - "$WHEEL_BUCKET" "$WHEEL_KEY" "$WHEEL_SHA256" "$PACKAGE" "$REGION" @WAIT@ \
    <<'PEDL_FETCH_WHEEL'
import hashlib
import sys
import time

import boto3
from botocore.exceptions import BotoCoreError, ClientError

bucket, key, sha256, dest, region, wait, poll = sys.argv[1:8]
s3 = boto3.client("s3", region_name=region)
deadline = time.monotonic() + float(wait)
url = "s3://" + bucket + "/" + key
while True:
    try:
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        found = hashlib.sha256(data).hexdigest()
        if not sha256 or found == sha256:
            with open(dest, "wb") as f:
                f.write(data)
            print("pedl boot: fetched " + url + " (sha256 " + found + ")", flush=True)
            break
        problem = "it has sha256 " + found + ", not " + sha256
    except (ClientError, BotoCoreError) as exc:
        problem = str(exc)
    if time.monotonic() >= deadline:
        sys.exit("pedl boot: gave up waiting for " + url + " after " + wait + " s (" + problem
                 + "); run `pedl deploy aws up` again, which uploads it")
    print("pedl boot: waiting for " + url + ", which `pedl deploy aws up` uploads: " + problem, flush=True)
    time.sleep(float(poll))
PEDL_FETCH_WHEEL
  "$VENV/bin/pip" install --quiet "$PACKAGE"
  # the same version built from other sources (a development build): replace pedl's own files
  "$VENV/bin/pip" install --quiet --force-reinstall --no-deps "$PACKAGE"
"""


def wheel_key(version: str) -> str:
    """Where `up` puts the wheel of pedl `version` in the checkpoint bucket."""
    from pedl.common.package import wheel_filename

    return WHEEL_PREFIX + wheel_filename(version)


def master_user_data(
    options: DeployOptions,
    values: StackValues | None = None,
    *,
    volume_id: str | None = None,
    db_secret: str | None = None,
    elastic_ip: str | None = None,
    wheel_sha256: str | None = None,
) -> str:
    """The script, with `${...}` placeholders for Fn::Sub unless sample values are given (tests).
    It installs the wheel at wheel_key() in the bucket, checked against `wheel_sha256` when given,
    or with options.package (tests) that requirement, URL or path instead."""
    placeholders = values is None
    values = values or stack_placeholders(options)
    if placeholders:
        volume_id = placeholder(ids.DATA_VOLUME)
        db_secret = placeholder(ids.DB_SECRET) if options.db == "rds" else None
        elastic_ip = placeholder(ids.ELASTIC_IP) if options.elastic_ip else None
    boot_args = ""
    if options.db == "rds":
        boot_args += f" \\\n  --db-secret {_word(db_secret or '')}"
    if options.tls:
        boot_args += f" \\\n  --tls --bucket {_word(values.bucket)}"
        if elastic_ip:
            boot_args += f" --tls-ip {_word(elastic_ip)}"
    if wheel_sha256 is not None and not _SHA256.fullmatch(wheel_sha256):
        raise ValueError(f"wheel_sha256: {wheel_sha256!r} is not a hex SHA-256 digest")
    if options.package:
        install = _INSTALL_PACKAGE
        package_variables = f"PACKAGE={shlex.quote(options.package)}\nWHEEL_SHA256=\n"
    else:
        install = _INSTALL_WHEEL.replace("@WAIT@", f"{WHEEL_WAIT_S} {WHEEL_POLL_S}")
        package_variables = (
            f"WHEEL_BUCKET={_word(values.bucket)}\nWHEEL_KEY={wheel_key(options.pedl_version)}\n"
            f"WHEEL_SHA256={wheel_sha256 or ''}\n"
        )
    text = _SCRIPT.replace("@INSTALL@", install)
    for key, value in {
        "@BOOT_ARGS@": boot_args,
        "@CLUSTER@": options.cluster_id,
        "@VERSION@": options.pedl_version,
        "@PEDL_HOME@": PEDL_HOME,
        "@DATA_DIR@": DATA_DIR,
        "@USER@": SERVICE_USER,
        "@CONFIG@": CONFIG_PATH,
        "@CONFIG_TEMPLATE@": CONFIG_TEMPLATE_PATH,
        "@VOLUME_ID@": _word(volume_id or ""),
        "@REGION@": _word(values.region),
        "@DEVICE@": DEVICE,
        "@XEN_DEVICE@": DEVICE.replace("/dev/sd", "/dev/xvd"),
        "@LOG@": LOG,
        "@PACKAGE_VARIABLES@": package_variables,  # with the next, after the markers: values are not markers
        "@MASTER_YAML@": master_config_yaml(options, values),
    }.items():
        text = text.replace(key, value)
    return text


def user_data_variables(options: DeployOptions) -> dict[str, Any]:
    """Fn::Sub's variables besides the stack's names: the database's address as a variable, since
    `${Database.Endpoint.Address}` has a dot too many for moto's Fn::Sub (CloudFormation takes both)."""
    return {DB_HOST_VARIABLE: get_att(ids.DATABASE, "Endpoint.Address")} if options.db == "rds" else {}


def _word(value: str) -> str:
    """A shell word; a `${...}` placeholder stays bare (CloudFormation's values need no quoting)."""
    return value if _SUB.fullmatch(value) else shlex.quote(value)


def placeholders_in(text: str) -> set[str]:
    """The names an Fn::Sub string refers to (`${!x}` is a literal `${x}`, not a reference)."""
    return {m.group(2) for m in _SUB.finditer(text) if not m.group(1)}


def fn_sub(text: str, values: Mapping[str, str]) -> str:
    """What CloudFormation's Fn::Sub makes of `text`: for tests that run or read the rendered script.
    A placeholder without a value is a KeyError."""
    return _SUB.sub(lambda m: placeholder(m.group(2)) if m.group(1) else values[m.group(2)], text)
