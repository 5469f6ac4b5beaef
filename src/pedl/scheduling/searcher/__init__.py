"""Searchers: pure state machines that decide which trials an experiment runs.

`make_searcher(config, seed, state)` builds one; its state round-trips through `state()` so it is
stored on the experiment row and survives restarts, pause and activate."""

from pedl.scheduling.searcher.base import Searcher, SearcherActions, TrialRequest
from pedl.scheduling.searcher.factory import make_searcher

__all__ = ["Searcher", "SearcherActions", "TrialRequest", "make_searcher"]
