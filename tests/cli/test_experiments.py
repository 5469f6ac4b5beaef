"""`pedl experiment list|describe|wait|kill|pause|activate|list-checkpoints` against a fake master."""

from __future__ import annotations

import json

import pytest

from tests.cli.fake_master import FakeMaster, experiment, page, trial


def test_list_json_filters_by_the_current_user(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/experiments", page("experiments", [experiment(1), experiment(2)]))
    result = cli("experiment", "list", "--json")
    assert result.exit_code == 0, result.output
    assert [e["id"] for e in json.loads(result.stdout)] == [1, 2]
    (req,) = master.calls("GET", "/api/v1/experiments")
    assert req.q("archived") == "false" and req.query["users"] == ["determined"]
    assert req.q("offset") == "0"


def test_list_all_has_no_filters_and_renders_a_table(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/experiments", page("experiments", [experiment(7, "STATE_COMPLETED", progress=0.5)]))
    result = cli("experiment", "list", "--all")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("GET", "/api/v1/experiments")
    assert "users" not in req.query and "archived" not in req.query
    assert "COMPLETED" in result.stdout and "50.0%" in result.stdout and "exp-7" in result.stdout


def described(master: FakeMaster, events=None) -> None:
    master.route(
        "GET",
        "/api/v1/experiments/1",
        {"experiment": experiment(1), "config": {"searcher": {"name": "single", "metric": "val_loss"}}},
    )
    master.route(
        "GET",
        "/api/v1/experiments/1/trials",
        page(
            "trials",
            [
                trial(
                    1,
                    state="STATE_COMPLETED",
                    restarts=2,
                    bestValidation={
                        "metrics": {"avgMetrics": {"val_loss": 0.25}},
                        "numInputs": 0,
                        "totalBatches": 10,
                        "endTime": "2025-01-01T00:00:00Z",
                    },
                    bestCheckpoint={"uuid": "ck-1", "state": "STATE_COMPLETED", "totalBatches": 10},
                )
            ],
        ),
    )
    if events is not None:
        master.route("GET", "/api/v1/experiments/1/events", events)


def test_describe_shows_trials_and_tolerates_a_missing_events_endpoint(cli, master: FakeMaster) -> None:
    described(master)
    result = cli("experiment", "describe", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("Experiment 1", "exp-1", "Best val_loss", "0.25", "ck-1", '"lr": 0.1', "COMPLETED"):
        assert text in out, (text, out)
    assert "Recent events" not in out


def test_describe_shows_recent_events(cli, master: FakeMaster) -> None:
    described(
        master,
        {
            "events": [
                {
                    "id": 1,
                    "entityType": "trial",
                    "entityId": 1,
                    "time": "2025-01-01T00:00:00Z",
                    "fromState": "STATE_ACTIVE",
                    "toState": "STATE_COMPLETED",
                    "level": "info",
                    "message": "trial finished",
                }
            ]
        },
    )
    result = cli("experiment", "describe", "1")
    assert result.exit_code == 0, result.output
    assert "Recent events" in result.stdout and "ACTIVE -> COMPLETED" in result.stdout
    assert "trial finished" in result.stdout


def test_describe_json(cli, master: FakeMaster) -> None:
    described(master)
    result = cli("experiment", "describe", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["experiment"]["id"] == 1 and data["trials"][0]["id"] == 1 and data["events"] is None


@pytest.mark.parametrize(
    ("final", "code"), [("STATE_COMPLETED", 0), ("STATE_ERROR", 1), ("STATE_CANCELED", 1), ("STATE_DELETED", 1)]
)
def test_wait_exit_codes(cli, master: FakeMaster, final: str, code: int) -> None:
    master.sequence(
        "GET",
        "/api/v1/experiments/5",
        [
            {"experiment": experiment(5, "STATE_ACTIVE")},
            {"experiment": experiment(5, "STATE_STOPPING_COMPLETED")},
            {"experiment": experiment(5, final)},
        ],
    )
    result = cli("experiment", "wait", "5", "--interval", "0")
    assert result.exit_code == code, result.output
    assert f"Experiment 5 is {final.removeprefix('STATE_')}" in result.stdout
    assert len(master.calls("GET", "/api/v1/experiments/5")) == 3


def test_wait_on_unknown_experiment_fails(cli, master: FakeMaster) -> None:
    result = cli("experiment", "wait", "404", "--interval", "0")
    assert result.exit_code == 1
    assert "no route GET /api/v1/experiments/404" in result.output


@pytest.mark.parametrize("verb", ["kill", "pause", "activate"])
def test_actions_post_without_a_body(cli, master: FakeMaster, verb: str) -> None:
    master.route("POST", f"/api/v1/experiments/3/{verb}", {})
    result = cli("experiment", verb, "3")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", f"/api/v1/experiments/3/{verb}")
    assert req.body == b""
    assert "Experiment 3" in result.stdout


def test_list_checkpoints(cli, master: FakeMaster) -> None:
    ck = {
        "uuid": "ck-9",
        "state": "STATE_COMPLETED",
        "metadata": {"steps_completed": 40},
        "resources": {"model.pt": "1024", "metadata.json": "24"},
        "reportTime": "2025-01-01T00:00:00Z",
        "training": {
            "trialId": 2,
            "experimentId": 1,
            "experimentConfig": {"searcher": {"metric": "acc"}},
            "validationMetrics": {"avgMetrics": {"acc": 0.9}},
        },
    }
    master.route("GET", "/api/v1/experiments/1/checkpoints", page("checkpoints", [ck]))
    result = cli("experiment", "list-checkpoints", "1")
    assert result.exit_code == 0, result.output
    for text in ("ck-9", "40", "0.9", "1.0 KiB", "Validation acc"):
        assert text in result.stdout, (text, result.stdout)
    (req,) = master.calls("GET", "/api/v1/experiments/1/checkpoints")
    assert req.q("sortByAttr") == "SORT_BY_END_TIME"
    as_json = cli("experiment", "list-checkpoints", "1", "--json")
    assert json.loads(as_json.stdout)[0]["uuid"] == "ck-9"


def test_describe_says_why_trials_ended_early(cli, master: FakeMaster) -> None:
    master.route(
        "GET",
        "/api/v1/experiments/1",
        {"experiment": experiment(1), "config": {"searcher": {"name": "adaptive_asha", "metric": "val_loss"}}},
    )
    reason = "stopped early by the searcher: stopped at rung 1 of 3 (4 batches)"
    master.route(
        "GET",
        "/api/v1/experiments/1/trials",
        page("trials", [trial(1, state="STATE_COMPLETED", endReason=reason), trial(2, state="STATE_COMPLETED")]),
    )
    result = cli("experiment", "describe", "1")
    assert result.exit_code == 0, result.output
    assert "Ended because" in result.stdout
    assert "stopped at rung 1 of 3" in " ".join(result.stdout.split())


def test_describe_picks_each_trials_checkpoint_that_still_has_files(cli, master: FakeMaster) -> None:
    """A trial list without bestCheckpoint (pedl's): the best by searcher metric among a trial's
    checkpoints not DELETED, else its latest such one; never a deleted one."""
    master.route(
        "GET",
        "/api/v1/experiments/1",
        {"experiment": experiment(1), "config": {"searcher": {"name": "grid", "metric": "loss"}}},
    )
    master.route("GET", "/api/v1/experiments/1/trials", page("trials", [trial(1), trial(2), trial(3)]))

    def ck(uuid: str, trial_id: int, steps: int, state: str = "STATE_COMPLETED", loss: float | None = None) -> dict:
        training = {"trialId": trial_id, **({"searcherMetric": loss} if loss is not None else {})}
        return {"uuid": uuid, "state": state, "metadata": {"steps_completed": steps}, "training": training}

    master.route(
        "GET",
        "/api/v1/experiments/1/checkpoints",
        page(
            "checkpoints",
            [  # best first, unscored last
                ck("ck-best-deleted", 1, 5, "STATE_DELETED", 0.1),
                ck("ck-kept", 1, 10, loss=0.2),
                ck("ck-early", 2, 5),
                ck("ck-late", 2, 10),
                ck("ck-gone", 3, 5, "STATE_DELETED"),
            ],
        ),
    )
    result = cli("experiment", "describe", "1")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("│ ")}
    assert "ck-kept" in rows["1"] and "ck-late" in rows["2"]
    assert "ck-" not in rows["3"]
    (req,) = master.calls("GET", "/api/v1/experiments/1/checkpoints")
    assert req.q("sortByAttr") == "SORT_BY_SEARCHER_METRIC"
