"""Checkpoints on S3, end to end: a grid experiment of real trial processes stores its checkpoints
in a bucket of a moto S3 server; garbage collection keeps only what save_trial_latest,
save_trial_best and save_experiment_best ask for, deletes the rest from the bucket and marks it
STATE_DELETED; the CLI lists them and downloads a kept one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import Cluster
from tests.support.databases import fresh_postgres_db
from tests.support.moto_server import FAKE_AWS_ENV, REGION, moto_server_fixture, reset_moto  # noqa: F401

pytestmark = pytest.mark.e2e
BUCKET = "pedl-e2e-ckpts"
PREFIX = "e2e/checkpoints"


@pytest.fixture
def s3(moto_server: str) -> Iterator[object]:
    reset_moto(moto_server)
    client = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "s3", endpoint_url=moto_server, region_name=REGION
    )
    client.create_bucket(Bucket=BUCKET)
    yield client


@pytest.fixture(params=["sqlite", "postgres"])
def s3_cluster(request: pytest.FixtureRequest, tmp_path: Path, s3: object, moto_server: str) -> Iterator[Cluster]:
    """A cluster whose master has (fake) AWS credentials: it deletes and streams S3 checkpoints."""

    def make(db: dict | None) -> Cluster:
        # the bucket is not the master's own storage: it must be an allowed storage root
        c = Cluster(
            tmp_path,
            db,
            {"security": {"checkpoint_storage_roots": [f"s3://{BUCKET}/{PREFIX}"], "s3_endpoint_urls": [moto_server]}},
        )
        c.master.env.update(FAKE_AWS_ENV)
        return c.start()

    if request.param == "postgres":
        from tests.conftest import require_postgres

        require_postgres()
        with fresh_postgres_db() as db:
            c = make(db)
            yield c
            c.stop()
        return
    c = make(None)
    yield c
    c.stop()


def s3_keys(s3) -> dict[str, int]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX + "/")
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents") or []}


def experiment_config(endpoint: str) -> dict:
    return {
        "name": "s3-gc",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        # validation_loss = |step - val_best_at| + 0.01: each trial's best checkpoint is not its latest
        "hyperparameters": {
            "steps": 15,
            "delay": 0.02,
            "ckpt_every": 5,
            "val_best_at": {"type": "categorical", "vals": [5, 10]},
        },
        "searcher": {
            "name": "grid",
            "metric": "validation_loss",
            "smaller_is_better": True,
            "max_length": {"batches": 15},
        },
        "resources": {"slots_per_trial": 1},
        "checkpoint_storage": {
            "type": "s3",
            "bucket": BUCKET,
            "prefix": PREFIX,
            "endpoint_url": endpoint,
            "save_trial_latest": 1,
            "save_trial_best": 1,
            "save_experiment_best": 1,
        },
        # the trial processes write to the bucket with these
        "environment": {"environment_variables": dict(FAKE_AWS_ENV)},
    }


def test_s3_checkpoints_are_garbage_collected_and_downloadable(
    s3_cluster: Cluster, s3, moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = s3_cluster
    c.add_agent("a1")
    c.add_agent("a2")
    exp_id = c.create(experiment_config(moto_server))
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=180)
    assert exp["state"] == "STATE_COMPLETED", (exp, c.master.log_text()[-3000:])
    trials = {t["id"]: t for t in c.trials(exp_id)}
    assert len(trials) == 2 and all(t["state"] == "STATE_COMPLETED" for t in trials.values())
    best_at = {tid: t["hparams"]["val_best_at"] for tid, t in trials.items()}

    def checkpoints() -> list[dict]:
        return c.master.api("GET", "/api/v1/checkpoints", experimentId=exp_id)["checkpoints"]

    # 3 checkpoints per trial (steps 5, 10, 15); each trial keeps its best and its latest
    wait_for(
        lambda: sum(ck["state"] == "STATE_DELETED" for ck in checkpoints()) == 2,
        60,
        what="checkpoint garbage collection",
    )
    by_state: dict[str, set[tuple[int, int]]] = {}
    uuid_of = {}
    for ck in checkpoints():
        point = (ck["training"]["trialId"], ck["metadata"]["steps_completed"])
        by_state.setdefault(ck["state"], set()).add(point)
        uuid_of[point] = ck["uuid"]
    kept = {(tid, 15) for tid in trials} | {(tid, best_at[tid]) for tid in trials}
    assert by_state["STATE_COMPLETED"] == kept
    assert by_state["STATE_DELETED"] == {(tid, steps) for tid in trials for steps in (5, 10)} - kept
    assert set(by_state) == {"STATE_COMPLETED", "STATE_DELETED"}

    # only the kept checkpoints are left in the bucket, each with its files
    keys = s3_keys(s3)
    assert {k.split("/")[2] for k in keys} == {uuid_of[p] for p in kept}
    for point in kept:
        assert f"{PREFIX}/{uuid_of[point]}/state.json" in keys
        assert f"{PREFIX}/{uuid_of[point]}/metadata.json" in keys

    # the deletions are on record
    events = c.master.api("GET", f"/api/v1/experiments/{exp_id}/events")["events"]
    assert sum("garbage collection deleted 1 checkpoint(s)" in e["message"] for e in events) == 2

    # the CLI: list-checkpoints and checkpoint list show the states; download brings back a kept one
    monkeypatch.setenv("PEDL_CONFIG_DIR", str(tmp_path / "cli-config"))
    runner = CliRunner()
    listed = runner.invoke(app, ["-m", c.master.url, "experiment", "list-checkpoints", str(exp_id)])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.count("DELETED") == 2 and listed.stdout.count("COMPLETED") == 4
    listed = runner.invoke(
        app, ["-m", c.master.url, "checkpoint", "list", "--experiment", str(exp_id), "--state", "COMPLETED", "--json"]
    )
    assert {ck["uuid"] for ck in json.loads(listed.stdout)} == {uuid_of[p] for p in kept}

    trial_b = next(tid for tid in trials if best_at[tid] == 10)
    best = uuid_of[(trial_b, 10)]
    out = tmp_path / "downloaded"
    result = runner.invoke(app, ["-m", c.master.url, "checkpoint", "download", best, "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "streamed from the master" in result.stdout
    assert json.loads((out / "state.json").read_text()) == {"step": 10}
    assert json.loads((out / "metadata.json").read_text()) == {"steps_completed": 10}
    assert sorted(p.name for p in out.iterdir()) == ["metadata.json", "state.json"]

    # a deleted one cannot be downloaded
    gone = uuid_of[(trial_b, 5)]
    result = runner.invoke(app, ["-m", c.master.url, "checkpoint", "download", gone, "-o", str(tmp_path / "gone")])
    assert result.exit_code == 1 and "was deleted" in result.output
