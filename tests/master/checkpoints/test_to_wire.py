"""A checkpoint row as v1Checkpoint: the exact JSON of a known row, the training metadata of one with no
trial left empty, searcherMetric only where its step's validation has the searcher's metric, sizes as
strings, and the number of a storage config stable across calls and distinct across configs. Over the
route, the empty training and the unset searcherMetric are left out of the JSON."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.checkpoints.to_wire import checkpoint, checkpoint_files, storage_id
from pedl.master.db import models
from tests.master.fakes import ctx_of

STORAGE = {"type": "directory", "container_path": "/ckpt", "host_path": "/srv/ckpt"}
CONFIG = {"searcher": {"name": "single", "metric": "loss"}, "checkpoint_storage": STORAGE}


def row(**over) -> models.Checkpoint:
    fields = {
        "uuid": "c-1",
        "trial_id": 3,
        "experiment_id": 2,
        "task_id": "2.t",
        "allocation_id": "2.t.1",
        "state": "STATE_COMPLETED",
        "report_time": 1_700_000_000.5,
        "steps_completed": 40,
        "meta": {"note": "x"},
        "resources": {"model.pt": 1024, "code/": 0},
        "storage": STORAGE,
        "size_bytes": 1024,
        "deleting_by": None,
        **over,
    }
    return models.Checkpoint(**fields)


def test_the_json_of_a_known_row() -> None:
    exp = models.Experiment(id=2, config=CONFIG)
    trial = models.Trial(id=3, experiment_id=2, hparams={"lr": 0.1})
    sent = checkpoint(row(), exp, trial, {"loss": 0.25, "acc": 1}).model_dump(mode="json", exclude_unset=True)
    assert sent == {
        "uuid": "c-1",
        "state": "STATE_COMPLETED",
        "deleting": False,
        "metadata": {"note": "x", "steps_completed": 40},
        "resources": {"model.pt": "1024", "code/": "0"},
        "training": {
            "trialId": 3,
            "experimentId": 2,
            # host_path is pedl's own: Determined's clients would choke on it
            "experimentConfig": {**CONFIG, "checkpoint_storage": {"type": "directory", "container_path": "/ckpt"}},
            "hparams": {"lr": 0.1},
            "trainingMetrics": {"avgMetrics": {}},
            "validationMetrics": {"avgMetrics": {"loss": 0.25, "acc": 1}},
            "searcherMetric": 0.25,
        },
        "reportTime": "2023-11-14T22:13:20.500000Z",
        "taskId": "2.t",
        "allocationId": "2.t.1",
        "storage": STORAGE,
        "storageId": storage_id(STORAGE),
    }


def test_searcher_metric_only_where_the_validation_has_it() -> None:
    exp = models.Experiment(id=2, config=CONFIG)
    trial = models.Trial(id=3, experiment_id=2, hparams={})
    for validation in (None, {}, {"acc": 1}):
        training = checkpoint(row(), exp, trial, validation).training.model_dump(exclude_unset=True)
        assert "searcherMetric" not in training
        assert training["validationMetrics"] == {"avgMetrics": validation or {}}
    null = checkpoint(row(), exp, trial, {"loss": None}).training.model_dump(exclude_unset=True)
    assert null["searcherMetric"] is None


def test_a_checkpoint_of_no_trial() -> None:
    sent = checkpoint(
        row(
            trial_id=None,
            experiment_id=None,
            task_id=None,
            allocation_id=None,
            deleting_by="gc-task-1",
            meta={"steps_completed": 7},
        ),
        None,
        None,
        None,
    )
    assert sent.model_dump(mode="json", exclude_unset=True)["training"] == {}
    assert (sent.taskId, sent.allocationId, sent.deleting, sent.metadata) == ("", "", True, {"steps_completed": 7})


def test_files_and_storage_numbers() -> None:
    assert checkpoint_files(row(resources=None)) == {}
    assert checkpoint_files(row()) == {"model.pt": "1024", "code/": "0"}
    assert storage_id(STORAGE) == storage_id(dict(reversed(STORAGE.items())))  # key order does not count
    assert storage_id(STORAGE) != storage_id({**STORAGE, "container_path": "/other"})
    assert 0 < storage_id(None) == storage_id({}) < 2**31


def test_the_route_leaves_unset_fields_out(app: FastAPI, client: TestClient, user: dict) -> None:
    with ctx_of(app).db.session() as s:
        s.add(row(uuid="orphan", trial_id=None, experiment_id=None, storage={"type": "shared_fs"}))
    r = client.get("/api/v1/checkpoints/orphan", headers=user)
    assert r.status_code == 200, r.text
    assert '"training":{}' in r.text
    assert r.json()["checkpoint"]["resources"] == {"model.pt": "1024", "code/": "0"}
