"""det 0.38.1 reads a checkpoint whose files a checkpoint GC task is about to delete (the task held at its
start on a fake agent of a live master): it lists it PARTIALLY_DELETED, and its download through the
master is refused with the master's reason, never served half gone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from pedl.config.master_config import MasterConfig
from tests.compat.test_det_cli import DET, det
from tests.master.fakes import FakeAgent, create_experiment, login
from tests.master.gc_task_world import delete, stored
from tests.support.live_master import LiveMaster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


def test_det_sees_a_checkpoint_being_deleted_and_its_download_is_refused(
    master_config: MasterConfig, tmp_path: Path
) -> None:
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    with LiveMaster(master_config) as master, httpx.Client(base_url=master.url, timeout=60) as client:
        app = master.server.config.app
        client.app = app  # type: ignore[attr-defined] - gc_task_world finds the master's storage through it
        agent = FakeAgent(app, "agent-1", slots=1)
        user = {"Authorization": f"Bearer {login(client, 'determined')}"}  # det logs in as determined
        exp = create_experiment(
            client,
            user,
            "name: held\nentrypoint: python train.py\nsearcher: {name: single, metric: loss, max_length: 10}\n",
        )
        [trial] = agent.start_all()
        held, kept = stored(client, trial, 2), stored(client, trial, 4)
        assert delete(client, user, held).status_code == 200
        [gc] = agent.start_all()  # the GC task at its start: nothing deleted or reported yet
        c = SimpleNamespace(work=tmp_path, master=SimpleNamespace(url=master.url), tls=None)
        listed = det(c, "experiment", "list-checkpoints", str(exp["id"])).stdout
        [row] = [line for line in listed.splitlines() if held in line]
        assert "PARTIALLY_DELETED" in row, listed
        out = tmp_path / "out"
        got = det(c, "checkpoint", "download", held, "--mode", "master", "-o", str(out), check=False)
        assert got.returncode != 0 and not (out / "model.pt").exists()
        assert f"checkpoint {held} is being deleted by checkpoint GC task {gc.task_id}" in got.stderr, got
        done = det(c, "checkpoint", "download", kept, "--mode", "master", "-o", str(tmp_path / "kept"))
        assert (tmp_path / "kept" / "model.pt").is_file(), done.stdout
        agent.exit(gc.allocation_id, 0)
        agent.close()
