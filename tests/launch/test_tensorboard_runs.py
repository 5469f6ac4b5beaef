"""What a TensorBoard task shows (pedl/launch/tensorboard_runs.py): event files that TensorBoard's own
reader reads back with the exact values, under Determined's tags; a trial's files in checkpoint storage
where there are some, else files written from its stored metrics, each report once."""

from __future__ import annotations

import threading
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

from pedl.launch import tensorboard_runs
from pedl.launch.tensorboard_runs import EventFile, TrialWriter, crc32c, runs, tags

CLUSTER = "c0ffee00-0000-4000-8000-000000000000"


def test_crc32c_is_castagnolis() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_tags_are_determineds_and_only_numbers_are_kept() -> None:
    assert tags("training", {"loss": 1, "acc": 0.5, "name": "x", "flag": True, "none": None}) == {
        "Determined/loss": 1.0,
        "Determined/acc": 0.5,
    }
    assert tags("validation", {"validation_loss": 0.25, "acc": 0.75}) == {
        "Determined/validation_loss": 0.25,
        "Determined/val_acc": 0.75,
    }


def scalars(directory: Path) -> dict[str, list[tuple[int, float, float]]]:
    acc = EventAccumulator(str(directory))
    acc.Reload()
    return {
        tag: [(e.step, e.wall_time, tensor_util.make_ndarray(e.tensor_proto).item()) for e in acc.Tensors(tag)]
        for tag in acc.Tags()["tensors"]
    }


def test_event_files_read_back_exactly(tmp_path: Path) -> None:
    f = EventFile(str(tmp_path / "run"), 1000.0)
    f.write(1001.5, 1, {"Determined/loss": 1 / 3, "Determined/acc": 0.1})
    f.write(1002.5, 2**40, {"Determined/loss": -2.5})
    f.flush()
    assert scalars(tmp_path / "run") == {
        "Determined/loss": [(1, 1001.5, 1 / 3), (2**40, 1002.5, -2.5)],
        "Determined/acc": [(1, 1001.5, 0.1)],
    }


class FakeMaster:
    """The reports of trials by (trial, group), as the master's NDJSON pages give them."""

    def __init__(self, reports: dict[tuple[int, str], list[dict[str, Any]]]) -> None:
        self.reports_of = reports
        self.asked: list[tuple[int, str]] = []
        self.starts: list[int] = []
        self.states: dict[int, list[Any]] = {}

    def trial_state(self, trial_id: int) -> str:
        state = self.states[trial_id].pop(0)
        if isinstance(state, Exception):
            raise state
        if state == "STATE_COMPLETED":  # its last report came before it ended
            self.reports_of[(trial_id, "training")].append(report(9, 9, "training", loss=0.125))
        return state

    def reports(self, trial_id: int, group: str, start_batches: int = 0) -> Iterator[dict[str, Any]]:
        self.asked.append((trial_id, group))
        self.starts.append(start_batches)
        yield from (r for r in self.reports_of.get((trial_id, group), []) if r["totalBatches"] >= start_batches)


def report(rid: int, steps: int, group: str, **values: float) -> dict[str, Any]:
    key = "validation_metrics" if group == "validation" else "avg_metrics"
    return {
        "id": str(rid),
        "totalBatches": steps,
        "endTime": f"2026-01-01T00:00:{steps:02d}Z",
        "metrics": {key: values},
        "group": group,
    }


def test_a_trial_with_event_files_in_storage_is_shown_from_them_and_the_others_from_metrics(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    stored = root / CLUSTER / "tensorboard" / "experiment" / "7" / "trial" / "11"
    f = EventFile(str(stored), 5.0)
    f.write(6.0, 3, {"Determined/x": 2.0})
    f.flush()
    master = FakeMaster(
        {
            (12, "training"): [report(1, 1, "training", loss=0.5), report(2, 2, "training", loss=0.25)],
            (12, "validation"): [report(3, 2, "validation", validation_loss=0.75)],
        }
    )
    plan = {
        "experiments": [
            {"id": 7, "storage_root": str(root), "trials": [11, 12]},
            {"id": 8, "storage_root": None, "trials": [13]},
        ]
    }
    out = tmp_path / "out"
    writers = runs(plan, CLUSTER, master, str(out))
    assert [w.trial_id for w in writers] == [12, 13]
    assert 11 not in {t for t, _ in master.asked}
    assert (out / "experiment/7/trial/11").resolve() == stored.resolve()
    assert scalars(out / "experiment/7/trial/11") == {"Determined/x": [(3, 6.0, 2.0)]}
    written = out / "experiment/7/trial/12"
    assert [(s, v) for s, _, v in scalars(written / "training")["Determined/loss"]] == [(1, 0.5), (2, 0.25)]
    assert [(s, v) for s, _, v in scalars(written / "validation")["Determined/validation_loss"]] == [(2, 0.75)]
    assert (out / "experiment/8/trial/13").is_dir()  # nothing reported yet: an empty run
    # TensorBoard finds every run below the one log directory, the linked one too
    from tensorboard.backend.event_processing import io_wrapper

    found = {str(Path(d).relative_to(out)) for d in io_wrapper.GetLogdirSubdirectories(str(out))}
    assert found == {"experiment/7/trial/11", "experiment/7/trial/12/training", "experiment/7/trial/12/validation"}
    # a storage root without files for the trial, or without the cluster id: from the metrics
    assert [w.trial_id for w in runs(plan, "", master, str(tmp_path / "again"))] == [11, 12, 13]


def test_a_refresh_writes_only_the_new_reports(tmp_path: Path) -> None:
    master = FakeMaster({(5, "training"): [report(1, 1, "training", loss=1.0)]})
    writer = TrialWriter(master, 5, str(tmp_path))
    assert writer.catch_up() == 1
    master.reports_of[(5, "training")] += [report(2, 1, "training", loss=0.75), report(3, 2, "training", loss=0.5)]
    master.starts.clear()
    assert writer.catch_up() == 2
    assert master.starts == [1, 0]  # from the last step written (its later reports too); nothing validated yet
    assert writer.catch_up() == 0
    assert [(s, v) for s, _, v in scalars(tmp_path / "training")["Determined/loss"]] == [(1, 1.0), (1, 0.75), (2, 0.5)]


def test_the_refresh_follows_running_trials_until_they_end(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tensorboard_runs, "REFRESH_SECONDS", 0.0)
    master = FakeMaster({(1, "training"): [report(1, 1, "training", loss=1.0)], (2, "training"): []})
    gone = urllib.error.HTTPError("http://master/api/v1/trials/2", 404, "trial 2 not found", None, None)  # type: ignore[arg-type]
    master.states = {1: ["STATE_RUNNING", OSError("master away"), "STATE_COMPLETED"], 2: [gone]}
    writers = [TrialWriter(master, 1, str(tmp_path / "1")), TrialWriter(master, 2, str(tmp_path / "2"))]
    assert writers[0].catch_up() == 1
    tensorboard_runs.refresh(master, writers, threading.Event())  # returns once no trial is left to follow
    assert master.states == {1: [], 2: []}
    assert [(s, v) for s, _, v in scalars(tmp_path / "1" / "training")["Determined/loss"]] == [(1, 1.0), (9, 0.125)]
