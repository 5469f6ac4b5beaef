"""v1Task: a trial's task names its trial and experiment; a generic task's leaves both out."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.task import GetTaskResponse, Task


def test_a_generic_task_sends_no_trial_or_experiment() -> None:
    task = Task(taskId="cmd-1", taskType="TASK_TYPE_COMMAND", startTime=None, endTime=None, allocations=[])
    assert set(GetTaskResponse(task=task).model_dump(exclude_unset=True)["task"]) == {
        "taskId",
        "taskType",
        "startTime",
        "endTime",
        "allocations",
    }


def test_a_trials_task_sends_both() -> None:
    task = Task(
        taskId="1.1",
        taskType="TASK_TYPE_TRIAL",
        startTime=None,
        endTime=None,
        trialId=1,
        experimentId=1,
        allocations=[],
    )
    assert task.model_dump(exclude_unset=True)["trialId"] == 1


def test_an_allocation_needs_its_state() -> None:
    with pytest.raises(ValidationError, match="state"):
        Task.model_validate(
            {
                "taskId": "t",
                "taskType": "TASK_TYPE_TRIAL",
                "startTime": None,
                "endTime": None,
                "allocations": [
                    {
                        "taskId": "t",
                        "allocationId": "t.1",
                        "isReady": False,
                        "slots": 1,
                        "startTime": None,
                        "endTime": None,
                        "exitReason": None,
                        "statusCode": None,
                    }
                ],
            }
        )
