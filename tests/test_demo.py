"""`make demo`'s summary of checkpoints: each with its state, a path only where files are left."""

from __future__ import annotations

from pathlib import Path

from pedl.demo import checkpoint_lines


def test_checkpoint_lines_show_the_state_and_no_path_for_deleted_ones() -> None:
    ckpts = [
        {"uuid": "gone", "state": "STATE_DELETED", "training": {"trialId": 1}, "metadata": {"steps_completed": 5}},
        {"uuid": "kept", "state": "STATE_COMPLETED", "training": {"trialId": 1}, "metadata": {"steps_completed": 10}},
    ]
    header, gone, kept = checkpoint_lines(ckpts, Path("/data/checkpoints"))
    assert header == "Checkpoints (2, 1 kept, 1 deleted by garbage collection):"
    assert gone.split() == ["DELETED", "trial", "1,", "batch", "5:", "files", "deleted"]
    assert "gone" not in gone and "/data" not in gone
    assert kept.split() == ["COMPLETED", "trial", "1,", "batch", "10:", "/data/checkpoints/kept"]
