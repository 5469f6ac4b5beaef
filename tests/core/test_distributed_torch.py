"""pedl.core with torch.distributed: real processes rendezvous over gloo on 127.0.0.1 with the
variables the master sets (RANK, WORLD_SIZE, MASTER_ADDR, ...), off-cluster and against a fake
master; and the torch_ddp example trained by two processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .fake_master import FakeMaster, free_port, task_env
from .test_examples import copy_example, stored_checkpoints

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # process worlds that train for seconds to tens of seconds

TORCH_VARS = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PEDL_SLOTS_PER_NODE",
    "PEDL_NODE_SLOTS",
}

# Every rank runs this; it prints one RESULT line of JSON.
WORKER = """
import json, sys
from pathlib import Path
import pedl.core

storage = sys.argv[1] if len(sys.argv) > 1 else None
out = {}
with pedl.core.init(checkpoint_storage=storage, max_length=7) as core:
    d = core.distributed
    out["ranks"] = [d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size]
    out["is_chief"] = d.is_chief
    out["gather"] = d.gather({"rank": d.rank})
    out["allgather"] = d.allgather(d.rank * 10)
    out["broadcast"] = d.broadcast(f"from rank {d.rank}")
    out["gather_local"] = d.gather_local(d.rank)
    out["allgather_local"] = d.allgather_local(d.rank)
    out["broadcast_local"] = d.broadcast_local(f"from rank {d.rank}")

    core.train.report_training_metrics(steps_completed=5, metrics={"loss": float(d.rank)})
    core.train.report_validation_metrics(steps_completed=5, metrics={"validation_loss": d.rank + 0.5})
    core.train.report_progress(0.5)
    for op in core.searcher.operations():
        out["length"] = op.length
        op.report_progress(3)
        storage_id = None
        if d.is_chief:
            with core.checkpoint.store_path({"steps_completed": 5}) as (path, storage_id):
                (path / "weights.txt").write_text(f"written by rank {d.rank}")
        else:
            try:
                with core.checkpoint.store_path({"steps_completed": 5}):
                    pass
            except RuntimeError as exc:
                out["store_error"] = str(exc)
        storage_id = d.broadcast(storage_id)
        with core.checkpoint.restore_path(storage_id) as path:
            out["restored"] = (path / "weights.txt").read_text()
        out["steps_in_checkpoint"] = core.checkpoint.get_metadata(storage_id)["steps_completed"]
        out["preempt"] = core.preempt.should_preempt()
        op.report_completed(d.rank + 0.25)
print("RESULT " + json.dumps(out), flush=True)
"""


def rank_env(rank: int, world: int, port: int, local_size: int = 1) -> dict[str, str]:
    """What the master gives each process of a distributed allocation (with local_size 1)."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank % local_size),
        "LOCAL_WORLD_SIZE": str(local_size),
        "NODE_RANK": str(rank // local_size),
        "NNODES": str(world // local_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "PEDL_SLOTS_PER_NODE": "1",
        "PEDL_DISTRIBUTED_TIMEOUT_SECONDS": "60",
    }


def launch(
    args: list[str],
    *,
    world: int,
    cwd: Path,
    env: dict[str, str] | None = None,
    local_size: int = 1,
    timeout: float = 180,
) -> list[str]:
    """Run `python ARGS` as `world` ranks at once; every rank must exit 0; their stdouts."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_") and k not in TORCH_VARS}
    port = free_port()
    logs = [cwd / f"rank{r}.log" for r in range(world)]
    procs = []
    for r in range(world):
        with logs[r].open("w") as log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, *args],
                    cwd=cwd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env={**base, **(env or {}), **rank_env(r, world, port, local_size)},
                )
            )
    try:
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = [log.read_text() for log in logs]
    for r, (code, out) in enumerate(zip(codes, outs, strict=True)):
        assert code == 0, f"rank {r} exited with {code}:\n{out}"
    return outs


def result(out: str) -> dict:
    return json.loads(re.search(r"^RESULT (.*)$", out, re.M).group(1))


# -- pedl.core in several processes ----------------------------------------------------------------


def test_two_ranks_off_cluster(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    outs = launch(["worker.py", str(tmp_path / "ckpts")], world=2, cwd=tmp_path)
    chief, other = (result(out) for out in outs)
    assert chief["ranks"] == [0, 2, 0, 1, 0, 2] and chief["is_chief"]
    assert other["ranks"] == [1, 2, 0, 1, 1, 2] and not other["is_chief"]
    assert chief["gather"] == [{"rank": 0}, {"rank": 1}] and other["gather"] is None
    assert chief["allgather"] == other["allgather"] == [0, 10]
    assert chief["broadcast"] == other["broadcast"] == "from rank 0"
    # One process per node: the local collectives are the process's own.
    assert (other["gather_local"], other["allgather_local"], other["broadcast_local"]) == ([1], [1], "from rank 1")
    assert chief["length"] == other["length"] == 7
    assert "only be called on the chief (rank 0), not on rank 1" in other["store_error"]
    assert chief["restored"] == other["restored"] == "written by rank 0"
    assert chief["steps_in_checkpoint"] == other["steps_in_checkpoint"] == 5
    assert chief["preempt"] is other["preempt"] is False
    assert len(list((tmp_path / "ckpts").iterdir())) == 1

    # The chief's reports are printed; the other rank's calls do nothing.
    assert "[pedl] training metrics: steps_completed=5 loss=0" in outs[0]
    assert "validation_loss=0.5" in outs[0]
    assert "searcher operation completed: length=7 searcher_metric=0.25" in outs[0]
    assert "[pedl]" not in outs[1]


def test_four_ranks_on_two_nodes_have_local_collectives(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    results = [
        result(out) for out in launch(["worker.py", str(tmp_path / "ckpts")], world=4, local_size=2, cwd=tmp_path)
    ]
    assert [r["ranks"] for r in results] == [
        [0, 4, 0, 2, 0, 2],
        [1, 4, 1, 2, 0, 2],
        [2, 4, 0, 2, 1, 2],
        [3, 4, 1, 2, 1, 2],
    ]
    assert [r["gather"] for r in results] == [[{"rank": i} for i in range(4)], None, None, None]
    assert [r["gather_local"] for r in results] == [[0, 1], None, [2, 3], None]
    assert [r["allgather_local"] for r in results] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [r["broadcast_local"] for r in results] == ["from rank 0", "from rank 0", "from rank 2", "from rank 2"]
    assert {r["broadcast"] for r in results} == {"from rank 0"}


def test_the_launcher_runs_a_world_of_nodes_of_different_sizes(tmp_path: Path) -> None:
    """Two launchers, as the master starts them on a 2-slot and a 1-slot agent: three ranks whose
    global and local collectives follow the nodes."""
    (tmp_path / "worker.py").write_text(WORKER)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_") and k not in TORCH_VARS}
    port = free_port()
    nodes = [{"DET_SLOT_IDS": "[0, 1]", "NODE_RANK": "0"}, {"DET_SLOT_IDS": "[0]", "NODE_RANK": "1"}]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pedl.launch.torch_distributed",
                "--",
                sys.executable,
                "worker.py",
                str(tmp_path / "ckpts"),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={
                **base,
                **node,
                "NNODES": "2",
                "PEDL_NODE_SLOTS": "[2, 1]",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "PEDL_DISTRIBUTED_TIMEOUT_SECONDS": "60",
            },
        )
        for node in nodes
    ]
    try:
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    results = {
        int(m.group(1)): json.loads(m.group(2))
        for out in outs
        for m in re.finditer(r"^\[rank=(\d)\] RESULT (.*)$", out, re.M)
    }
    assert [results[r]["ranks"] for r in range(3)] == [[0, 3, 0, 2, 0, 2], [1, 3, 1, 2, 0, 2], [2, 3, 0, 1, 1, 2]]
    assert results[0]["gather"] == [{"rank": 0}, {"rank": 1}, {"rank": 2}]
    assert [results[r]["allgather_local"] for r in range(3)] == [[0, 1], [0, 1], [2]]
    assert [results[r]["broadcast_local"] for r in range(3)] == ["from rank 0", "from rank 0", "from rank 2"]
    assert {results[r]["broadcast"] for r in range(3)} == {"from rank 0"}


def test_two_ranks_on_a_cluster_report_once(fake_master: FakeMaster, tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    env = task_env(fake_master.url, tmp_path / "shared", max_length=7)
    chief, other = (result(out) for out in launch(["worker.py"], world=2, cwd=tmp_path, env=env))
    assert chief["restored"] == other["restored"] == "written by rank 0"
    assert chief["preempt"] is other["preempt"] is False

    metrics = fake_master.metric_reports()
    assert [(m["group"], m["metrics"]["metrics"]["avgMetrics"]) for m in metrics] == [
        ("training", {"loss": 0.0}),
        ("validation", {"validation_loss": 0.5}),
    ]
    progress = [c.body["progress"] for c in fake_master.calls("POST", "/api/v1/trials/3/progress")]
    assert progress == [0.5, pytest.approx(3 / 7)]
    assert len(fake_master.calls("POST", "/api/v1/checkpoints")) == 1
    [completed] = fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation")
    assert completed.body == {"op": {"length": 7}, "searcherMetric": 0.25}
    # Only the chief watches for preemption.
    polls = fake_master.calls("GET", "/api/v1/allocations/3.1.0/signals/preemption")
    assert polls and polls[0].query == {"timeout_seconds": ["0"]}
    assert len([p for p in polls if p.query == {"timeout_seconds": ["0"]}]) == 1


def test_the_chiefs_preemption_decision_reaches_every_rank(fake_master: FakeMaster, tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    fake_master.preempt()
    env = task_env(fake_master.url, tmp_path / "shared", max_length=7)
    chief, other = (result(out) for out in launch(["worker.py"], world=2, cwd=tmp_path, env=env))
    assert chief["preempt"] is other["preempt"] is True
    assert len(fake_master.calls("POST", "/api/v1/allocations/3.1.0/signals/ack_preemption")) == 1


# -- the torch_ddp example -------------------------------------------------------------------------


def final_hashes(outs: list[str]) -> list[str]:
    return [
        re.search(rf"^rank {r} done at batch \d+: .* final parameter hash (\w+)$", out, re.M).group(1)
        for r, out in enumerate(outs)
    ]


def test_ddp_example_off_cluster_keeps_the_ranks_in_step_and_resumes(tmp_path: Path) -> None:
    model_dir = copy_example("torch_ddp", tmp_path)
    outs = launch(["train.py"], world=2, cwd=model_dir)
    hashes = final_hashes(outs)
    assert hashes[0] == hashes[1], outs
    assert "rank 0 of 2" in outs[0] and "rank 1 of 2" in outs[1]

    # Only the chief prints metrics and stores checkpoints; rank 1 waits for each one's id.
    assert re.findall(r"training metrics: steps_completed=(\d+)", outs[0]) == [str(s) for s in range(25, 201, 25)]
    assert re.findall(r"validation metrics: steps_completed=(\d+)", outs[0]) == ["50", "100", "150", "200"]
    assert "[pedl]" not in outs[1]
    checkpoints = stored_checkpoints(outs[0])
    assert sorted(checkpoints) == [100, 200]
    for steps, uuid in checkpoints.items():
        assert f"rank 1 checkpoint {uuid} at batch {steps}" in outs[1]
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == sorted(checkpoints.values())
    final_loss = float(re.search(r"searcher_metric=(\S+)", outs[0]).group(1))
    assert final_loss < 0.05  # it learns

    # Both ranks resume from the same checkpoint, each with its own data order: the same weights.
    resumed = launch(["train.py", "--latest-checkpoint", checkpoints[100]], world=2, cwd=model_dir)
    for r in (0, 1):
        assert f"rank {r} resumed from checkpoint {checkpoints[100]} at batch 100" in resumed[r]
    assert final_hashes(resumed) == hashes


def test_ddp_example_on_a_cluster_reports_once_per_step(fake_master: FakeMaster, tmp_path: Path) -> None:
    model_dir = copy_example("torch_ddp", tmp_path)
    host_path = tmp_path / "shared"
    env = task_env(
        fake_master.url, host_path, max_length=40, hparams={"learning_rate": 0.01, "batch_size": 16, "hidden_size": 16}
    )
    outs = launch(["train.py"], world=2, cwd=model_dir, env=env)
    assert len(set(final_hashes(outs))) == 1

    metrics = fake_master.metric_reports()
    steps = [(m["group"], m["metrics"]["stepsCompleted"]) for m in metrics]
    assert [s for g, s in steps if g == "training"] == [25, 40]
    assert [s for g, s in steps if g == "validation"] == [10, 20, 30, 40]
    checkpoints = [c.body["checkpoint"] for c in fake_master.calls("POST", "/api/v1/checkpoints")]
    assert [c["metadata"]["steps_completed"] for c in checkpoints] == [20, 40]
    assert all((host_path / "exp" / c["uuid"] / "state.pt").exists() for c in checkpoints)
    assert len(fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation")) == 1


def test_ddp_example_preempted_stops_every_rank_at_the_same_batch(fake_master: FakeMaster, tmp_path: Path) -> None:
    model_dir = copy_example("torch_ddp", tmp_path)
    fake_master.preempt()
    env = task_env(
        fake_master.url, tmp_path / "shared", max_length=40, hparams={"learning_rate": 0.01, "hidden_size": 16}
    )
    outs = launch(["train.py"], world=2, cwd=model_dir, env=env)
    for r in (0, 1):
        assert f"rank {r} preempted at batch 1; checkpoint saved, exiting" in outs[r]
    [checkpoint] = [c.body["checkpoint"] for c in fake_master.calls("POST", "/api/v1/checkpoints")]
    assert checkpoint["metadata"] == {"steps_completed": 1}
    assert len(fake_master.calls("POST", "/api/v1/allocations/3.1.0/signals/ack_preemption")) == 1
    assert fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation") == []
