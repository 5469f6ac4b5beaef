"""pedl.core.distributed: the single-process context and the collectives seam."""

from __future__ import annotations

from typing import Any

import pytest

from pedl.core.distributed import DistributedContext


def test_single_process_ranks() -> None:
    d = DistributedContext.single_process()
    assert (d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size) == (0, 1, 0, 1, 0, 1)
    assert d.is_chief and d.is_local_chief
    assert (d.get_rank(), d.get_size(), d.get_local_rank(), d.get_local_size(),
            d.get_cross_rank(), d.get_cross_size()) == (0, 1, 0, 1, 0, 1)


def test_single_process_collectives_are_trivially_correct() -> None:
    d = DistributedContext.single_process()
    obj = {"x": 1}
    assert d.gather(obj) == [obj]
    assert d.gather_local(obj) == [obj]
    assert d.allgather(obj) == [obj]
    assert d.allgather_local(obj) == [obj]
    assert d.broadcast(obj) is obj
    assert d.broadcast_local(obj) is obj


def test_ranks_are_checked() -> None:
    with pytest.raises(ValueError, match="ranks must satisfy"):
        DistributedContext(rank=1, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


def test_more_than_one_worker_needs_collectives() -> None:
    with pytest.raises(ValueError, match="needs collectives"):
        DistributedContext(rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1)


class RecordingCollectives:
    """Stands in for a torch.distributed backend: the context must delegate to it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        self.calls.append(("gather", obj, local))
        return None

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        self.calls.append(("allgather", obj, local))
        return [obj, obj]

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        self.calls.append(("broadcast", obj, local))
        return "from chief"


def test_collectives_are_delegated() -> None:
    backend = RecordingCollectives()
    d = DistributedContext(rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1,
                           collectives=backend)
    assert not d.is_chief
    assert d.gather(1) is None
    assert d.allgather_local(2) == [2, 2]
    assert d.broadcast(3) == "from chief"
    assert backend.calls == [("gather", 1, False), ("allgather", 2, True), ("broadcast", 3, False)]
