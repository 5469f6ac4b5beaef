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


def test_the_open_file_limit_is_raised_to_the_hard_limit(monkeypatch) -> None:
    import resource

    limits = {"now": (1024, 65536)}
    monkeypatch.setattr(resource, "getrlimit", lambda _which: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _which, value: limits.update(now=value))
    assert server.raise_open_file_limit() == (65536, 65536)
    limits["now"] = (1024, resource.RLIM_INFINITY)  # no hard limit: as far as Linux lets a soft one go
    assert server.raise_open_file_limit() == (server.NOFILE_WITHOUT_HARD_LIMIT, resource.RLIM_INFINITY)

    def refuse(_which, _value):
        raise OSError(1, "Operation not permitted")

    limits["now"] = (1024, 4096)
    monkeypatch.setattr(resource, "setrlimit", refuse)
    assert server.raise_open_file_limit() == (1024, 4096)


def test_connection_caps_fit_under_the_open_file_limit() -> None:
    from pedl.config.server_config import ServerConfig

    defaults = ServerConfig()  # 4096 in total, 256 per address
    assert server.connection_caps(defaults, 1 << 20) == (4096, 256)
    assert server.connection_caps(defaults, 1024) == (768, 256)  # a quarter (at least 256 files) kept back
    assert server.connection_caps(defaults, 300) == (44, 44)
    assert server.connection_caps(ServerConfig(max_connections=100, max_connections_per_address=500), 1 << 20) == (
        100,
        100,
    )
