"""Determined 0.38.1's own end-to-end suite (`make compat-e2e`: tools/det_e2e.py runs the e2e_cpu tests of
its run.sh FILES against a fresh pedl master and a one-slot agent) passes in `make test` too: every test
but those tools/det_e2e_exclusions.yaml lists, each with its reason, and no listed test passes (the list
only shrinks). It runs as a few shards, each with a master and agent of its own, marked slow so that
pytest-xdist hands them out first and the rest of the pass runs beside them: the tests that train the
mnist_pytorch fixture (hundreds of batches of a convolutional network on one CPU slot, several minutes each)
each have a shard of their own, and the rest of the suite (~10 minutes) is one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compat.conftest import det_venv

pytestmark = [pytest.mark.compat, pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SUITE = Path(os.environ.get("PEDL_DET_E2E", REPO.parent / "shared" / "determined-e2e-0.38.1"))
EXCLUSIONS = REPO / "tools" / "det_e2e_exclusions.yaml"
# run.sh gives each test 120 s; beside the rest of the pass on two busy cores 3_hpsearch's ten trials took longer,
# and test_end_to_end_adaptive trains five trials of mnist_pytorch one after the other
PER_TEST = {"rest": 600}
MNIST_PER_TEST = 1500


# each long mnist_pytorch test alone; "rest" is every other test of the suite
MNIST_SHARDS = ("test_create_test_mode", "test_end_to_end_adaptive", "test_streaming_metrics_api")
SHARDS = {**{name: name for name in MNIST_SHARDS}, "rest": " and ".join(f"not {name}" for name in MNIST_SHARDS)}


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("shard", list(SHARDS))
def test_determineds_own_e2e_suite_passes_outside_the_exclusion_list(tmp_path, shard) -> None:
    if not (SUITE / "run.sh").exists():
        missing = f"Determined's e2e suite is not at {SUITE} (PEDL_DET_E2E names another place)"
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; under CI it must run", pytrace=False)
        pytest.skip(missing)
    out = tmp_path / "det_e2e.log"
    with out.open("w") as log:
        args = [
            "--tb=short",
            "--suite",
            str(SUITE),
            "--det-venv",
            str(det_venv()),
            "--timeout",
            str(PER_TEST.get(shard, MNIST_PER_TEST)),
            "--exclusions",
            str(EXCLUSIONS),
            "-k",
            SHARDS[shard],
        ]
        rc = subprocess.call(
            [sys.executable, str(REPO / "tools" / "det_e2e.py"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            timeout=2300,
        )
    text = out.read_text(errors="replace")
    summary = text[text.rfind("\nfile ") :] if "\nfile " in text else text[-6000:]
    assert rc == 0, f"make compat-e2e failed (rc {rc}):\n{summary}\n\nthe run's last lines:\n{text[-8000:]}"
    assert " problem(s)" in summary and " 0 problem(s)" in summary, summary
