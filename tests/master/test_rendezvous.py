"""The environment of each node of a trial placed on several agents."""

from __future__ import annotations

import json

from pedl.master.cluster.rendezvous import node_envs


def test_each_node_is_one_process_of_a_world_of_nodes_meeting_at_the_chief() -> None:
    envs = node_envs([("a1", ["0"]), ("a2", ["0", "1", "2"])], address="10.0.0.7", port=29401)
    assert [(e["RANK"], e["NODE_RANK"], e["WORLD_SIZE"], e["NNODES"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"])
            for e in envs] == [("0", "0", "2", "2", "0", "1"), ("1", "1", "2", "2", "0", "1")]
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {("10.0.0.7", "29401")}
    assert [e["PEDL_SLOTS_PER_NODE"] for e in envs] == ["1", "3"]
    assert [json.loads(e["PEDL_NODE_SLOTS"]) for e in envs] == [[1, 3], [1, 3]]
