"""Where each worker process of this node sits in the trial's world (pure).

The master tells each node its place (NODE_RANK, NNODES, PEDL_NODE_SLOTS, MASTER_ADDR/PORT; see
pedl.master.cluster.rendezvous) and the agent its slots (DET_SLOT_IDS). A node runs one worker per
slot, so its workers' global ranks start after the slots of the nodes before it; nodes may have
different numbers of slots.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pedl.common import ports


class LayoutError(ValueError):
    """The environment does not describe a consistent world; the message names the variable."""


@dataclass(frozen=True)
class Layout:
    node_rank: int
    node_sizes: tuple[int, ...]  # workers per node, in node order
    master_addr: str
    master_port: int

    @property
    def local_size(self) -> int:
        return self.node_sizes[self.node_rank]

    @property
    def world_size(self) -> int:
        return sum(self.node_sizes)

    @property
    def first_rank(self) -> int:
        return sum(self.node_sizes[: self.node_rank])

    def worker_env(self, local_rank: int) -> dict[str, str]:
        """torch.distributed's variables (torchrun's names) for one worker of this node."""
        if not 0 <= local_rank < self.local_size:
            raise LayoutError(f"local rank {local_rank} is outside 0..{self.local_size - 1}")
        return {
            "RANK": str(self.first_rank + local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_size),
            "NODE_RANK": str(self.node_rank),
            "GROUP_RANK": str(self.node_rank),
            "NNODES": str(len(self.node_sizes)),
            "GROUP_WORLD_SIZE": str(len(self.node_sizes)),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def layout_from_env(
    environ: Mapping[str, str], *, nproc_per_node: int | None = None, free_port: Callable[[], int] = ports.free_port
) -> Layout:
    """This node's layout. `nproc_per_node` (every node the same) overrides the slot counts.

    On one node with no MASTER_ADDR/MASTER_PORT the workers meet on 127.0.0.1 at `free_port()`.
    """
    if nproc_per_node is not None and nproc_per_node < 1:
        raise LayoutError(f"--nproc-per-node must be at least 1, got {nproc_per_node}")
    node_rank = _int(environ, "NODE_RANK", 0)
    slots = _json_ints(environ, "PEDL_NODE_SLOTS")
    if slots is None:
        nnodes = _int(environ, "NNODES", 1)
        if nnodes < 1:
            raise LayoutError(f"NNODES must be at least 1, got {nnodes}")
        if nnodes > 1 and nproc_per_node is None:
            raise LayoutError(
                "PEDL_NODE_SLOTS (the slots of every node) is missing for a trial on "
                f"{nnodes} nodes; pass --nproc-per-node to run the same number on each"
            )
        here = _slot_count(environ)
        slots = [here] * nnodes
    elif "NNODES" in environ and _int(environ, "NNODES", 0) != len(slots):
        raise LayoutError(f"NNODES ({environ['NNODES']}) does not match PEDL_NODE_SLOTS ({len(slots)} nodes)")
    if not 0 <= node_rank < len(slots):
        raise LayoutError(f"NODE_RANK {node_rank} is outside 0..{len(slots) - 1}")
    # a zero-slot node (a CPU-only task) still runs one worker
    sizes = tuple(nproc_per_node or max(n, 1) for n in slots)
    addr = environ.get("MASTER_ADDR", "").strip()
    raw_port = environ.get("MASTER_PORT", "").strip()
    if len(sizes) > 1 and not (addr and raw_port):
        raise LayoutError(
            "MASTER_ADDR and MASTER_PORT (the chief node's rendezvous address) are needed for a trial on several nodes"
        )
    if raw_port:
        port = _int(environ, "MASTER_PORT", 0)
        if not 0 < port < 65536:
            raise LayoutError(f"MASTER_PORT must be a TCP port, got {raw_port!r}")
    else:
        port = free_port()
    return Layout(node_rank=node_rank, node_sizes=sizes, master_addr=addr or "127.0.0.1", master_port=port)


def _slot_count(environ: Mapping[str, str]) -> int:
    raw = environ.get("DET_SLOT_IDS", "").strip()
    if not raw:
        return 1
    try:
        ids = json.loads(raw)
    except ValueError:
        raise LayoutError(f"DET_SLOT_IDS is not a JSON list: {raw[:100]!r}") from None
    if not isinstance(ids, list):
        raise LayoutError(f"DET_SLOT_IDS must be a JSON list, got {raw[:100]!r}")
    return len(ids)


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise LayoutError(f"{name} must be an integer, got {raw!r}") from None


def _json_ints(environ: Mapping[str, str], name: str) -> list[int] | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise LayoutError(f"{name} is not valid JSON: {raw[:100]!r}") from None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
    ):
        raise LayoutError(f"{name} must be a non-empty JSON list of slot counts, got {raw[:100]!r}")
    return value
