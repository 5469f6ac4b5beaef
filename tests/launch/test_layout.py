"""This node's workers and their ranks, from what the master and the agent set."""

from __future__ import annotations

import pytest

from pedl.launch.layout import Layout, LayoutError, layout_from_env
from pedl.master.cluster.rendezvous import node_envs


def port() -> int:
    return 40123


def test_one_node_runs_one_worker_per_slot_on_a_local_rendezvous() -> None:
    layout = layout_from_env({"DET_SLOT_IDS": "[0, 1, 2, 3]"}, free_port=port)
    assert layout == Layout(node_rank=0, node_sizes=(4,), master_addr="127.0.0.1", master_port=40123)
    assert [layout.worker_env(i)["RANK"] for i in range(4)] == ["0", "1", "2", "3"]
    env = layout.worker_env(3)
    assert (env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["NNODES"]) == ("3", "4", "4", "1")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "40123")


def test_ranks_follow_the_master_node_environment_with_nodes_of_different_sizes() -> None:
    """2 slots on the chief agent and 3 on the second: ranks 0-1 and 2-4 of 5."""
    envs = node_envs([("a1", ["0", "1"]), ("a2", ["0", "1", "2"])], addresses={"a1": "10.0.0.7"}, port=29401)
    chief = layout_from_env(envs[0])
    second = layout_from_env(envs[1])
    assert [chief.worker_env(i)["RANK"] for i in range(chief.local_size)] == ["0", "1"]
    assert [second.worker_env(i)["RANK"] for i in range(second.local_size)] == ["2", "3", "4"]
    for layout in (chief, second):
        env = layout.worker_env(0)
        assert (env["WORLD_SIZE"], env["NNODES"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
            "5",
            "2",
            "10.0.0.7",
            "29401",
        )
    assert second.worker_env(2)["LOCAL_WORLD_SIZE"] == "3" and second.worker_env(2)["NODE_RANK"] == "1"


def test_nproc_per_node_overrides_the_slot_counts_on_every_node() -> None:
    envs = node_envs([("a1", ["0", "1"]), ("a2", ["0", "1", "2"])], addresses={"a1": "h"}, port=1000)
    layout = layout_from_env(envs[1], nproc_per_node=1)
    assert layout.node_sizes == (1, 1) and layout.worker_env(0)["RANK"] == "1"


def test_a_zero_slot_task_still_runs_one_worker() -> None:
    assert layout_from_env({"DET_SLOT_IDS": "[]"}, free_port=port).node_sizes == (1,)
    assert layout_from_env({}, free_port=port).node_sizes == (1,)


@pytest.mark.parametrize(
    ("env", "nproc", "names"),
    [
        ({"NODE_RANK": "x"}, None, "NODE_RANK must be an integer"),
        (
            {"PEDL_NODE_SLOTS": "[1, 2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
            None,
            "PEDL_NODE_SLOTS is not valid JSON",
        ),
        ({"PEDL_NODE_SLOTS": "[]"}, None, "PEDL_NODE_SLOTS must be a non-empty JSON list"),
        ({"PEDL_NODE_SLOTS": "[1, -1]"}, None, "PEDL_NODE_SLOTS must be a non-empty JSON list"),
        (
            {"PEDL_NODE_SLOTS": "[1, 1]", "NNODES": "3", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
            None,
            "NNODES (3) does not match PEDL_NODE_SLOTS",
        ),
        (
            {"PEDL_NODE_SLOTS": "[1, 1]", "NODE_RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
            None,
            "NODE_RANK 2 is outside 0..1",
        ),
        ({"PEDL_NODE_SLOTS": "[1, 1]", "NODE_RANK": "1"}, None, "MASTER_ADDR and MASTER_PORT"),
        ({"NNODES": "2", "NODE_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, None, "PEDL_NODE_SLOTS (the slots"),
        ({"NNODES": "0"}, None, "NNODES must be at least 1"),
        ({"MASTER_PORT": "70000"}, None, "MASTER_PORT must be a TCP port"),
        ({"DET_SLOT_IDS": "{}"}, None, "DET_SLOT_IDS must be a JSON list"),
        ({}, 0, "--nproc-per-node must be at least 1"),
    ],
)
def test_an_inconsistent_environment_is_refused_naming_the_variable(env: dict, nproc: int | None, names: str) -> None:
    with pytest.raises(LayoutError, match=names.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        layout_from_env(env, nproc_per_node=nproc, free_port=port)


def test_a_local_rank_outside_the_node_is_refused() -> None:
    with pytest.raises(LayoutError, match="local rank 2 is outside 0..1"):
        layout_from_env({"DET_SLOT_IDS": "[0, 1]"}, free_port=port).worker_env(2)
