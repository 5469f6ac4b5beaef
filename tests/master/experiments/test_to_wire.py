"""An experiment row as v1Experiment: the exact shape of a known row, and the empty experiment a validateOnly
create answers with; over the API, the keys it leaves unset stay out of the JSON."""

from __future__ import annotations

from fastapi.testclient import TestClient

from pedl.master.checkpoints.totals import CheckpointTotals
from pedl.master.db import models
from pedl.master.experiments import to_wire
from pedl.master.experiments.listing import ExperimentStats
from pedl.master.workspaces import Placement
from tests.master.fakes import SINGLE_CONFIG, post

CONFIG = {"searcher": {"name": "grid", "metric": "loss"}, "resources": {"slots_per_trial": 1}}


def row(**changes: object) -> models.Experiment:
    fields: dict = dict(
        id=7,
        name="exp",
        description="d",
        labels="a\x1fb",
        archived=False,
        config=CONFIG,
        original_config="name: exp",
        project_id=3,
        owner_id=2,
        start_time=1700000000.0,
        end_time=None,
        state="STATE_ACTIVE",
        progress=0.25,
        resource_pool="default",
        parent_id=None,
        notes="",
        end_reason=None,
    )
    return models.Experiment(**{**fields, **changes})


def test_a_known_row_has_exactly_this_shape() -> None:
    stats = ExperimentStats(
        num_trials=4,
        active_trials=1,
        best_metric=0.5,
        best_trial_id=9,
        state="STATE_RUNNING",
        checkpoints=CheckpointTotals(count=2, size=2048),
    )
    place = Placement(project_name="p", project_owner_id=5, workspace_id=6, workspace_name="w")
    got = to_wire.experiment(row(), "alice", stats, place).model_dump(exclude_unset=True)
    assert got == {
        "id": 7,
        "name": "exp",
        "description": "d",
        "labels": ["a", "b"],
        "archived": False,
        "config": CONFIG,
        "originalConfig": "name: exp",
        "jobId": "job-7",
        "numTrials": 4,
        "projectId": 3,
        "projectOwnerId": 5,
        "activeTrials": 1,
        "bestTrialSearcherMetric": 0.5,
        "bestTrialId": 9,
        "searcherType": "grid",
        "searcherMetric": "loss",
        "startTime": "2023-11-14T22:13:20Z",
        "endTime": None,
        "state": "STATE_RUNNING",
        "username": "alice",
        "userId": 2,
        "progress": 0.25,
        "resourcePool": "default",
        "forkedFrom": None,
        "notes": "",
        "projectName": "p",
        "workspaceName": "w",
        "workspaceId": 6,
        "parentArchived": False,
        "unmanaged": False,
        "endReason": None,
        "checkpointCount": 2,
        "checkpointSize": "2048",
    }


def test_without_statistics_the_stored_state_and_the_default_place_show() -> None:
    got = to_wire.experiment(row(state="STATE_PAUSED", config={}), "", ExperimentStats())
    assert (got.state, got.searcherType, got.searcherMetric) == ("STATE_PAUSED", "single", "")
    assert (got.projectName, got.workspaceId, got.checkpointSize) == ("Uncategorized", 1, "0")


def test_the_validated_only_experiment_sets_only_determineds_zero_fields() -> None:
    assert to_wire.validated_only().model_dump(exclude_unset=True) == {
        "id": 0,
        "name": "",
        "description": "",
        "labels": [],
        "archived": False,
        "config": None,
        "originalConfig": "",
        "jobId": "",
        "numTrials": 0,
        "projectId": 0,
        "projectOwnerId": 0,
        "searcherType": "",
        "startTime": "0001-01-01T00:00:00Z",
        "state": "STATE_UNSPECIFIED",
        "username": "",
        "userId": 0,
        "progress": 0.0,
        "resourcePool": "",
        "notes": "",
        "unmanaged": False,
    }


def test_a_validate_only_create_leaves_the_unset_keys_out_of_the_json(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/experiments", {"config": SINGLE_CONFIG, "validateOnly": True}, user)
    assert r.status_code == 200, r.text
    experiment = r.json()["experiment"]
    assert experiment["config"] is None
    assert not {"activeTrials", "endTime", "bestTrialId", "checkpointSize", "projectName"} & set(experiment)
    assert r.json()["warnings"] == [] and r.json()["config"]["searcher"]["metric"] == "loss"


def test_an_event_exactly() -> None:
    ev = models.Event(
        id=4,
        entity_type="trial",
        entity_id="9",
        time=0.0,
        from_state=None,
        to_state="STATE_ACTIVE",
        level="info",
        message="created",
    )
    assert to_wire.event(ev).model_dump() == {
        "id": 4,
        "entityType": "trial",
        "entityId": "9",
        "time": "1970-01-01T00:00:00Z",
        "fromState": None,
        "toState": "STATE_ACTIVE",
        "level": "info",
        "message": "created",
    }


def test_a_job_exactly() -> None:
    from pedl.master.cluster.job_queue import Job

    queued = Job(experiment_id=7, pool="gpu", priority=10, position=0.0, requested_slots=2, jobs_ahead=1)
    shown = to_wire.job(queued, row(config={**CONFIG, "resources": {"weight": 2}}), "alice", 4, preemptible=False)
    assert shown.model_dump() == {
        "jobId": "job-7",
        "type": "TYPE_EXPERIMENT",
        "entityId": "7",
        "name": "exp",
        "submissionTime": "2023-11-14T22:13:20Z",
        "username": "alice",
        "userId": 2,
        "resourcePool": "gpu",
        "isPreemptible": False,
        "priority": 10,
        "weight": 2.0,
        "requestedSlots": 2,
        "allocatedSlots": 0,
        "workspaceId": 4,
        "progress": 0.25,
        "summary": {"jobsAhead": 1, "state": "STATE_QUEUED"},
    }
