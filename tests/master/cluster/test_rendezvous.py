"""The environment of each node of a trial placed on several agents."""

from __future__ import annotations

import json

from pedl.master.cluster.rendezvous import node_envs, pick_port


def test_each_node_is_one_process_of_a_world_of_nodes_meeting_at_the_chief() -> None:
    envs = node_envs(
        [("a1", ["0"]), ("a2", ["0", "1", "2"])], addresses={"a1": "10.0.0.7", "a2": "10.0.0.8"}, port=29401
    )
    assert [
        (e["RANK"], e["NODE_RANK"], e["WORLD_SIZE"], e["NNODES"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs
    ] == [("0", "0", "2", "2", "0", "1"), ("1", "1", "2", "2", "0", "1")]
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {("10.0.0.7", "29401")}
    assert [e["PEDL_SLOTS_PER_NODE"] for e in envs] == ["1", "3"]
    assert [json.loads(e["PEDL_NODE_SLOTS"]) for e in envs] == [[1, 3], [1, 3]]
    # Determined's rendezvous.json (written by the agent) and its launcher's port
    assert [json.loads(e["PEDL_NODE_ADDRS"]) for e in envs] == [["10.0.0.7", "10.0.0.8"]] * 2
    assert {e["C10D_PORT"] for e in envs} == {"29401"}


def test_a_port_is_free_of_the_taken_ones_and_none_when_all_are() -> None:
    ports = range(29400, 29404)
    assert pick_port(ports, set(), seed="1.1.1") in ports
    taken = {29400, 29401, 29402}
    assert pick_port(ports, taken, seed="1.1.1") == 29403
    assert pick_port(ports, set(ports), seed="1.1.1") is None
    assert pick_port(range(0), set(), seed="x") is None


def test_each_run_of_a_trial_starts_its_search_elsewhere_in_the_range() -> None:
    """A port busy on the chief's host outside pedl fails one run; the next run (a new allocation
    id) must not pick the same port again, as taking the range's first free port would."""
    ports = range(29400, 30000)
    picks = {pick_port(ports, set(), seed=f"7.3.{run}") for run in range(1, 21)}
    assert len(picks) > 15
    assert pick_port(ports, set(), seed="7.3.1") == pick_port(ports, set(), seed="7.3.1")  # stable per allocation
