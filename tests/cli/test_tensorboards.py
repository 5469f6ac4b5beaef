"""`pedl tensorboard start EXP_ID...|open|list|kill` against a real master app whose tasks a FakeAgent
runs: start sends the experiments and trials, waits until ready and prints the URL through the
master's proxy; the list shows which experiments each one shows."""

from __future__ import annotations

from tests.cli.ntsc_live import Live
from tests.master.fakes import SINGLE_CONFIG, create_experiment


def test_start_shows_experiments_and_prints_the_url_once_ready(live: Live) -> None:
    exp_id = create_experiment(live.http, live.user, SINGLE_CONFIG, activate=False)["id"]  # type: ignore[arg-type]

    def ready() -> None:
        [task] = live.start_all()
        live.serve(task, 6006)

    live.between(ready)
    result = live.cli("tensorboard", "start", str(exp_id))
    assert result.exit_code == 0, result.output
    [tb] = live.get("/api/v1/tensorboards")["tensorboards"]
    assert tb["experimentIds"] == [exp_id]
    assert result.stdout == f"{live.url}/proxy/{tb['id']}/\n"
    listed = live.cli("tensorboard", "list")
    assert f"TensorBoard (Experiment {exp_id})" in listed.stdout, listed.output
    row = next(line for line in listed.stdout.splitlines() if tb["id"] in line)
    assert f"│ {exp_id} " in row  # the Experiments column
    killed = live.cli("tensorboard", "kill", tb["id"])
    assert killed.exit_code == 0 and f"Killed tensorboard {tb['id']}" in killed.stdout


def test_start_needs_an_experiment_or_a_trial(live: Live) -> None:
    result = live.cli("tensorboard", "start")
    assert result.exit_code == 1 and "EXP_ID" in result.stderr
    bad = live.cli("tensorboard", "start", "0")
    assert bad.exit_code == 2 and "EXP_ID" in bad.output  # ids start at 1
    assert live.get("/api/v1/tensorboards")["tensorboards"] == []
