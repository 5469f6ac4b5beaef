"""Where this process sits among the trial's workers, and the few collectives pedl.core needs.

Only the single-process case exists today. Multi-process training (torch.distributed) plugs in as
another `Collectives` implementation behind the same DistributedContext.
"""

from __future__ import annotations

from typing import Any, Protocol


class Collectives(Protocol):
    """Object collectives over all workers ("global") or the workers on this node ("local").

    gather returns the list on rank 0 and None elsewhere; allgather returns it everywhere;
    broadcast returns rank 0's object everywhere.
    """

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None: ...

    def allgather(self, obj: Any, *, local: bool) -> list[Any]: ...

    def broadcast(self, obj: Any, *, local: bool) -> Any: ...


class SingleProcess:
    """Collectives of a world of one: every result is this process's own object."""

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        return [obj]

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        return [obj]

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        return obj


class DistributedContext:
    """Ranks and collectives, shaped like Determined's `core.distributed`.

    rank/size count all workers of the trial; local_* count the workers on this node; cross_*
    count nodes (cross_rank is this node's index). Rank 0 is the chief: it alone talks to the
    master about checkpoints, preemption and searcher operations.
    """

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        collectives: Collectives | None = None,
    ) -> None:
        if not (0 <= rank < size and 0 <= local_rank < local_size and 0 <= cross_rank < cross_size):
            raise ValueError("ranks must satisfy 0 <= rank < size for global, local and cross")
        if size > 1 and collectives is None:
            raise ValueError("a DistributedContext with size > 1 needs collectives")
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self._collectives: Collectives = collectives or SingleProcess()

    @classmethod
    def single_process(cls) -> DistributedContext:
        return cls(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)

    def __repr__(self) -> str:
        return (f"DistributedContext(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
                f"local_size={self.local_size}, cross_rank={self.cross_rank}, cross_size={self.cross_size})")

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def is_local_chief(self) -> bool:
        return self.local_rank == 0

    # Determined's accessor spellings.
    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_size(self) -> int:
        return self.local_size

    def get_cross_rank(self) -> int:
        return self.cross_rank

    def get_cross_size(self) -> int:
        return self.cross_size

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every worker's `stuff`, in rank order, on the chief; None on the others."""
        return self._collectives.gather(stuff, local=False)

    def gather_local(self, stuff: Any) -> list[Any] | None:
        return self._collectives.gather(stuff, local=True)

    def allgather(self, stuff: Any) -> list[Any]:
        return self._collectives.allgather(stuff, local=False)

    def allgather_local(self, stuff: Any) -> list[Any]:
        return self._collectives.allgather(stuff, local=True)

    def broadcast(self, stuff: Any) -> Any:
        """The chief's `stuff`, on every worker."""
        return self._collectives.broadcast(stuff, local=False)

    def broadcast_local(self, stuff: Any) -> Any:
        return self._collectives.broadcast(stuff, local=True)
