"""pedl.core.distributed: the single-process context, the collectives seam, ranks from the
environment, and what non-chief ranks may do (multi-process runs: test_distributed_torch.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import pedl.core
from pedl.common.checkpoint_storage import SharedFSStorage
from pedl.core.checkpoint import LocalCheckpointContext
from pedl.core.distributed import (
    DistributedContext,
    TorchRanks,
    distributed_from_env,
    torch_ranks_from_env,
)
from pedl.core.preempt import LocalPreemptContext
from pedl.core.searcher import LocalSearcherContext
from pedl.core.train import LocalTrainContext

from .fake_master import FakeMaster, free_port


def test_single_process_ranks() -> None:
    d = DistributedContext.single_process()
    assert (d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size) == (0, 1, 0, 1, 0, 1)
    assert d.is_chief and d.is_local_chief
    assert (
        d.get_rank(),
        d.get_size(),
        d.get_local_rank(),
        d.get_local_size(),
        d.get_cross_rank(),
        d.get_cross_size(),
    ) == (0, 1, 0, 1, 0, 1)


def test_single_process_collectives_are_trivially_correct() -> None:
    d = DistributedContext.single_process()
    obj = {"x": 1}
    assert d.gather(obj) == [obj]
    assert d.gather_local(obj) == [obj]
    assert d.allgather(obj) == [obj]
    assert d.allgather_local(obj) == [obj]
    assert d.broadcast(obj) is obj
    assert d.broadcast_local(obj) is obj


def test_ranks_are_checked() -> None:
    with pytest.raises(ValueError, match="ranks must satisfy"):
        DistributedContext(rank=1, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


def test_more_than_one_worker_needs_collectives() -> None:
    with pytest.raises(ValueError, match="needs collectives"):
        DistributedContext(rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1)


class RecordingCollectives:
    """Stands in for a torch.distributed backend: the context must delegate to it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        self.calls.append(("gather", obj, local))
        return None

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        self.calls.append(("allgather", obj, local))
        return [obj, obj]

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        self.calls.append(("broadcast", obj, local))
        return "from chief"


def test_collectives_are_delegated() -> None:
    backend = RecordingCollectives()
    d = DistributedContext(rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1, collectives=backend)
    assert not d.is_chief
    assert d.gather(1) is None
    assert d.allgather_local(2) == [2, 2]
    assert d.broadcast(3) == "from chief"
    assert backend.calls == [("gather", 1, False), ("allgather", 2, True), ("broadcast", 3, False)]


# -- ranks from the environment --------------------------------------------------------------------


def test_ranks_from_the_pedl_masters_variables() -> None:
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "NODE_RANK": "1",
        "NNODES": "2",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29400",
    }
    assert torch_ranks_from_env(env) == TorchRanks(
        rank=1, size=2, local_rank=0, local_size=1, cross_rank=1, cross_size=2
    )


def test_ranks_from_torchruns_variables() -> None:
    env = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2",
    }
    assert torch_ranks_from_env(env) == TorchRanks(3, 4, 1, 2, 1, 2)


def test_ranks_on_nodes_of_different_sizes_from_the_launchers_variables() -> None:
    """Node 1 of a trial on 2 + 3 slots: the launcher's worker 1 there is rank 3 of 5."""
    env = {"RANK": "3", "WORLD_SIZE": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3", "NODE_RANK": "1", "NNODES": "2"}
    assert torch_ranks_from_env(env) == TorchRanks(3, 5, 1, 3, 1, 2)


def test_ranks_default_to_one_process_per_node() -> None:
    assert torch_ranks_from_env({"RANK": "2", "WORLD_SIZE": "3"}) == TorchRanks(2, 3, 0, 1, 2, 3)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "2"}, "needs RANK in the environment"),
        ({"RANK": "0"}, "needs WORLD_SIZE"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK must be an integer, got 'x'"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "inconsistent"),
        ({"RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "2"}, "multiple of LOCAL_WORLD_SIZE.*unless NODE_RANK"),
        ({"RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE must be positive"),
    ],
)
def test_bad_rank_variables_are_explained(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        torch_ranks_from_env(env)


def test_one_worker_without_torch_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed_from_env().size == 1
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed_from_env().size == 1


def test_several_workers_need_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    with pytest.raises(RuntimeError, match="needs PyTorch"):
        distributed_from_env()


def test_a_torch_world_of_one_makes_and_destroys_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import torch.distributed as dist

    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }.items():
        monkeypatch.setenv(name, value)
    d = DistributedContext.from_torch_distributed(timeout=30)
    try:
        assert dist.is_initialized() and dist.get_backend() == "gloo"
        assert (d.rank, d.size, d.cross_size) == (0, 1, 1)
        assert d.allgather("x") == ["x"] and d.broadcast(5) == 5 and d.gather(1) == [1]
    finally:
        d.close()
    assert not dist.is_initialized()
    d.close()  # idempotent


# -- what the other ranks do -----------------------------------------------------------------------


class FixedBroadcast(RecordingCollectives):
    """Rank 1's view: broadcast answers what the chief decided."""

    def __init__(self, chief_says: Any) -> None:
        super().__init__()
        self.chief_says = chief_says
        self.closed = 0

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        super().broadcast(obj, local=local)
        return self.chief_says

    def close(self) -> None:
        self.closed += 1


def rank(r: int, collectives: Any = None) -> DistributedContext:
    return DistributedContext(
        rank=r,
        size=2,
        local_rank=0,
        local_size=1,
        cross_rank=r,
        cross_size=2,
        collectives=collectives or FixedBroadcast(False),
    )


def test_only_the_chief_prints_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    for r in (0, 1):
        train = LocalTrainContext(distributed=rank(r))
        train.report_training_metrics(steps_completed=5, metrics={"loss": 0.5})
        train.report_validation_metrics(steps_completed=5, metrics={"validation_loss": 0.25})
        train.report_progress(0.5)
        out = capsys.readouterr().out
        assert ("training metrics: steps_completed=5 loss=0.5" in out) == (r == 0)
        assert ("validation_loss=0.25" in out) == (r == 0)


def test_other_ranks_still_check_their_reports() -> None:
    train = LocalTrainContext(distributed=rank(1))
    with pytest.raises(TypeError, match="metrics must be a dict"):
        train.report_training_metrics(steps_completed=5, metrics=[0.5])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="between 0 and 1"):
        train.report_progress(2.0)


def test_every_rank_gets_the_operation_and_only_the_chief_completes_it(capsys: pytest.CaptureFixture[str]) -> None:
    for r in (0, 1):
        for op in LocalSearcherContext(rank(r), 40).operations():
            assert op.length == 40
            op.report_progress(20)
            op.report_completed(0.125)
            assert op.completed
            with pytest.raises(RuntimeError, match="already called"):
                op.report_completed(0.125)
        out = capsys.readouterr().out
        assert ("searcher operation completed: length=40 searcher_metric=0.125" in out) == (r == 0)


def test_only_the_chief_stores_checkpoints_and_everyone_restores(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path)
    chief = LocalCheckpointContext(storage, rank(0))
    with chief.store_path({"steps_completed": 3}) as (path, storage_id):
        (path / "w.txt").write_text("weights")
    other = LocalCheckpointContext(storage, rank(1))
    with (
        pytest.raises(RuntimeError, match=r"only be called on the chief \(rank 0\), not on rank 1"),
        other.store_path({"steps_completed": 3}),
    ):
        pass
    with pytest.raises(RuntimeError, match="only be called on the chief"):
        other.upload(tmp_path, {"steps_completed": 3})
    with other.restore_path(storage_id) as path:
        assert (path / "w.txt").read_text() == "weights"
    assert other.get_metadata(storage_id) == {"steps_completed": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == [storage_id]


@pytest.mark.parametrize("chief_says", [False, True])
def test_should_preempt_is_the_chiefs_broadcast_decision(chief_says: bool) -> None:
    backend = FixedBroadcast(chief_says)
    preempt = LocalPreemptContext(rank(1, backend))
    assert preempt.should_preempt() is chief_says
    assert backend.calls == [("broadcast", False, False)]  # a collective call on every rank


def test_other_ranks_neither_poll_nor_acknowledge(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init(distributed=rank(1, FixedBroadcast(True))) as core:
        assert core.preempt.should_preempt() is True
        core.preempt.acknowledge_preemption_signal()
        core.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
        core.train.report_progress(0.1)
        for op in core.searcher.operations():
            op.report_progress(1)
            op.report_completed(1.0)
    assert fake_master.requests == []


def test_the_chief_acknowledges_once(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.preempt()
    with pedl.core.init(distributed=rank(0, RecordingCollectives())) as core:
        assert core.preempt.should_preempt() is True
        assert core.preempt.should_preempt() is True
    assert len(fake_master.calls("POST", "/api/v1/allocations/3.1.0/signals/ack_preemption")) == 1


def test_the_context_closes_its_distributed_context(off_cluster: None, tmp_path: Path) -> None:
    backend = FixedBroadcast(False)
    with pedl.core.init(distributed=rank(1, backend), checkpoint_storage=tmp_path, max_length=1):
        assert backend.closed == 0
    assert backend.closed == 1
