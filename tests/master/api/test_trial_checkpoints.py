"""GET /api/v1/trials/{id}/checkpoints in Determined's order for every sortByAttr/sortByMetric and
orderBy: by steps unless asked otherwise, DESC reversing; by the searcher metric the best first unless
an order is asked, those without a metric last either way; states and limit as the SDK sends them."""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.common.checkpoint_storage import storage_from_config
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, bearer, create_experiment, ctx_of, post

KEEP_ALL = SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 10}\n"


@pytest.fixture
def trial(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> Iterator[tuple[int, dict[int, str]]]:
    """A trial with checkpoints at steps 2, 4, 6 (validation loss 0.1, 0.5, 0.3) and 8 (none), reported
    one second apart; -> (trial id, {steps: uuid})."""
    fake = FakeAgent(app, "agent-1", slots=1)
    create_experiment(client, user, KEEP_ALL)
    [task] = fake.start_all()
    store = storage_from_config(ctx_of(app).config.effective_checkpoint_storage().model_dump())
    names: dict[int, str] = {}
    for steps, loss in ((2, 0.1), (4, 0.5), (6, 0.3), (8, None)):
        clock.advance(1)
        names[steps] = str(uuid_lib.uuid4())
        with store.store_path(names[steps]) as path:
            (path / "state.json").write_text(str(steps))
        if loss is not None:
            metrics = {
                "trialId": task.trial_id,
                "trialRunId": 1,
                "stepsCompleted": steps,
                "metrics": {"avgMetrics": {"loss": loss}},
            }
            body = {"group": "validation", "metrics": metrics}
            assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, bearer(task.token)).status_code == 200
        r = post(
            client,
            "/api/v1/checkpoints",
            {
                "uuid": names[steps],
                "allocationId": task.allocation_id,
                "taskId": task.task_id,
                "metadata": {"steps_completed": steps},
                "resources": store.resources(names[steps]),
            },
            bearer(task.token),
        )
        assert r.status_code == 200, r.text
    yield task.trial_id, names
    fake.close()


def steps_of(client: TestClient, user: dict, trial_id: int, query: str) -> list[int]:
    r = client.get(f"/api/v1/trials/{trial_id}/checkpoints?{query}", headers=user)
    assert r.status_code == 200, r.text
    return [c["metadata"]["steps_completed"] for c in r.json()["checkpoints"]]


@pytest.mark.parametrize(
    ("query", "order"),
    [
        ("", [2, 4, 6, 8]),
        ("sortByAttr=SORT_BY_UNSPECIFIED", [2, 4, 6, 8]),
        ("sortByAttr=SORT_BY_TRIAL_ID&orderBy=ORDER_BY_DESC", [8, 6, 4, 2]),
        ("sortByAttr=SORT_BY_BATCH_NUMBER", [2, 4, 6, 8]),
        ("sortByAttr=SORT_BY_BATCH_NUMBER&orderBy=ORDER_BY_DESC", [8, 6, 4, 2]),  # det trial download --latest
        ("sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_ASC", [2, 4, 6, 8]),
        ("sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_DESC", [8, 6, 4, 2]),
        ("offset=0&sortByAttr=SORT_BY_SEARCHER_METRIC", [2, 6, 4, 8]),  # det trial download --best: best first
        ("sortByAttr=SORT_BY_SEARCHER_METRIC&orderBy=ORDER_BY_ASC", [2, 6, 4, 8]),
        ("sortByAttr=SORT_BY_SEARCHER_METRIC&orderBy=ORDER_BY_DESC", [4, 6, 2, 8]),  # no metric: last either way
        ("sortByMetric=loss&orderBy=ORDER_BY_DESC", [4, 6, 2, 8]),
        ("sortByMetric=loss&orderBy=ORDER_BY_ASC", [2, 6, 4, 8]),
        ("sortByAttr=SORT_BY_SEARCHER_METRIC&limit=1", [2]),  # the SDK's trial.top_checkpoint()
        ("sortByAttr=SORT_BY_BATCH_NUMBER&orderBy=ORDER_BY_DESC&offset=1&limit=2", [6, 4]),
    ],
)
def test_the_order_of_each_sort(
    client: TestClient, user: dict, trial: tuple[int, dict[int, str]], query: str, order: list[int]
) -> None:
    assert steps_of(client, user, trial[0], query) == order


def test_uuid_order_and_states(client: TestClient, user: dict, trial: tuple[int, dict[int, str]]) -> None:
    trial_id, names = trial
    r = client.get(f"/api/v1/trials/{trial_id}/checkpoints?sortByAttr=SORT_BY_UUID", headers=user).json()
    assert [c["uuid"] for c in r["checkpoints"]] == sorted(names.values())
    assert r["pagination"]["total"] == 4
    assert steps_of(client, user, trial_id, "states=STATE_DELETED") == []
    assert steps_of(client, user, trial_id, "states=STATE_COMPLETED&sortByAttr=SORT_BY_BATCH_NUMBER") == [2, 4, 6, 8]


def test_larger_is_better_puts_the_largest_first(
    app: FastAPI, client: TestClient, user: dict, trial: tuple[int, dict[int, str]]
) -> None:
    from pedl.master.db import models

    trial_id, _ = trial
    with ctx_of(app).db.session() as s:
        exp = s.get(models.Experiment, s.get(models.Trial, trial_id).experiment_id)
        exp.config = {**exp.config, "searcher": {**exp.config["searcher"], "smaller_is_better": False}}
    assert steps_of(client, user, trial_id, "sortByAttr=SORT_BY_SEARCHER_METRIC") == [4, 6, 2, 8]
