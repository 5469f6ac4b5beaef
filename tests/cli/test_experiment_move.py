"""`pedl experiment move ID --project P` against a real master app, the result checked through the API."""

from __future__ import annotations

from tests.cli.test_experiments_live import Live, live  # noqa: F401
from tests.master.fakes import SINGLE_CONFIG, create_experiment, post


def project_id_of(live: Live, exp_id: int) -> int:  # noqa: F811
    return live.http.get(f"/api/v1/experiments/{exp_id}", headers=live.user).json()["experiment"]["projectId"]


def test_move_puts_the_experiment_in_the_project(live: Live) -> None:  # noqa: F811
    exp = create_experiment(live.http, live.user, SINGLE_CONFIG, activate=False)  # type: ignore[arg-type]
    ws = post(live.http, "/api/v1/workspaces", {"name": "cli-ws"}, live.user).json()["workspace"]  # type: ignore[arg-type]
    project = post(
        live.http,
        f"/api/v1/workspaces/{ws['id']}/projects",
        {"name": "cli-proj"},  # type: ignore[arg-type]
        live.user,
    ).json()["project"]

    r = live.cli("experiment", "move", str(exp["id"]), "--project", str(project["id"]))
    assert r.exit_code == 0, r.output
    assert f"Moved experiment {exp['id']} to project {project['id']} (cli-ws/cli-proj)" in " ".join(r.output.split())
    assert project_id_of(live, exp["id"]) == project["id"]

    r = live.cli("experiment", "move", str(exp["id"]), "--project", "9999")
    assert r.exit_code != 0 and "destinationProjectId" in r.output and "9999" in r.output
    assert project_id_of(live, exp["id"]) == project["id"]
    r = live.cli("experiment", "move", str(exp["id"]))
    assert r.exit_code != 0 and "--project" in r.output
