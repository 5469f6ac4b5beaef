"""Hyperparameter grids and samples from the validated config tree. A grid is never materialized:
point i is decoded from its index (mixed radix, the last hyperparameter varying fastest)."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from pedl.config.hyperparameters import (
    CategoricalHP,
    ConstHP,
    DoubleHP,
    IntHP,
    LogHP,
    iter_hparams,
)


@dataclass(frozen=True)
class Axis:
    """The grid values of one hyperparameter: `size` of them, value j computed on demand."""

    hp: Any
    size: int

    def value(self, j: int) -> Any:
        hp = self.hp
        if isinstance(hp, ConstHP):
            return hp.val
        if isinstance(hp, CategoricalHP):
            return hp.vals[j]
        if isinstance(hp, IntHP):
            count = hp.count or 1
            if count == 1:
                return hp.minval
            if count - 1 >= hp.maxval - hp.minval:  # a step of at most 1 reaches every integer
                return hp.minval + j
            return int(round(hp.minval + j * ((hp.maxval - hp.minval) / (count - 1))))
        if isinstance(hp, DoubleHP | LogHP):
            count = hp.count or 1
            point = hp.minval if count == 1 else hp.minval + j * ((hp.maxval - hp.minval) / (count - 1))
            return hp.base**point if isinstance(hp, LogHP) else point  # Determined's log bounds are exponents
        raise TypeError(f"unknown hyperparameter {hp!r}")


def axis(hp: Any) -> Axis:
    if isinstance(hp, ConstHP):
        return Axis(hp, 1)
    if isinstance(hp, CategoricalHP):
        return Axis(hp, len(hp.vals))
    if isinstance(hp, IntHP):
        count = hp.count or 1
        # with more points than integers in range, rounding gives each integer once
        return Axis(hp, 1 if count == 1 else min(count, hp.maxval - hp.minval + 1))
    if isinstance(hp, DoubleHP | LogHP):
        return Axis(hp, hp.count or 1)
    raise TypeError(f"unknown hyperparameter {hp!r}")


def _groups(space: dict[str, Any]) -> dict[str, Any]:
    """The groups of `space` as empty nested dicts: a point keeps a group that has no
    hyperparameters (`actions: {}`) as Determined does, so a trial reading hparams["actions"] finds it."""
    return {key: _groups(value) for key, value in space.items() if isinstance(value, dict)}


def grid_size(space: dict[str, Any]) -> int:
    """How many points the grid of `space` has (nested groups included), in O(hyperparameters)."""
    return math.prod(axis(hp).size for _, hp in iter_hparams(space))


class Grid(Sequence[dict[str, Any]]):
    """Every combination of the hyperparameters' grid values, in itertools.product order."""

    def __init__(self, space: dict[str, Any]) -> None:
        leaves = list(iter_hparams(space))
        self._paths = [path for path, _ in leaves]
        self._axes = [axis(hp) for _, hp in leaves]
        self._size = math.prod(a.size for a in self._axes)
        self._groups = _groups(space)

    @property
    def size(self) -> int:
        """The number of points; unlike len(), not bounded by sys.maxsize."""
        return self._size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(f"grid point {index} of {self._size}")
        digits = []
        for a in reversed(self._axes):
            index, j = divmod(index, a.size)
            digits.append(j)
        point = copy.deepcopy(self._groups)
        for path, a, j in zip(self._paths, self._axes, reversed(digits), strict=True):
            _set_path(point, path, a.value(j))
        return point

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self._size))


def grid(space: dict[str, Any]) -> Grid:
    return Grid(space)


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


def sample(space: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    point = _groups(space)
    for path, hp in iter_hparams(space):
        _set_path(point, path, _sample(hp, rng))
    return point
