"""Where `pedl master run` looks for master.yaml when no `--config` is given: the seeds' path
(/usr/local/pedl/etc/master.yaml), then /etc/pedl/master.yaml; PEDL_CONFIG_PATHS replaces the list."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CONFIG_PATHS = (Path("/usr/local/pedl/etc/master.yaml"), Path("/etc/pedl/master.yaml"))
CONFIG_PATHS_ENV = "PEDL_CONFIG_PATHS"  # os.pathsep-separated; empty means "look nowhere" (tests, packagers)


def config_search_paths() -> list[Path]:
    """The files looked at, first match wins."""
    value = os.environ.get(CONFIG_PATHS_ENV)
    if value is None:
        return list(DEFAULT_CONFIG_PATHS)
    return [Path(p) for p in value.split(os.pathsep) if p]


def find_master_config() -> Path | None:
    """The first search path that exists. A path that exists but cannot be read is still chosen, so
    that the master says why it cannot read it instead of silently running on the defaults."""
    return next((path for path in config_search_paths() if path.exists()), None)
