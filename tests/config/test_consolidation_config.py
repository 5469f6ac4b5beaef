"""Consolidation and price configuration: a pool's `consolidation:` (defaults, bad values refused
naming their full path), `instance_type_prices` and spot prices, the local provider's spot keys, and
an experiment's `resources.movable`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pedl.config.consolidation_config import ConsolidationConfig
from pedl.config.experiment_config import parse_experiment_config
from pedl.config.loading import ConfigError
from pedl.config.master_config import MasterConfig, load_master_config
from pedl.config.provider_config import DEFAULT_SPOT_FRACTION, AWSProviderConfig, LocalProviderConfig

AWS = """
resource_pools:
  - pool_name: default
    provider:
      type: aws
      image_id: ami-1
      ssh_key_name: key
      instance_type: [g5.xlarge, p3.2xlarge]
"""
LOCAL = """
resource_pools:
  - pool_name: default
    provider:
      type: local
      price_per_hour: 2.0
"""


def load(tmp_path: Path, text: str) -> MasterConfig:
    path = tmp_path / "master.yaml"
    path.write_text(textwrap.dedent(text))
    return load_master_config(path)


def refused(tmp_path: Path, text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    out = {p["field"]: p["message"] for p in info.value.fields}
    for field, message in out.items():  # the message shown names each field with its problem
        assert f"{field}: {message}" in info.value.message
    return out


def with_consolidation(base: str, lines: str) -> str:
    indented = textwrap.indent(textwrap.dedent(lines).strip(), " " * 8)
    return base + "      consolidation:\n" + indented + "\n"


def provider(cfg: MasterConfig) -> AWSProviderConfig | LocalProviderConfig:
    p = cfg.resource_pools[0].provider
    assert p is not None
    return p


# --- consolidation: defaults and valid values ---


@pytest.mark.parametrize("base", [AWS, LOCAL])
def test_every_dynamic_pool_has_consolidation_defaults(tmp_path: Path, base: str) -> None:
    c = provider(load(tmp_path, base)).consolidation
    assert c == ConsolidationConfig()
    assert (
        c.enabled,
        c.max_moves_per_hour,
        c.min_trial_runtime_between_moves,
        c.min_saving_per_hour,
        c.checkpoint_cost,
        c.restore_cost,
    ) == (True, 20, 1800.0, 0.5, 60.0, 60.0)
    assert (c.yield_to_new_work, c.min_remaining_to_yield) == (True, 3600.0)
    assert (c.checkpoint_cost + c.restore_cost) == 120.0


def test_consolidation_values_and_durations(tmp_path: Path) -> None:
    c = provider(
        load(
            tmp_path,
            with_consolidation(
                AWS,
                """
        max_moves_per_hour: 2
        min_trial_runtime_between_moves: 1h
        min_saving_per_hour: 0
        checkpoint_cost: 2m
        restore_cost: 90s
        yield_to_new_work: false
        min_remaining_to_yield: 2h
    """,
            ),
        )
    ).consolidation
    assert (c.max_moves_per_hour, c.min_trial_runtime_between_moves, c.min_saving_per_hour) == (2, 3600.0, 0.0)
    assert (c.yield_to_new_work, c.min_remaining_to_yield) == (False, 7200.0)
    assert (c.checkpoint_cost, c.restore_cost, (c.checkpoint_cost + c.restore_cost)) == (120.0, 90.0, 210.0)


def test_disabled_consolidation_may_allow_no_move(tmp_path: Path) -> None:
    c = provider(load(tmp_path, with_consolidation(LOCAL, "enabled: false\nmax_moves_per_hour: 0"))).consolidation
    assert (c.enabled, c.max_moves_per_hour) == (False, 0)


def test_runtime_between_moves_may_equal_the_move_cost(tmp_path: Path) -> None:
    c = provider(
        load(
            tmp_path,
            with_consolidation(
                LOCAL,
                """
        min_trial_runtime_between_moves: 2m
        checkpoint_cost: 1m
        restore_cost: 1m
    """,
            ),
        )
    ).consolidation
    assert c.min_trial_runtime_between_moves == (c.checkpoint_cost + c.restore_cost) == 120.0


def test_consolidation_dumps_durations_as_text() -> None:
    dumped = ConsolidationConfig().model_dump(mode="json")
    assert dumped["min_trial_runtime_between_moves"] == "30m"
    assert ConsolidationConfig.model_validate(dumped) == ConsolidationConfig()


# --- consolidation: bad values, each refused naming its full path ---

PATH = "resource_pools[0].provider.consolidation"


@pytest.mark.parametrize(
    ("lines", "key", "words"),
    [
        ("max_moves_per_hour: -1", "max_moves_per_hour", "greater than or equal to 0"),
        ("min_saving_per_hour: -0.1", "min_saving_per_hour", "greater than or equal to 0"),
        ("min_saving_per_hour: .inf", "min_saving_per_hour", "finite"),
        ("min_trial_runtime_between_moves: -5", "min_trial_runtime_between_moves", "cannot be negative"),
        ("checkpoint_cost: -1", "checkpoint_cost", "cannot be negative"),
        ("restore_cost: '-1s'", "restore_cost", "invalid duration"),
        ("checkpoint_cost: soon", "checkpoint_cost", "invalid duration"),
        ("enabled: sometimes", "enabled", "valid boolean"),
        ("yield_to_new_work: maybe", "yield_to_new_work", "valid boolean"),
        ("min_remaining_to_yield: -1", "min_remaining_to_yield", "cannot be negative"),
        ("max_moves: 3", "max_moves", "unknown key"),
    ],
)
@pytest.mark.parametrize("base", [AWS, LOCAL])
def test_bad_consolidation_value_names_the_field(tmp_path: Path, base: str, lines: str, key: str, words: str) -> None:
    out = refused(tmp_path, with_consolidation(base, lines))
    assert list(out) == [f"{PATH}.{key}"]
    assert words in out[f"{PATH}.{key}"]


def test_no_move_allowed_while_enabled_is_refused(tmp_path: Path) -> None:
    out = refused(tmp_path, with_consolidation(AWS, "max_moves_per_hour: 0"))
    assert out == {
        f"{PATH}.max_moves_per_hour": "0 allows no move while consolidation.enabled is true; set enabled: false"
    }


def test_runtime_between_moves_shorter_than_a_move_is_refused(tmp_path: Path) -> None:
    out = refused(
        tmp_path,
        with_consolidation(
            LOCAL,
            """
        min_trial_runtime_between_moves: 5m
        checkpoint_cost: 3m
        restore_cost: 3m
    """,
        ),
    )
    message = out[f"{PATH}.min_trial_runtime_between_moves"]
    assert "consolidation.checkpoint_cost + consolidation.restore_cost (360s)" in message
    assert list(out) == [f"{PATH}.min_trial_runtime_between_moves"]


def test_only_the_bad_cost_is_named_when_a_cost_is_invalid(tmp_path: Path) -> None:
    # the runtime cannot be compared with a cost that is itself wrong: that cost alone is reported
    out = refused(tmp_path, with_consolidation(LOCAL, "min_trial_runtime_between_moves: 1s\ncheckpoint_cost: x"))
    assert list(out) == [f"{PATH}.checkpoint_cost"]


# --- prices ---


def test_prices_default_to_the_table(tmp_path: Path) -> None:
    p = provider(load(tmp_path, AWS))
    assert isinstance(p, AWSProviderConfig)
    assert p.instance_type_prices == {}
    assert p.price_of("g5.xlarge") == 1.006
    assert p.spot_price_of("g5.xlarge") == pytest.approx(1.006 * DEFAULT_SPOT_FRACTION)
    assert DEFAULT_SPOT_FRACTION == 0.35


def test_instance_type_prices_number_and_mapping_forms(tmp_path: Path) -> None:
    p = provider(
        load(
            tmp_path,
            AWS
            + """
      instance_type_prices:
        g5.xlarge: 0.8
        p3.2xlarge: {on_demand: 2.5, spot: 0.9}
""",
        )
    )
    assert isinstance(p, AWSProviderConfig)
    assert (p.price_of("g5.xlarge"), p.spot_price_of("g5.xlarge")) == (0.8, pytest.approx(0.8 * 0.35))
    assert (p.price_of("p3.2xlarge"), p.spot_price_of("p3.2xlarge")) == (2.5, 0.9)


def test_a_spot_price_alone_keeps_the_table_on_demand_price(tmp_path: Path) -> None:
    p = provider(load(tmp_path, AWS + "      instance_type_prices: {g5.xlarge: {spot: 0.3}}\n"))
    assert (p.price_of("g5.xlarge"), p.spot_price_of("g5.xlarge")) == (1.006, 0.3)
    assert p.price_of("p3.2xlarge") == 3.06  # a type not listed: the table


def test_prices_for_a_type_the_table_lacks(tmp_path: Path) -> None:
    p = provider(
        load(
            tmp_path,
            AWS.replace("[g5.xlarge, p3.2xlarge]", "x9.huge")
            + """
      instance_slots: 2
      instance_type_prices: {x9.huge: 4}
""",
        )
    )
    assert (p.price_of("x9.huge"), p.spot_price_of("x9.huge")) == (4.0, pytest.approx(1.4))


PRICES = "resource_pools[0].provider.instance_type_prices"


@pytest.mark.parametrize(
    ("prices", "field", "words"),
    [
        ("{p4d.24xlarge: 30}", PRICES, "'p4d.24xlarge': not among instance_type (g5.xlarge, p3.2xlarge)"),
        ("{g5.xlarge: -1}", f"{PRICES}.g5.xlarge.on_demand", "greater than or equal to 0"),
        ("{g5.xlarge: {spot: -0.5}}", f"{PRICES}.g5.xlarge.spot", "greater than or equal to 0"),
        ("{g5.xlarge: {on_demand: .nan}}", f"{PRICES}.g5.xlarge.on_demand", "finite"),
        ("{g5.xlarge: cheap}", f"{PRICES}.g5.xlarge.on_demand", "valid number"),
        ("{g5.xlarge: {}}", f"{PRICES}.g5.xlarge", "give on_demand, spot or both"),
        ("{g5.xlarge: {reserved: 1}}", f"{PRICES}.g5.xlarge.reserved", "unknown key"),
        ("[1, 2]", PRICES, "valid dictionary"),
    ],
)
def test_bad_instance_type_prices_name_the_field(tmp_path: Path, prices: str, field: str, words: str) -> None:
    out = refused(tmp_path, AWS + f"      instance_type_prices: {prices}\n")
    assert list(out) == [field]
    assert words in out[field]


def test_local_spot_price(tmp_path: Path) -> None:
    p = provider(load(tmp_path, LOCAL))
    assert isinstance(p, LocalProviderConfig)
    assert p.spot_price_per_hour is None
    assert (p.price_of("local"), p.spot_price_of("local")) == (2.0, pytest.approx(0.7))
    p = provider(load(tmp_path, LOCAL + "      spot_price_per_hour: 0.25\n"))
    assert p.spot_price_of("local") == 0.25
    out = refused(tmp_path, LOCAL + "      spot_price_per_hour: -1\n")
    assert list(out) == ["resource_pools[0].provider.spot_price_per_hour"]


def test_local_spot_defaults_and_values(tmp_path: Path) -> None:
    p = provider(load(tmp_path, LOCAL))
    assert isinstance(p, LocalProviderConfig)
    assert (p.spot, p.spot_fallback_to_on_demand) == (False, True)
    p = provider(load(tmp_path, LOCAL + "      spot: true\n      spot_fallback_to_on_demand: false\n"))
    assert isinstance(p, LocalProviderConfig)
    assert (p.spot, p.spot_fallback_to_on_demand) == (True, False)


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("spot: sometimes", "spot", "valid boolean"),
        ("spot_fallback_to_on_demand: later", "spot_fallback_to_on_demand", "valid boolean"),
        ("spot_request_timeout: 2m", "spot_request_timeout", "unknown key"),  # a local spot launch is never a request
        ("spot_max_price: '0.5'", "spot_max_price", "unknown key"),
    ],
)
def test_bad_local_spot_value_names_the_field(tmp_path: Path, line: str, field: str, words: str) -> None:
    out = refused(tmp_path, LOCAL + f"      {line}\n")
    assert list(out) == [f"resource_pools[0].provider.{field}"]
    assert words in out[f"resource_pools[0].provider.{field}"]


# --- resources.movable ---

EXPERIMENT = "entrypoint: python train.py\nsearcher: {name: single, metric: loss}\n"


def test_movable_defaults_to_true() -> None:
    cfg = parse_experiment_config(EXPERIMENT)
    assert cfg.resources.movable is True
    assert cfg.model_dump(mode="json")["resources"]["movable"] is True


def test_movable_false_is_kept_through_a_stored_dump() -> None:
    cfg = parse_experiment_config(EXPERIMENT + "resources: {slots_per_trial: 2, movable: false}\n")
    assert cfg.resources.movable is False
    again = parse_experiment_config(cfg.model_dump(mode="json"))
    assert again.resources.movable is False and again == cfg


def test_a_stored_config_from_before_movable_still_loads() -> None:
    stored = parse_experiment_config(EXPERIMENT).model_dump(mode="json")
    del stored["resources"]["movable"]
    assert parse_experiment_config(stored).resources.movable is True


def test_movable_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(EXPERIMENT + "resources: {movable: sometimes}\n")
    assert [p["field"] for p in info.value.fields] == ["resources.movable"]
