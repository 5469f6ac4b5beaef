"""Where this process sits among the trial's workers, and the few collectives pedl.core needs.

A single process needs no collectives; several processes (one per agent, as the master places a
trial too big for one agent; one per slot under `pedl.launch.torch_distributed`; or torchrun's)
use torch.distributed through `TorchCollectives`.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pedl.common.ports import free_port

DEFAULT_TIMEOUT_S = 1800.0
TIMEOUT_ENV = "PEDL_DISTRIBUTED_TIMEOUT_SECONDS"


class Collectives(Protocol):
    """Object collectives over all workers ("global") or the workers on this node ("local").

    gather returns the list on the (local) chief and None elsewhere; allgather returns it
    everywhere; broadcast returns the (local) chief's object everywhere. Every worker of the group
    must make the same calls in the same order. An implementation may also have `close()`.
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
    master about metrics, checkpoints, preemption and searcher operations.
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
        self._closed = False

    @classmethod
    def single_process(cls) -> DistributedContext:
        return cls(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)

    @classmethod
    def from_torch_distributed(
        cls, *, backend: str | None = None, timeout: float | datetime.timedelta | None = None
    ) -> DistributedContext:
        """This worker's place from RANK, WORLD_SIZE, LOCAL_RANK, ... and a torch.distributed group.

        The pedl master sets those variables (plus MASTER_ADDR and MASTER_PORT, the chief's
        rendezvous address) for each process of a trial spread over several agents; torchrun
        sets them too. If no default process group exists yet, one is made (env:// rendezvous;
        backend nccl when CUDA is available, else gloo; `timeout` seconds for the rendezvous and
        each collective, default $PEDL_DISTRIBUTED_TIMEOUT_SECONDS or 1800) and `close()`
        destroys it. A group the caller made is used as it is and left alone.
        """
        ranks = torch_ranks_from_env(os.environ)
        return cls(
            rank=ranks.rank,
            size=ranks.size,
            local_rank=ranks.local_rank,
            local_size=ranks.local_size,
            cross_rank=ranks.cross_rank,
            cross_size=ranks.cross_size,
            collectives=TorchCollectives.start(ranks, backend=backend, timeout=_timeout(timeout)),
        )

    def __repr__(self) -> str:
        return (
            f"DistributedContext(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
            f"local_size={self.local_size}, cross_rank={self.cross_rank}, cross_size={self.cross_size})"
        )

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

    def get_num_agents(self) -> int:
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
        """The chief's `stuff`, on every worker (the others' `stuff` is ignored)."""
        return self._collectives.broadcast(stuff, local=False)

    def broadcast_local(self, stuff: Any = None) -> Any:
        return self._collectives.broadcast(stuff, local=True)

    def close(self) -> None:
        """Release the collectives (a torch process group this context made); idempotent.

        `pedl.core.init()`'s context closes its DistributedContext when the `with` block ends.
        """
        if self._closed:
            return
        self._closed = True
        close = getattr(self._collectives, "close", None)
        if close is not None:
            close()


# -- torch.distributed ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchRanks:
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int


def torch_ranks_from_env(environ: Mapping[str, str]) -> TorchRanks:
    """Ranks from torch.distributed's variables.

    RANK and WORLD_SIZE are required. LOCAL_RANK/LOCAL_WORLD_SIZE default to 0/1 (one process per
    node, as the pedl master starts them; pedl.launch.torch_distributed sets them for one process
    per slot). The node index and count come from NODE_RANK/NNODES (pedl), GROUP_RANK/
    GROUP_WORLD_SIZE (torchrun), or are derived assuming node-major ranks of equal-sized nodes.
    """

    def read(*names: str, default: int | None = None) -> int:
        for name in names:
            raw = environ.get(name, "").strip()
            if raw:
                try:
                    return int(raw)
                except ValueError:
                    raise ValueError(f"{name} must be an integer, got {raw!r}") from None
        if default is None:
            raise ValueError(
                f"torch.distributed needs {names[0]} in the environment (the pedl "
                f"master sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for a "
                f"trial on several agents; torchrun sets them too)"
            )
        return default

    rank = read("RANK")
    size = read("WORLD_SIZE")
    local_rank = read("LOCAL_RANK", default=0)
    local_size = read("LOCAL_WORLD_SIZE", default=1)
    if local_size <= 0:
        raise ValueError(f"LOCAL_WORLD_SIZE must be positive, got {local_size}")
    explicit = any(environ.get(n, "").strip() for n in ("NODE_RANK", "GROUP_RANK")) and any(
        environ.get(n, "").strip() for n in ("NNODES", "GROUP_WORLD_SIZE")
    )
    if not explicit and size % local_size:
        # nodes may differ in size (pedl's launcher says which node this is); otherwise derive it
        raise ValueError(
            f"WORLD_SIZE ({size}) must be a multiple of LOCAL_WORLD_SIZE ({local_size}) "
            "unless NODE_RANK and NNODES are set"
        )
    cross_rank = read("NODE_RANK", "GROUP_RANK", default=rank // local_size)
    cross_size = read("NNODES", "GROUP_WORLD_SIZE", default=size // local_size)
    ranks = TorchRanks(rank, size, local_rank, local_size, cross_rank, cross_size)
    if not (0 <= rank < size and 0 <= local_rank < local_size and 0 <= cross_rank < cross_size):
        raise ValueError(f"inconsistent torch.distributed environment: {ranks}")
    return ranks


class TorchCollectives:
    """Object collectives over torch.distributed (pickled objects, like Determined's zmq ones).

    They run on gloo (CPU) even when training uses nccl: a separate gloo group keeps these small
    host-side messages off the GPU streams. Local collectives use one gloo group per node.
    """

    def __init__(
        self, ranks: TorchRanks, *, group: Any, local_group: Any, local_chief_rank: int, owns_default_group: bool
    ) -> None:
        self._ranks = ranks
        self._group = group
        self._local_group = local_group
        self._local_chief_rank = local_chief_rank
        self._owns_default_group = owns_default_group

    @classmethod
    def start(cls, ranks: TorchRanks, *, backend: str | None, timeout: datetime.timedelta) -> TorchCollectives:
        torch, dist = _import_torch()
        owns = False
        if not dist.is_initialized():
            if ranks.size > 1:
                missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
                if missing:
                    raise ValueError(
                        f"torch.distributed needs {' and '.join(missing)} in the "
                        f"environment: the chief's rendezvous address"
                    )
            else:
                # A world of one still gets a group (DDP wants one); it needs no real rendezvous.
                os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
                os.environ.setdefault("MASTER_PORT", str(free_port()))
            if backend is None:
                backend = "nccl" if torch.cuda.is_available() else "gloo"
            if backend == "nccl":
                torch.cuda.set_device(ranks.local_rank % torch.cuda.device_count())
            dist.init_process_group(
                backend=backend, init_method="env://", rank=ranks.rank, world_size=ranks.size, timeout=timeout
            )
            owns = True
        elif (dist.get_rank(), dist.get_world_size()) != (ranks.rank, ranks.size):
            raise ValueError(
                f"the torch.distributed group has rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, the environment says {ranks.rank} of {ranks.size}"
            )
        gloo = dist.get_backend() == "gloo"
        group = None if gloo else dist.new_group(backend="gloo", timeout=timeout)
        local_group, local_chief = cls._local_group(dist, ranks, timeout, group)
        return cls(ranks, group=group, local_group=local_group, local_chief_rank=local_chief, owns_default_group=owns)

    @staticmethod
    def _local_group(dist: Any, ranks: TorchRanks, timeout: datetime.timedelta, group: Any) -> tuple[Any, int]:
        """(this node's group, the global rank of its local chief); None when local == global."""
        if ranks.local_size == ranks.size:
            return group, 0
        if ranks.cross_size == ranks.size:  # one process on every node (a shortcut all can take)
            return None, ranks.rank
        # Every process must create every node's group, in the same order.
        table: list[Any] = [None] * ranks.size
        dist.all_gather_object(table, (ranks.cross_rank, ranks.local_rank), group=group)
        mine: Any = None
        chief = -1
        for node in sorted({n for n, _ in table}):
            members = sorted((local, rank) for rank, (n, local) in enumerate(table) if n == node)
            if [rank for _, rank in members] != sorted(rank for _, rank in members):
                raise ValueError(f"local ranks must follow global ranks on each node (node {node}: {members})")
            g = dist.new_group(ranks=[rank for _, rank in members], backend="gloo", timeout=timeout)
            if node == ranks.cross_rank:
                mine, chief = g, members[0][1]
        return mine, chief

    def _pick(self, local: bool) -> tuple[Any, int, int, bool]:
        """(group, global rank of its chief, its size, whether it has only this process)."""
        if local:
            return (self._local_group, self._local_chief_rank, self._ranks.local_size, self._ranks.local_size == 1)
        return self._group, 0, self._ranks.size, self._ranks.size == 1

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        group, chief, n, alone = self._pick(local)
        if alone:
            return [obj]
        _, dist = _import_torch()
        out: list[Any] | None = [None] * n if self._ranks.rank == chief else None
        dist.gather_object(obj, out, dst=chief, group=group)
        return out

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        group, _, n, alone = self._pick(local)
        if alone:
            return [obj]
        _, dist = _import_torch()
        out: list[Any] = [None] * n
        dist.all_gather_object(out, obj, group=group)
        return out

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        group, chief, _, alone = self._pick(local)
        if alone:
            return obj
        _, dist = _import_torch()
        box = [obj if self._ranks.rank == chief else None]
        dist.broadcast_object_list(box, src=chief, group=group)
        return box[0]

    def close(self) -> None:
        _, dist = _import_torch()
        if self._owns_default_group and dist.is_initialized():
            # what the training loop left in reference cycles (a DDP model's reducer and its buckets hold the
            # group and pending work) goes now, while the group and the interpreter are whole, not in the
            # interpreter's teardown after destroy_process_group (a rank that ended its work and exited with
            # SIGABRT was seen once at exit: "terminate called without an active exception")
            gc.collect()
            # ranks leave together: a rank that tears its gloo group down while a peer still talks
            # to it can abort the peer (SIGABRT at exit); a bounded wait, since a peer may be dead
            if dist.get_backend() == "gloo":
                with contextlib.suppress(Exception):
                    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
            dist.destroy_process_group()


def _import_torch() -> tuple[Any, Any]:
    try:
        import torch  # pyright: ignore[reportMissingImports]  # optional dependency, may be absent
        import torch.distributed as dist  # pyright: ignore[reportMissingImports]  # optional dependency
    except ImportError:
        raise RuntimeError(
            "distributed training (WORLD_SIZE > 1) needs PyTorch: pip install torch (or pedl[torch])"
        ) from None
    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed support")
    return torch, dist


def _timeout(timeout: float | datetime.timedelta | None) -> datetime.timedelta:
    if isinstance(timeout, datetime.timedelta):
        return timeout
    if timeout is None:
        raw = os.environ.get(TIMEOUT_ENV, "").strip()
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT_S
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if timeout <= 0:
        raise ValueError(f"the torch.distributed timeout must be positive, got {timeout}")
    return datetime.timedelta(seconds=timeout)


def distributed_from_env() -> DistributedContext:
    """What `pedl.core.init()` uses when not given a DistributedContext: torch.distributed when
    WORLD_SIZE > 1 is in the environment, else a single process."""
    raw = os.environ.get("WORLD_SIZE", "").strip()
    try:
        size = int(raw) if raw else 1
    except ValueError:
        raise ValueError(f"WORLD_SIZE must be an integer, got {raw!r}") from None
    if size > 1:
        return DistributedContext.from_torch_distributed()
    return DistributedContext.single_process()
