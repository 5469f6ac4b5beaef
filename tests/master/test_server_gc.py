"""The garbage collector as a started master sets it (server.tune_gc): what exists then is frozen,
so full collections skip it, and young collections come every YOUNG_COLLECTION_EVERY allocations."""

from __future__ import annotations

import gc

from pedl.master import server


def test_tune_gc_freezes_what_exists_and_spaces_young_collections() -> None:
    thresholds = gc.get_threshold()
    try:
        server.tune_gc()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (server.YOUNG_COLLECTION_EVERY, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
