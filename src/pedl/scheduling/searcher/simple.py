"""The single, grid and random searchers."""

from __future__ import annotations

import random
from typing import Any

from pedl.scheduling.searcher import hparams
from pedl.scheduling.searcher.base import Searcher


class SingleSearcher(Searcher):
    def __init__(self, space: dict[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.space = space

    def _next_hparams(self, index: int) -> dict[str, Any] | None:
        if index >= 1:
            return None
        # a single trial takes each hyperparameter's first grid value (const/categorical[0]/minval)
        return hparams.grid({k: _first(v) for k, v in self.space.items()})[0]

    def total_trials(self) -> int:
        return 1


def _first(hp: Any) -> Any:
    if isinstance(hp, dict):
        return {k: _first(v) for k, v in hp.items()}
    if hasattr(hp, "count"):
        return hp.model_copy(update={"count": 1})
    if hasattr(hp, "vals"):
        return hp.model_copy(update={"vals": hp.vals[:1]})
    return hp


class GridSearcher(Searcher):
    """Every grid point once, in order; point i is decoded from i, so a restored searcher (or one
    whose grid is large) never builds the grid."""

    def __init__(self, space: dict[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.space = space
        self.points = hparams.grid(space)

    def _next_hparams(self, index: int) -> dict[str, Any] | None:
        return self.points[index] if index < self.points.size else None

    def total_trials(self) -> int:
        return self.points.size


class RandomSearcher(Searcher):
    def __init__(self, space: dict[str, Any], max_trials: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.space = space
        self.max_trials = max_trials

    def _next_hparams(self, index: int) -> dict[str, Any] | None:
        if index >= self.max_trials:
            return None
        # one generator per index, so a restored searcher samples the same points
        return hparams.sample(self.space, random.Random(f"{self.seed}:{index}"))

    def total_trials(self) -> int:
        return self.max_trials
