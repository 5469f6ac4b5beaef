"""Hyperparameters in an experiment config: every type, the bare-value shorthand, nested groups and
their paths, and problems listed each with its path under `hyperparameters`."""

from __future__ import annotations

import textwrap

import pytest

from pedl.config.experiment_config import ExperimentConfig, parse_experiment_config
from pedl.config.hyperparameters import CategoricalHP, ConstHP, DoubleHP, IntHP, LogHP, iter_hparams
from pedl.config.loading import ConfigError

BASE = "entrypoint: python train.py\nsearcher: {name: single, metric: loss}\n"


def cfg(extra: str) -> ExperimentConfig:
    return parse_experiment_config(BASE + textwrap.dedent(extra))


def problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(textwrap.dedent(text))
    return {p["field"]: p["message"] for p in info.value.fields}


def test_every_hyperparameter_type() -> None:
    c = cfg("""
        hyperparameters:
          c: {type: const, val: 0.5}
          i: {type: int, minval: 1, maxval: 8, count: 4}
          d: {type: double, minval: 0.1, maxval: 0.9}
          l: {type: log, minval: -5, maxval: -1, base: 2}
          l10: {type: log, minval: -3, maxval: 0}
          cat: {type: categorical, vals: [sgd, adam, 3]}
    """)
    hp = c.hyperparameters
    assert hp["c"] == ConstHP(type="const", val=0.5)
    assert isinstance(hp["i"], IntHP) and (hp["i"].minval, hp["i"].maxval, hp["i"].count) == (1, 8, 4)
    assert isinstance(hp["d"], DoubleHP) and hp["d"].count is None
    assert isinstance(hp["l"], LogHP) and hp["l"].base == 2
    assert isinstance(hp["l10"], LogHP) and hp["l10"].base == 10.0
    assert isinstance(hp["cat"], CategoricalHP) and hp["cat"].vals == ["sgd", "adam", 3]


@pytest.mark.parametrize(
    ("raw", "value"),
    [("32", 32), ("0.001", 0.001), ("adam", "adam"), ("true", True), ("[1, 2, 3]", [1, 2, 3]), ("null", None)],
)
def test_raw_value_shorthand_is_const(raw: str, value: object) -> None:
    c = cfg(f"hyperparameters:\n  x: {raw}\n")
    assert c.hyperparameters["x"] == ConstHP(type="const", val=value)


def test_nested_hyperparameters() -> None:
    c = cfg("""
        hyperparameters:
          optimizer:
            name: adam
            lr: {type: log, minval: -4, maxval: -2}
            betas:
              b1: {type: double, minval: 0.8, maxval: 0.95}
              b2: 0.999
          layers: 3
    """)
    opt = c.hyperparameters["optimizer"]
    assert isinstance(opt, dict)
    assert opt["name"] == ConstHP(type="const", val="adam")
    assert isinstance(opt["lr"], LogHP)
    assert isinstance(opt["betas"]["b1"], DoubleHP)
    assert opt["betas"]["b2"] == ConstHP(type="const", val=0.999)
    paths = [p for p, _ in iter_hparams(c.hyperparameters)]
    assert paths == ["optimizer.name", "optimizer.lr", "optimizer.betas.b1", "optimizer.betas.b2", "layers"]


@pytest.mark.parametrize(
    ("hp", "field", "message"),
    [
        ("{type: int, minval: 5, maxval: 1}", "hyperparameters.x", "minval must be <= maxval"),
        ("{type: double, minval: 1.5, maxval: 0.5}", "hyperparameters.x", "minval must be <= maxval"),
        ("{type: log, minval: 1, maxval: 2, base: 1}", "hyperparameters.x", "base must not be 1"),
        ("{type: log, minval: 1, maxval: 2, base: 0}", "hyperparameters.x.base", "greater than 0"),
        ("{type: categorical, vals: []}", "hyperparameters.x.vals", "at least 1"),
        ("{type: int, minval: a, maxval: 2}", "hyperparameters.x.minval", "integer"),
        ("{type: int, minval: 1}", "hyperparameters.x.maxval", "required"),
        ("{type: int, minval: 1, maxval: 3, count: 0}", "hyperparameters.x.count", "greater than or equal to 1"),
        ("{type: int, minval: 1, maxval: 3, step: 1}", "hyperparameters.x.step", "unknown key"),
        ("{type: const}", "hyperparameters.x.val", "required"),
        ("{type: gaussian, mean: 0}", "hyperparameters.x", "gaussian"),
    ],
)
def test_bad_hyperparameter_names_its_path(hp: str, field: str, message: str) -> None:
    found = problems(BASE + f"hyperparameters:\n  x: {hp}\n")
    assert field in found, found
    assert message in found[field]


def test_hyperparameters_must_be_a_mapping() -> None:
    assert "hyperparameters" in problems(BASE + "hyperparameters: [1, 2]\n")


def test_every_bad_hyperparameter_is_listed_including_nested_ones() -> None:
    found = problems(
        BASE
        + textwrap.dedent("""
        hyperparameters:
          a: {type: int, minval: 3, maxval: 1}
          g:
            b: {type: double, minval: x, maxval: 1}
            c: {type: categorical, vals: []}
            ok: 1
          d: {type: nope}
    """)
    )
    assert set(found) == {
        "hyperparameters.a",
        "hyperparameters.g.b.minval",
        "hyperparameters.g.c.vals",
        "hyperparameters.d",
    }
