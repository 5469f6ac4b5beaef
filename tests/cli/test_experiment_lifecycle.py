"""`pedl experiment delete|continue|set max-slots` and `pedl trial download --best|--latest` against a
real master app, each checked through the API (and the downloaded files on disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.experiment_lifecycle import overrides
from pedl.cli.main import app as cli_app
from pedl.devcluster import wait_for
from tests.cli.test_experiments_live import Live, checkpoint, live, started, validation  # noqa: F401
from tests.master.fakes import SINGLE_CONFIG

KEEP_ALL = SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 10}\n"


def shown(live: Live, exp_id: int) -> dict | None:  # noqa: F811
    r = live.http.get(f"/api/v1/experiments/{exp_id}", headers=live.user)
    return {**r.json()["experiment"], "config": r.json()["config"]} if r.status_code == 200 else None


def ended(live: Live) -> tuple[int, dict[int, str]]:  # noqa: F811
    """A completed single-trial experiment with checkpoints at 2 (loss 0.1), 4 (0.5) and 6 (0.3)."""
    exp_id, task = started(live, KEEP_ALL)
    names = {}
    for steps, loss in ((2, 0.1), (4, 0.5), (6, 0.3)):
        validation(live, task, steps, loss)
        names[steps] = checkpoint(live, task, steps)
    live.agent.exit(task.allocation_id, 0)
    assert shown(live, exp_id)["state"] == "STATE_COMPLETED"
    return exp_id, names


def test_set_max_slots_changes_the_config(live: Live) -> None:  # noqa: F811
    exp_id, _task = started(live)
    r = live.cli("experiment", "set", "max-slots", str(exp_id), "3")
    assert r.exit_code == 0, r.output
    assert shown(live, exp_id)["config"]["resources"]["max_slots"] == 3
    assert live.cli("experiment", "set", "max-slots", str(exp_id), "none").exit_code == 0
    assert shown(live, exp_id)["config"]["resources"]["max_slots"] is None
    bad = live.cli("experiment", "set", "max-slots", str(exp_id), "many")
    assert bad.exit_code != 0 and "number of slots" in bad.output


def test_continue_with_config_and_config_file(live: Live, tmp_path: Path) -> None:  # noqa: F811
    exp_id, _ = ended(live)
    extra = tmp_path / "more.yaml"
    extra.write_text("searcher:\n  max_length:\n    batches: 50\nmax_restarts: 2\n")
    r = live.cli(
        "experiment", "continue", str(exp_id), "--config-file", str(extra), "--config", "searcher.max_length.batches=40"
    )
    assert r.exit_code == 0, r.output
    exp = shown(live, exp_id)
    assert exp["state"] in ("STATE_QUEUED", "STATE_STARTING")  # active, its trial's new run not yet started
    assert exp["config"]["searcher"]["max_length"]["batches"] == 40 and exp["config"]["max_restarts"] == 2
    [task] = live.agent.start_all()  # its trial's new run
    assert json.loads(task.message["env"]["DET_EXPERIMENT_CONFIG"])["searcher"]["max_length"]["batches"] == 40
    again = live.cli("experiment", "continue", str(exp_id))
    assert again.exit_code != 0 and "is RUNNING:" in again.output  # as the API shows it: its run started


def test_delete_asks_first_unless_told_yes(live: Live) -> None:  # noqa: F811
    exp_id, _ = ended(live)
    declined = CliRunner().invoke(cli_app, ["-m", live.master.url, "experiment", "delete", str(exp_id)], input="n\n")
    assert declined.exit_code == 1 and shown(live, exp_id)["state"] == "STATE_COMPLETED"
    r = live.cli("experiment", "delete", str(exp_id), "--yes")
    assert r.exit_code == 0, r.output
    wait_for(lambda: shown(live, exp_id) is None, 20, interval=0.05, what="the deletion")


@pytest.mark.parametrize(("flag", "steps"), [("--best", 2), ("--latest", 6)])
def test_trial_download_takes_the_best_or_the_latest(
    live: Live,  # noqa: F811
    tmp_path: Path,
    flag: str,
    steps: int,
) -> None:
    exp_id, names = ended(live)
    [trial] = live.http.get(f"/api/v1/experiments/{exp_id}/trials", headers=live.user).json()["trials"]
    out = tmp_path / "got"
    r = live.cli("trial", "download", str(trial["id"]), flag, "--output", str(out))
    assert r.exit_code == 0, r.output
    assert names[steps] in r.output
    assert json.loads((out / "state.json").read_text()) == {"step": steps}


def test_trial_download_needs_one_choice_and_a_metric_for_best(live: Live) -> None:  # noqa: F811
    exp_id, task = started(live, KEEP_ALL)
    checkpoint(live, task, 3)  # no validation
    assert live.cli("trial", "download", str(task.trial_id)).exit_code != 0
    best = live.cli("trial", "download", str(task.trial_id), "--best")
    assert best.exit_code != 0 and "--latest" in best.output


def test_overrides_are_the_file_then_each_pair(tmp_path: Path) -> None:
    f = tmp_path / "o.yaml"
    f.write_text("searcher: {max_length: {batches: 5}}\nhyperparameters: {lr: 0.1}\n")
    assert overrides(f, ["searcher.max_length.batches=7", "hyperparameters.opt.m=[1, 2]", "name=x"]) == {
        "searcher": {"max_length": {"batches": 7}},
        "hyperparameters": {"lr": 0.1, "opt": {"m": [1, 2]}},
        "name": "x",
    }
