"""The interpreter as a started master sets it (server.tune_runtime): what exists then is frozen,
so full collections skip it, young collections come every YOUNG_COLLECTION_EVERY allocations, a
thread waiting for the GIL gets it after SWITCH_INTERVAL, and collection, off while `pedl master run`
imported and started the master, is on again."""

from __future__ import annotations

import gc
import sys

from pedl.master import server


def test_tune_runtime_freezes_what_exists_spaces_young_collections_and_shortens_the_switch_interval() -> None:
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        gc.disable()  # as cli/master.py's run leaves it
        server.tune_runtime()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (server.YOUNG_COLLECTION_EVERY, *thresholds[1:])
        assert sys.getswitchinterval() == server.SWITCH_INTERVAL
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
