"""The start_task spec of a command, notebook, shell or TensorBoard, built from its stored row:
what its environment may carry (variables the agent acts on as root come from the master only)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pedl.config.task_container import TaskContainerDefaults
from pedl.master.lifecycle.agent_user_groups import TaskUsers
from pedl.master.lifecycle.generic_task_specs import GenericRow, GenericRows, spec

HOST_PATH = '{"checkpoint_storage": {"type": "shared_fs", "host_path": "/root"}}'


def spec_of(environment_variables, defaults: TaskContainerDefaults | None = None) -> dict:
    # a config stored as it was taken, before submissions were checked for these variables
    config = {"entrypoint": ["true"], "environment": {"environment_variables": environment_variables}}
    task = GenericRow("cmd-1", "command", 7, config, [], [], {})
    rows = GenericRows({task.id: task}, {7: "alice"}, {})
    return spec(
        "cluster-x",
        SimpleNamespace(id="alloc-1", task_id=task.id),
        "token",
        rows,
        defaults or TaskContainerDefaults(),
        TaskUsers(None, None),
    )


@pytest.mark.parametrize(
    "variables",
    [
        [f"DET_EXPERIMENT_CONFIG={HOST_PATH}", "KEPT=1"],
        {"DET_EXPERIMENT_CONFIG": HOST_PATH, "KEPT": "1"},
        {
            "cpu": [f"DET_EXPERIMENT_CONFIG={HOST_PATH}", "KEPT=1"],
            "gpu": {"DET_EXPERIMENT_CONFIG": HOST_PATH, "KEPT": "1"},
        },
    ],
    ids=["list", "dict", "by device"],
)
def test_a_stored_config_never_sets_what_the_master_alone_sets(variables) -> None:
    got = spec_of(variables)
    for env in (got["env"], *got["device_env"].values()):
        assert "DET_EXPERIMENT_CONFIG" not in env
    assert got["env"]["DET_CLUSTER_ID"] == "cluster-x"
    kept = got["device_env"]["cpu"] if "cpu" in variables else got["env"]
    assert kept["KEPT"] == "1"  # the task's other variables reach it


def test_nor_does_a_pools_task_container_defaults() -> None:
    defaults = TaskContainerDefaults(environment_variables={"cpu": [f"DET_EXPERIMENT_CONFIG={HOST_PATH}"]})
    got = spec_of([], defaults)
    assert "DET_EXPERIMENT_CONFIG" not in got["device_env"]["cpu"]


def test_the_agent_acts_as_root_on_these_variables_alone() -> None:
    from pedl.config.task_container import MASTER_ONLY_VARIABLES

    # pedl.agent.task_info: the shared_fs host_path it mounts and the directories it creates there
    assert {"DET_EXPERIMENT_CONFIG", "DET_CLUSTER_ID"} <= MASTER_ONLY_VARIABLES
