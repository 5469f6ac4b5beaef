"""A pool's policy: its defaults are master.yaml's, and a pool's provider config (aws or local) makes the
policy the provisioner and the simulator give the scaling decider."""

from __future__ import annotations

from pedl.config.master_config import SchedulerConfig
from pedl.config.provider_config import AWSProviderConfig, LocalProviderConfig
from pedl.scheduling.pool_policy import PoolPolicy, TypeOffer, pool_policy


def aws(**kw) -> AWSProviderConfig:
    return AWSProviderConfig.model_validate({"type": "aws", "image_id": "ami-1", "ssh_key_name": "key", **kw})


def test_the_defaults_are_the_configs() -> None:
    policy, config = PoolPolicy(types=()), aws()
    assert (
        (policy.max_idle, policy.max_starting, policy.max_disconnected, policy.spot_request_timeout)
        == (
            config.max_idle_agent_period,
            config.max_agent_starting_period,
            config.max_disconnected_period,
            config.spot_request_timeout,
        )
        == (300.0, 1200.0, 600.0, 120.0)
    )
    assert (policy.max_instances, policy.min_instances, policy.spot, policy.spot_fallback_to_on_demand) == (
        config.max_instances,
        config.min_instances,
        config.spot,
        config.spot_fallback_to_on_demand,
    )
    assert policy.fitting == SchedulerConfig().fitting_policy and policy.policy == "pedl"


def test_a_config_left_at_its_defaults_makes_the_default_policy() -> None:
    config = LocalProviderConfig(type="local")
    assert pool_policy(config, "best") == PoolPolicy(types=(TypeOffer("local", 1, 0.0, 0.0),))


def test_an_aws_pool_gives_its_types_prices_bounds_periods_and_spot_settings() -> None:
    config = aws(
        instance_type=["g5.xlarge", "p3.8xlarge"],
        instance_type_prices={"g5.xlarge": {"on_demand": 1.0, "spot": 0.3}},
        max_instances=7,
        min_instances=1,
        max_idle_agent_period="1m",
        max_agent_starting_period="5m",
        max_disconnected_period="2m",
        spot=True,
        spot_request_timeout="30s",
        spot_fallback_to_on_demand=False,
    )
    policy = pool_policy(config, "worst")
    assert policy.types[0] == TypeOffer("g5.xlarge", 1, 1.0, 0.3)
    assert [(o.name, o.slots) for o in policy.types] == [("g5.xlarge", 1), ("p3.8xlarge", 4)]
    assert policy.types[1].spot_price == config.spot_price_of("p3.8xlarge")
    assert (
        policy.max_instances,
        policy.min_instances,
        policy.max_idle,
        policy.max_starting,
        policy.max_disconnected,
    ) == (7, 1, 60.0, 300.0, 120.0)
    assert policy.spot and policy.spot_request_timeout == 30.0 and not policy.spot_fallback_to_on_demand
    assert policy.fitting == "worst" and policy.policy == "pedl"


def test_a_local_pool_has_no_spot_request_timeout_and_takes_the_default() -> None:
    config = LocalProviderConfig(type="local", slots_per_instance=2, price_per_hour=1.5, spot=True)
    policy = pool_policy(config, "best")
    assert policy.types == (TypeOffer("local", 2, 1.5, config.spot_price_of("local")),)
    assert policy.spot and policy.spot_request_timeout == PoolPolicy.spot_request_timeout
