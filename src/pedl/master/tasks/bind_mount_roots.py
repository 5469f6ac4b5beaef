"""security.bind_mounts.allowed_roots, checked where task configs come in: experiments, commands,
notebooks, shells and TensorBoards (the pools' task_container_defaults are checked when the master's config
loads). The agent checks again on the path resolved on its host, since a link may lead out of a root."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pedl.config.security_config import BindMountPolicy
from pedl.errors import InvalidArgument


def check(mounts: Iterable[Mapping[str, Any]], policy: BindMountPolicy, field: str = "bind_mounts") -> None:
    """InvalidArgument (a 400) naming the first `field`[i].host_path outside every allowed root."""
    found = policy.problem(mounts, field)
    if found is not None:
        raise InvalidArgument.at(*found)
