"""Allocations and tasks as v1AllocationSummary and v1Task, exactly."""

from __future__ import annotations

from pedl.master.db import models
from pedl.master.lifecycle.states import AllocationState as A
from pedl.master.tasks import to_wire


def an_allocation(alloc_id: str, state: A, **extra) -> models.Allocation:
    fields = dict(
        id=alloc_id,
        task_id="t-1",
        name="Trial 1",
        state=state,
        resource_pool="default",
        slots_needed=1,
        priority=42,
        assignment=[],
        queued_at=0.0,
        started_at=None,
        ended_at=None,
        exit_code=None,
        exit_reason=None,
        proxy_port=None,
        wait_reason=None,
    )
    return models.Allocation(**{**fields, **extra})


def test_a_pending_allocation_is_queued_with_its_wait_reason() -> None:
    shown = to_wire.allocation_summary(an_allocation("t-1.1", A.PENDING, wait_reason="no free slot"), {})
    assert shown.model_dump(exclude_unset=True) == {
        "taskId": "t-1",
        "allocationId": "t-1.1",
        "name": "Trial 1",
        "slotsNeeded": 1,
        "registeredTime": "1970-01-01T00:00:00Z",
        "resources": [],
        "resourcePool": "default",
        "priority": 42,
        "schedulerType": "priority",
        "proxyPorts": [],
        "state": "STATE_QUEUED",
        "waitReason": "no free slot",
    }


def test_a_running_allocation_shows_its_agents_devices_and_its_proxy_port() -> None:
    agent = models.Agent(id="a1", slots=[{"id": "a1-0", "type": "cpu"}, {"id": "a1-1", "type": "cpu"}])
    alloc = an_allocation(
        "t-1.1",
        A.RUNNING,
        assignment=[{"agent_id": "a1", "slot_ids": ["a1-1", "gone"]}],
        started_at=1.0,
        proxy_port=8888,
        wait_reason="stale",
    )
    shown = to_wire.allocation_summary(alloc, {"a1": agent}).model_dump(exclude_unset=True)
    assert shown["state"] == "STATE_RUNNING" and shown["waitReason"] is None
    assert shown["resources"] == [
        {
            "resourcesId": "t-1.1",
            "resourcesType": "process",
            "allocationId": "t-1.1",
            "containerId": "t-1.1",
            "agentDevices": {"a1": {"devices": [{"id": 1, "type": "TYPE_CPU", "brand": "CPU", "uuid": ""}]}},
            "started": {"addresses": []},
            "exited": None,
        }
    ]
    assert shown["proxyPorts"] == [{"port": 8888, "proxyTcp": False, "serviceId": "t-1", "unauthenticated": False}]


def test_a_trials_task_and_a_notebooks() -> None:
    trial = models.Trial(id=5, experiment_id=2, task_id="t-1", start_time=0.0, end_time=None)
    ended = an_allocation("t-1.1", A.TERMINATED, ended_at=3.0, exit_code=0, exit_reason="done")
    running = an_allocation("t-1.2", A.RUNNING)
    shown = to_wire.task(trial, [ended, running]).model_dump(exclude_unset=True)
    assert (shown["trialId"], shown["experimentId"], shown["endTime"]) == (5, 2, None)
    assert [(a["state"], a["isReady"], a["statusCode"]) for a in shown["allocations"]] == [
        ("STATE_TERMINATED", False, 0),
        ("STATE_RUNNING", True, None),
    ]
    notebook = models.GenericTask(id="nb-1", kind="notebook", start_time=0.0)
    served = to_wire.task(notebook, [running]).model_dump(exclude_unset=True)
    assert "trialId" not in served and served["taskType"] == "TASK_TYPE_NOTEBOOK"
    assert served["allocations"][0]["isReady"] is False  # a notebook is ready once it registered its port


def test_a_log_line_repeats_its_message_as_log_and_gives_back_its_nuls() -> None:
    from pedl.master.lifecycle.log_lines import storable

    row = models.TaskLog(
        id=12,
        task_id="t-1",
        allocation_id=None,
        trial_id=None,
        agent_id=None,
        level="LOG_LEVEL_INFO",
        message=storable("a\x00b"),
        timestamp=0.0,
        source="task",
        stdtype="stdout",
    )
    assert to_wire.log_line(row).model_dump() == {
        "id": "12",
        "trialId": 0,
        "level": "LOG_LEVEL_INFO",
        "message": "a\x00b",
        "log": "a\x00b",
        "timestamp": "1970-01-01T00:00:00Z",
        "agentId": "",
        "source": "task",
        "stdtype": "stdout",
        "taskId": "t-1",
        "allocationId": "",
    }


def a_task(kind: str, **extra) -> models.GenericTask:
    fields = dict(
        id="g-1",
        kind=kind,
        owner_id=3,
        workspace_id=1,
        description="desc",
        start_time=0.0,
        experiment_ids=[4],
        trial_ids=[],
        secrets={"public_key": "pub", "private_key": "priv"},
    )
    return models.GenericTask(**{**fields, **extra})


def test_a_queued_command_exactly() -> None:
    assert to_wire.generic_task(a_task("command"), None, "alice", None, private_key=True).model_dump() == {
        "id": "g-1",
        "description": "desc",
        "jobId": "g-1",
        "resourcePool": "",
        "startTime": "1970-01-01T00:00:00Z",
        "state": "STATE_QUEUED",
        "username": "alice",
        "userId": 3,
        "displayName": "alice",
        "workspaceId": 1,
        "exitStatus": "",
        "isReady": False,
    }


def test_a_tensorboard_names_its_experiments_and_where_it_is_served() -> None:
    shown = to_wire.generic_task(
        a_task("tensorboard"), an_allocation("g-1.1", A.RUNNING), "alice", None, private_key=False
    ).model_dump(exclude_unset=True)
    assert (shown["serviceAddress"], shown["experimentIds"], shown["trialIds"]) == ("/proxy/g-1/", [4], [])
    assert shown["state"] == "STATE_RUNNING" and shown["isReady"] is False  # no port registered yet


def test_a_shells_private_key_goes_only_where_asked() -> None:
    theirs = to_wire.generic_task(a_task("shell"), None, "alice", None, private_key=False)
    mine = to_wire.generic_task(a_task("shell"), None, "alice", None, private_key=True)
    assert "privateKey" not in theirs.model_dump(exclude_unset=True)
    assert mine.model_dump(exclude_unset=True)["privateKey"] == "priv"
    assert mine.model_dump()["agentUserGroup"] == {"uid": 0, "gid": 0, "user": "root", "group": "root"}
