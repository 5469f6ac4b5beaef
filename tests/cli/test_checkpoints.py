"""`pedl checkpoint describe` (against a fake master), `pedl checkpoint delete|rm` (against a real master
app, the result checked through the API and on disk)."""

from __future__ import annotations

import json
import uuid as uuid_lib
from pathlib import Path

from typer.testing import CliRunner

from pedl.cli.main import app as cli_app
from pedl.common.checkpoint_files import list_directory
from pedl.common.checkpoint_storage import storage_from_config
from tests.cli.fake_master import FakeMaster
from tests.cli.test_experiments_live import Live, live, master_config, started  # noqa: F401
from tests.master.fakes import StartedTask, bearer, post

CHECKPOINT = {
    "uuid": "ck-1",
    "state": "STATE_COMPLETED",
    "metadata": {"steps_completed": 10},
    "resources": {"model.pt": "2048"},
    "reportTime": "2025-01-01T00:00:00Z",
    "training": {"trialId": 3, "experimentId": 1, "validationMetrics": {"avgMetrics": {"loss": 0.1}}},
}


def test_describe(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/checkpoints/ck-1", {"checkpoint": CHECKPOINT})
    result = cli("checkpoint", "describe", "ck-1")
    assert result.exit_code == 0, result.output
    for text in ("ck-1", "COMPLETED", "2.0 KiB", '"loss": 0.1', "steps_completed"):
        assert text in result.stdout, (text, result.stdout)
    assert json.loads(cli("checkpoint", "describe", "ck-1", "--json").stdout) == CHECKPOINT


# -- pedl checkpoint delete|rm against a real master app -----------------------------------------------


def _stored(lv: Live, task: StartedTask, files: dict[str, str]) -> str:
    """Files written where the master keeps checkpoints, reported by the trial with their listing."""
    name = str(uuid_lib.uuid4())
    storage = storage_from_config(lv.ctx.config.effective_checkpoint_storage().model_dump())
    with storage.store_path(name) as path:
        for rel, text in files.items():
            (path / rel).write_text(text)
        listing = list_directory(path)
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "metadata": {"steps_completed": 1},
        "resources": {k: str(v) for k, v in listing.items()},
        "state": "STATE_COMPLETED",
        "training": {},
    }
    assert post(lv.http, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200  # type: ignore[arg-type]
    return name


def _api(lv: Live, name: str) -> dict:
    return lv.http.get(f"/api/v1/checkpoints/{name}", headers=lv.user).json()["checkpoint"]


def test_rm_deletes_the_files_globs_name(live: Live) -> None:  # noqa: F811
    _exp, task = started(live)
    name = _stored(live, task, {"model.pt": "m" * 10, "opt.pt": "o", "notes.txt": "n"})
    result = live.cli("checkpoint", "rm", name, "--glob", "*.pt", "--yes")
    assert result.exit_code == 0, result.output
    assert f"Checkpoint {name}: PARTIALLY_DELETED, 1 files left" in " ".join(result.stdout.split())
    c = _api(live, name)
    assert c["state"] == "STATE_PARTIALLY_DELETED" and c["resources"] == {"notes.txt": "1"}
    bad = live.cli("checkpoint", "rm", name, "--glob", "../x", "--yes")
    assert bad.exit_code != 0 and "checkpointGlobs[0]" in bad.output
    assert _api(live, name)["resources"] == {"notes.txt": "1"}


def test_delete_asks_then_deletes(live: Live) -> None:  # noqa: F811
    _exp, task = started(live)
    first, second = _stored(live, task, {"a": "1"}), _stored(live, task, {"b": "2"})
    declined = CliRunner().invoke(cli_app, ["-m", live.master.url, "checkpoint", "delete", first], input="n\n")
    assert declined.exit_code == 1 and "Nothing deleted" in declined.output
    assert _api(live, first)["state"] == "STATE_COMPLETED"
    result = live.cli("checkpoint", "delete", first, second, "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("DELETED, no files left") == 2
    assert {_api(live, n)["state"] for n in (first, second)} == {"STATE_DELETED"}
    storage = live.ctx.config.effective_checkpoint_storage()
    assert not any((Path(storage.host_path) / n).exists() for n in (first, second))
    unknown = live.cli("checkpoint", "delete", "5f0b7a52-0c1e-4c7e-9a51-3a1f1b2c3d4e", "--yes")
    assert unknown.exit_code != 0 and "5f0b7a52-0c1e-4c7e-9a51-3a1f1b2c3d4e not found" in unknown.output
