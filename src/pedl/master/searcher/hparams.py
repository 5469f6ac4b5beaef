"""Hyperparameter grids and samples from the validated config tree."""

from __future__ import annotations

import itertools
import random
from typing import Any

from pedl.config.experiment_config import (
    CategoricalHP,
    ConstHP,
    DoubleHP,
    IntHP,
    LogHP,
    iter_hparams,
)


def _grid_values(hp: Any) -> list[Any]:
    if isinstance(hp, ConstHP):
        return [hp.val]
    if isinstance(hp, CategoricalHP):
        return list(hp.vals)
    count = hp.count or 1
    if isinstance(hp, IntHP):
        if count == 1:
            return [hp.minval]
        step = (hp.maxval - hp.minval) / (count - 1)
        return sorted({int(round(hp.minval + i * step)) for i in range(count)})
    if isinstance(hp, DoubleHP | LogHP):
        if count == 1:
            points = [hp.minval]
        else:
            step = (hp.maxval - hp.minval) / (count - 1)
            points = [hp.minval + i * step for i in range(count)]
        if isinstance(hp, LogHP):  # Determined's log bounds are exponents
            return [hp.base**p for p in points]
        return points
    raise TypeError(f"unknown hyperparameter {hp!r}")


def _sample(hp: Any, rng: random.Random) -> Any:
    if isinstance(hp, ConstHP):
        return hp.val
    if isinstance(hp, CategoricalHP):
        return rng.choice(hp.vals)
    if isinstance(hp, IntHP):
        return rng.randint(hp.minval, hp.maxval)
    if isinstance(hp, DoubleHP):
        return rng.uniform(hp.minval, hp.maxval)
    if isinstance(hp, LogHP):
        return hp.base ** rng.uniform(hp.minval, hp.maxval)
    raise TypeError(f"unknown hyperparameter {hp!r}")


def _set_path(tree: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def grid(space: dict[str, Any]) -> list[dict[str, Any]]:
    leaves = list(iter_hparams(space))
    out = []
    for combo in itertools.product(*[_grid_values(hp) for _, hp in leaves]):
        point: dict[str, Any] = {}
        for (path, _), value in zip(leaves, combo, strict=True):
            _set_path(point, path, value)
        out.append(point)
    return out


def sample(space: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    point: dict[str, Any] = {}
    for path, hp in iter_hparams(space):
        _set_path(point, path, _sample(hp, rng))
    return point
