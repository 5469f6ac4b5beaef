"""Data-parallel training of a small PyTorch MLP with DistributedDataParallel, through pedl.core.

On a pedl cluster, `resources.slots_per_trial: 2` on agents of one slot each runs this script once
per agent (distributed.yaml); the master sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... and
`pedl.core.init()` joins the torch.distributed group (gloo on CPU, nccl with CUDA). With
`python3 -m pedl.launch.torch_distributed -- python3 train.py` as the entrypoint (per_slot.yaml)
it runs once per slot instead, each process on the GPU of its LOCAL_RANK. Each rank trains on its own shard
of the data; DDP averages the gradients, so every rank holds the same weights. Only the chief
(rank 0) reports metrics and writes checkpoints; `should_preempt()` is the chief's decision,
broadcast, so all ranks stop at the same batch.

Off-cluster, two processes on this machine:

    torchrun --nproc-per-node 2 train.py
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 train.py &
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 train.py
    python3 train.py                           # or a single process, without DDP
    ... train.py --latest-checkpoint UUID      # resume from a local checkpoint (./checkpoints)
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import pathlib
import sys
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import pedl
import pedl.core

HERE = pathlib.Path(__file__).resolve().parent
TRAINING_REPORT_PERIOD = 25  # batches between training-metric reports


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config",
        default=str(HERE / "distributed.yaml"),
        help="experiment config used off-cluster (ignored on the cluster)",
    )
    parser.add_argument("--latest-checkpoint", default=None, help="off-cluster: checkpoint uuid to resume from")
    parser.add_argument(
        "--checkpoint-dir", default=None, help="off-cluster: where checkpoints go (default ./checkpoints)"
    )
    parser.add_argument("--seed", type=int, default=0, help="off-cluster: the trial seed")
    return parser.parse_args()


def say(core: pedl.core.Context, message: str) -> None:
    print(f"rank {core.distributed.rank} {message}", flush=True)


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points in [-1, 1]^2 and a wavy target with a little noise."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:]) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))


def batches_setting(config: dict[str, Any], key: str, default: int) -> int:
    """A length setting such as min_validation_period in batches (`100` or `{batches: 100}`)."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, int):
        return value
    if value.get("batches") is not None:
        return int(value["batches"])
    raise SystemExit(f"{key} must be given in batches for this example, got {value}")


def parameter_hash(model: nn.Module) -> str:
    """A digest of the exact weights: equal on every rank when DDP kept them in step."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def save_checkpoint(
    core: pedl.core.Context, model: nn.Module, optimizer: torch.optim.Optimizer, batcher: torch.Generator, steps: int
) -> str:
    """Collective: the chief writes (with every rank's data order); the others wait for its id."""
    batchers = core.distributed.gather(batcher.get_state())
    storage_id = None
    if core.distributed.is_chief:
        with core.checkpoint.store_path({"steps_completed": steps}) as (path, storage_id):
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "batchers": batchers},
                path / "state.pt",
            )
    # Doubles as the barrier: nobody goes on before the checkpoint is stored and reported.
    storage_id = core.distributed.broadcast(storage_id)
    say(core, f"checkpoint {storage_id} at batch {steps}")
    return storage_id


@torch.no_grad()
def evaluate(core: pedl.core.Context, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Each rank scores its shard of the validation set; the sums are combined on every rank."""
    pred = model(x)
    mine = (float(((pred - y) ** 2).sum()), float((pred - y).abs().sum()), len(x))
    sq, ab, n = (sum(parts) for parts in zip(*core.distributed.allgather(mine), strict=True))
    return {"validation_loss": sq / n, "validation_mae": ab / n}


def train(core: pedl.core.Context, latest_checkpoint: str | None, seed: int) -> int:
    rank, size = core.distributed.rank, core.distributed.size
    hp = core.hparams
    batch_size = int(hp.get("batch_size", 32))
    validation_period = batches_setting(core.config, "min_validation_period", 50)
    checkpoint_period = batches_setting(core.config, "min_checkpoint_period", 100)
    # one process per GPU: LOCAL_RANK picks this process's device among the slots it was given
    device = (
        torch.device("cuda", core.distributed.local_rank % torch.cuda.device_count())
        if torch.cuda.is_available()
        else torch.device("cpu")
    )
    say(
        core,
        f"of {size} on agent {os.environ.get('DET_AGENT_ID', 'local')} "
        f"(slots on this node: {os.environ.get('PEDL_SLOTS_PER_NODE', '-')}, device {device})",
    )

    torch.manual_seed(seed)
    x_train, y_train = make_data(4096, seed=1)
    x_val, y_val = make_data(1024, seed=2)
    # Each rank trains and validates on its own shard.
    x_train, y_train = x_train[rank::size].to(device), y_train[rank::size].to(device)
    x_val, y_val = x_val[rank::size].to(device), y_val[rank::size].to(device)
    net = make_model(int(hp.get("hidden_size", 32))).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=float(hp["learning_rate"]))
    batcher = torch.Generator().manual_seed(seed * 1000 + rank)

    steps = 0
    if latest_checkpoint:
        with core.checkpoint.restore_path(latest_checkpoint) as path:
            state = torch.load(path / "state.pt", weights_only=True, map_location="cpu")
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        steps = int(core.checkpoint.get_metadata(latest_checkpoint)["steps_completed"])
        if len(state["batchers"]) == size:
            batcher.set_state(state["batchers"][rank])
        else:  # a different world size: a fresh data order per rank
            batcher.manual_seed(seed * 1000 + rank + 7919 * steps)
        say(core, f"resumed from checkpoint {latest_checkpoint} at batch {steps}")
    checkpointed_at = steps

    # DDP broadcasts the chief's weights now and averages the gradients in every backward().
    if size == 1:
        model = net
    elif device.type == "cuda":
        torch.cuda.set_device(device)
        model = DistributedDataParallel(net, device_ids=[device.index])
    else:
        model = DistributedDataParallel(net)
    for op in core.searcher.operations():
        losses: list[float] = []
        while steps < op.length:
            idx = torch.randint(0, len(x_train), (batch_size,), generator=batcher).to(device)
            loss = nn.functional.mse_loss(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            steps += 1

            if steps % TRAINING_REPORT_PERIOD == 0 or steps == op.length:
                # Every rank calls report_*; only the chief's call reaches the master.
                mean = sum(core.distributed.allgather(sum(losses) / len(losses))) / size
                core.train.report_training_metrics(
                    steps_completed=steps, metrics={"loss": mean, "rmse": math.sqrt(mean)}
                )
                losses = []
            if steps % validation_period == 0:
                core.train.report_validation_metrics(steps_completed=steps, metrics=evaluate(core, net, x_val, y_val))
                op.report_progress(steps)
            if steps % checkpoint_period == 0:
                save_checkpoint(core, net, optimizer, batcher, steps)
                checkpointed_at = steps
            # Collective: all ranks ask at the same batch and get the chief's answer.
            if core.preempt.should_preempt():
                if checkpointed_at != steps:
                    save_checkpoint(core, net, optimizer, batcher, steps)
                say(core, f"preempted at batch {steps}; checkpoint saved, exiting")
                return 0

        metrics = evaluate(core, net, x_val, y_val)
        if steps % validation_period != 0:
            core.train.report_validation_metrics(steps_completed=steps, metrics=metrics)
        if checkpointed_at != steps:
            save_checkpoint(core, net, optimizer, batcher, steps)
            checkpointed_at = steps
        op.report_completed(metrics["validation_loss"])
    say(
        core,
        f"done at batch {steps}: validation_loss={metrics['validation_loss']:.6f} "
        f"final parameter hash {parameter_hash(net)}",
    )
    return 0


def main() -> int:
    args = parse_args()
    torch.set_num_threads(1)  # a model this small only loses time to thread handoffs
    info = pedl.get_cluster_info()
    latest = info.latest_checkpoint if info else args.latest_checkpoint
    seed = info.trial.trial_seed if info and info.trial else args.seed
    with pedl.core.init(config=args.config, checkpoint_storage=args.checkpoint_dir) as core:
        return train(core, latest, seed)


if __name__ == "__main__":
    sys.exit(main())
