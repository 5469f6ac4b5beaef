"""What each node of a trial spread over several agents is told about the others (pure).

The master starts one process per agent. It gets torch.distributed's variables for a world of one
process per node (so a plain `python3 train.py` per agent trains together), plus `PEDL_NODE_SLOTS`,
the slots of every node in node order, from which `pedl.launch.torch_distributed` derives the
ranks of one process per slot when the entrypoint asks for that.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Collection, Mapping, Sequence


def node_envs(
    placements: Sequence[tuple[str, Sequence[str]]], *, addresses: Mapping[str, str], port: int
) -> list[dict[str, str]]:
    """One environment per placement (agent id, slot ids); placement 0 is the chief node.

    `PEDL_NODE_ADDRS` (every node's address, in rank order) is what the agent writes into
    Determined's rendezvous.json, and `C10D_PORT` is the port Determined's launcher
    (`determined.launch.torch_distributed`) gives torch.distributed.run: the chief's MASTER_PORT."""
    nodes = str(len(placements))
    node_slots = json.dumps([len(slot_ids) for _, slot_ids in placements])
    node_addrs = [addresses.get(agent_id) or "127.0.0.1" for agent_id, _ in placements]
    return [
        {
            "RANK": str(rank),
            "NODE_RANK": str(rank),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": nodes,
            "NNODES": nodes,
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": node_addrs[0],
            "MASTER_PORT": str(port),
            "C10D_PORT": str(port),
            "PEDL_SLOTS_PER_NODE": str(len(slot_ids)),
            "PEDL_NODE_SLOTS": node_slots,
            "PEDL_NODE_ADDRS": json.dumps(node_addrs),
        }
        for rank, (_, slot_ids) in enumerate(placements)
    ]


def pick_port(ports: range, taken: Collection[int], *, seed: str) -> int | None:
    """A port of `ports` not in `taken`, or None when all are.

    The search starts at a place derived from `seed` (the allocation id), so a trial restarted
    after its port was busy on the chief's host tries another one, and masters sharing hosts
    spread out, instead of everyone taking the range's first port.
    """
    if not ports:
        return None
    start = zlib.crc32(seed.encode()) % len(ports)
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        if port not in taken:
            return port
    return None
