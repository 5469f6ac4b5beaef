"""The master's user data: valid bash once CloudFormation has substituted the stack's values, carrying
exactly the master.yaml of master_config_doc, installing pedl at the CLI's version and enabling the
service; small enough for EC2."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
import yaml

from pedl.deploy.master_config_doc import master_config_yaml
from pedl.deploy.master_user_data import (
    USER_DATA_LIMIT,
    fn_sub,
    master_user_data,
    placeholders_in,
    wheel_key,
)
from pedl.deploy.options import DeployOptions
from pedl.version import __version__
from tests.deploy.stack_samples import BUCKET, DB_SECRET, ELASTIC_IP, SUBSTITUTIONS, VOLUME, stack_values
from tests.deploy.template_samples import SUBNET, combination_id, combinations, options_for


def rendered(options: DeployOptions) -> str:
    """The script as the instance receives it (CloudFormation's Fn::Sub done with sample values)."""
    return fn_sub(master_user_data(options), SUBSTITUTIONS)


def heredoc(script: str, delimiter: str) -> str:
    m = re.search(rf"<<'{delimiter}'\n(.*?)^{delimiter}$", script, re.S | re.M)
    assert m, delimiter
    return m.group(1)


@pytest.mark.parametrize("combo", combinations()[::3], ids=combination_id)
def test_the_script_is_valid_bash(combo: tuple[Any, ...]) -> None:
    script = rendered(options_for(*combo))
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "${" not in script.replace("${PEDL", "")  # every placeholder was CloudFormation's


@pytest.mark.parametrize("combo", combinations()[::5], ids=combination_id)
def test_it_writes_the_master_yaml_of_the_deploy(combo: tuple[Any, ...]) -> None:
    options = options_for(*combo)
    values = stack_values(subnet=SUBNET if options.subnet_id else None, rds=options.db == "rds")
    assert heredoc(rendered(options), "PEDL_MASTER_YAML") == master_config_yaml(options, values)


def test_it_installs_the_clis_own_wheel_from_the_bucket_into_a_venv() -> None:
    digest = "ab" * 32
    options = options_for(False, "embedded", False, False, False, False)
    script = fn_sub(master_user_data(options, wheel_sha256=digest), SUBSTITUTIONS)
    assert f"VERSION={__version__}\n" in script and f"WHEEL_SHA256={digest}\n" in script
    assert f"WHEEL_BUCKET={BUCKET}\n" in script
    assert f"WHEEL_KEY=pedl-cluster/pedl-{__version__}-py3-none-any.whl\n" in script
    assert wheel_key(__version__) == f"pedl-cluster/pedl-{__version__}-py3-none-any.whl"
    assert '"$PY" -m venv "$VENV"' in script and "PEDL_FETCH_WHEEL" in script
    assert "pypi" not in script.lower() and "pedl==" not in script  # another project answers to `pedl` there
    # a new wheel of the same version (another sha256) is installed too
    assert '[ "$installed_sha256" != "$WHEEL_SHA256" ]' in script
    with pytest.raises(ValueError, match="wheel_sha256"):
        master_user_data(options, wheel_sha256="not-a-digest")


def test_package_overrides_the_bucket_s_wheel() -> None:
    override = rendered(
        options_for(False, "embedded", False, False, False, False, package="/srv/wheels/pedl-0.1.0-py3-none-any.whl")
    )
    assert "PACKAGE=/srv/wheels/pedl-0.1.0-py3-none-any.whl\nWHEEL_SHA256=\n" in override
    assert '"$VENV/bin/pip" install --quiet --upgrade "$PACKAGE"' in override
    assert "PEDL_FETCH_WHEEL" not in override and "WHEEL_BUCKET" not in override
    spaced = rendered(options_for(False, "embedded", False, False, False, False, package="pedl @ file:///w/p.whl"))
    assert "PACKAGE='pedl @ file:///w/p.whl'\n" in spaced


def test_it_mounts_the_data_volume_and_enables_the_service() -> None:
    script = rendered(options_for(False, "embedded", False, False, False, False))
    assert f"VOLUME_ID={VOLUME}\n" in script
    assert "nvme-Amazon_Elastic_Block_Store_$serial" in script
    assert 'if ! blkid -p "$device"' in script  # formats a volume holding nothing, never one with data
    assert "RequiresMountsFor=%s" in script
    assert (
        script.rstrip().splitlines()[-2]
        == '"$VENV/bin/pedl" master install-service --config "$CONFIG" --user "$SERVICE_USER"'
    )
    assert "CONFIG=/usr/local/pedl/etc/master.yaml\n" in script
    unit = heredoc(script, "PEDL_BOOT_UNIT")
    assert "ExecStart=/usr/local/pedl/bin/pedl-boot" in unit and "Type=oneshot" in unit
    assert "/latest/user-data" in heredoc(script, "PEDL_BOOT")


@pytest.mark.parametrize(
    ("db", "tls", "eip", "words", "absent"),
    [
        ("embedded", False, False, [], ["--db-secret", "--tls"]),
        ("rds", False, False, [f"--db-secret {DB_SECRET}"], ["--tls"]),
        ("embedded", True, False, [f"--tls --bucket {BUCKET}"], ["--tls-ip", "--db-secret"]),
        ("rds", True, True, [f"--db-secret {DB_SECRET}", f"--tls --bucket {BUCKET} --tls-ip {ELASTIC_IP}"], []),
    ],
)
def test_boot_arguments(db: str, tls: bool, eip: bool, words: list[str], absent: list[str]) -> None:
    script = rendered(options_for(False, db, False, tls, eip, False))
    boot = script[script.index("-m pedl.deploy.master_boot") :]
    boot = boot[: boot.index("\n\n")]
    for word in words:
        assert word in boot
    for word in absent:
        assert word not in boot


def test_it_fits_in_ec2_user_data() -> None:
    options = DeployOptions(
        cluster_id="c" * 32,
        keypair="k" * 255,
        db="rds",
        tls=True,
        elastic_ip=True,
        spot=True,
        agent_instance_types=("g5.xlarge", "g5.2xlarge", "g6.xlarge", "g6.2xlarge", "p4d.24xlarge"),
        vpc_id="vpc-0123456789abcdef0",
        subnet_id="subnet-0123456789abcdef0",
        db_subnet_ids=("subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"),
    )
    long_values = {k: v + "x" * 40 for k, v in SUBSTITUTIONS.items()}
    script = fn_sub(master_user_data(options, wheel_sha256="f" * 64), long_values)
    assert len(script.encode()) < USER_DATA_LIMIT


def test_fn_sub_as_cloudformation_does_it() -> None:
    assert placeholders_in("a ${X} ${Y.Z} ${!NOT} $HOME") == {"X", "Y.Z"}
    assert fn_sub("a ${X} ${!NOT} $HOME", {"X": "1"}) == "a 1 ${NOT} $HOME"
    with pytest.raises(KeyError):
        fn_sub("${Missing}", {})


def test_an_odd_key_pair_name_reaches_master_yaml_unchanged() -> None:
    options = DeployOptions(cluster_id="demo", keypair='ops key\'s @USER@ #1: "x"')
    yaml_text = heredoc(rendered(options), "PEDL_MASTER_YAML")
    assert yaml_text == master_config_yaml(options, stack_values(rds=False))
    assert yaml.safe_load(yaml_text)["resource_pools"][0]["provider"]["ssh_key_name"] == options.keypair
