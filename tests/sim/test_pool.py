"""Pool settings: defaults, types from the table, a master.yaml's first provider pool, overrides, and
the two decider policies built from one pool."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pedl.errors import InvalidArgument
from pedl.sim.pool import default_pool, offers_for, override, policies_for, pool_from_master_config


def test_the_default_pool_is_p3_8xlarge_with_room_for_the_trace() -> None:
    pool = default_pool()
    assert [(o.name, o.slots, o.price) for o in pool.scaling.types] == [("p3.8xlarge", 4, 12.24)]
    assert pool.scaling.max_instances == 200 and pool.scaling.max_idle == 300.0 and not pool.scaling.spot


def test_policies_share_bounds_but_the_baseline_has_one_type_and_no_fallback() -> None:
    pool = override(default_pool(), instance_types_=["g5.xlarge", "p3.8xlarge"], spot=True, max_idle=60.0)
    pedl, det = pool.policy("pedl"), pool.policy("determined")
    assert [o.name for o in pedl.types] == ["g5.xlarge", "p3.8xlarge"] and pedl.policy == "pedl"
    assert pedl.spot_fallback_to_on_demand and pedl.spot_request_timeout == 120.0
    assert [o.name for o in det.types] == ["g5.xlarge"] and det.policy == "determined"
    assert not det.spot_fallback_to_on_demand and math.isinf(det.spot_request_timeout)
    assert pedl.max_idle == det.max_idle == 60.0 and det.spot


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["p9.huge"], "--instance-type: unknown instance type 'p9.huge'"),
        (["m5.large"], "--instance-type: m5.large has no GPUs"),
        (["g5.xlarge", "g5.xlarge"], "given twice"),
    ],
)
def test_bad_instance_types(names: list[str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        offers_for(names)


def test_bad_bounds_name_the_option() -> None:
    with pytest.raises(InvalidArgument, match="^--max-instances"):
        override(default_pool(), max_instances=0)
    with pytest.raises(InvalidArgument, match="^--min-instances: 5 exceeds --max-instances 2"):
        override(default_pool(), max_instances=2, min_instances=5)


def test_policy_choice() -> None:
    assert policies_for("both") == ["pedl", "determined"]
    with pytest.raises(InvalidArgument, match="^--policy"):
        policies_for("ray")


def test_pool_from_the_first_aws_pool_of_a_master_config(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text("""
resource_pools:
  - pool_name: static
  - pool_name: gpu
    scheduler: {fitting_policy: worst}
    provider:
      type: aws
      image_id: ami-1
      ssh_key_name: key
      instance_type: [g5.xlarge, p3.8xlarge]
      max_instances: 7
      min_instances: 1
      max_idle_agent_period: 1m
      spot: true
      spot_fallback_to_on_demand: false
default_compute_resource_pool: gpu
default_aux_resource_pool: gpu
""")
    pool = pool_from_master_config(path)
    p = pool.scaling
    assert [(o.name, o.slots, o.spot_price) for o in p.types] == [("g5.xlarge", 1, None), ("p3.8xlarge", 4, None)]
    assert (p.max_instances, p.min_instances, p.max_idle) == (7, 1, 60.0)
    assert p.spot and not p.spot_fallback_to_on_demand and p.fitting == "worst"
    assert "pool gpu" in pool.source
    assert override(pool, max_instances=9, spot=False).scaling.max_instances == 9  # options win over the file


def test_pool_from_a_local_provider(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text(
        "resource_pools:\n  - pool_name: default\n    provider: {type: local, slots_per_instance: 2, "
        "price_per_hour: 1.5, boot_delay: 10s, max_instances: 3}\n"
    )
    pool = pool_from_master_config(path)
    assert [(o.name, o.slots, o.price) for o in pool.scaling.types] == [("local", 2, 1.5)]
    assert pool.boot_delay == 10.0 and pool.scaling.max_instances == 3
    assert pool.scaling.spot_request_timeout == 120.0  # the local provider has no setting of it


def test_a_config_without_a_provider_pool_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text("port: 8080\n")
    with pytest.raises(InvalidArgument, match="^--config: no resource pool .* aws or local provider"):
        pool_from_master_config(path)
    path.write_text("resource_pools: [{pool_name: x, provider: {type: aws}}]\n")
    with pytest.raises(InvalidArgument, match="^--config: invalid .*image_id"):
        pool_from_master_config(path)
