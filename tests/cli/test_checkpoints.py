"""`pedl checkpoint describe`."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster

CHECKPOINT = {"uuid": "ck-1", "state": "STATE_COMPLETED", "metadata": {"steps_completed": 10},
              "resources": {"model.pt": "2048"}, "reportTime": "2025-01-01T00:00:00Z",
              "training": {"trialId": 3, "experimentId": 1, "validationMetrics": {"avgMetrics": {"loss": 0.1}}}}


def test_describe(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/checkpoints/ck-1", {"checkpoint": CHECKPOINT})
    result = cli("checkpoint", "describe", "ck-1")
    assert result.exit_code == 0, result.output
    for text in ("ck-1", "COMPLETED", "2.0 KiB", '"loss": 0.1', "steps_completed"):
        assert text in result.stdout, (text, result.stdout)
    assert json.loads(cli("checkpoint", "describe", "ck-1", "--json").stdout) == CHECKPOINT
