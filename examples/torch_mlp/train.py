"""Fit a small PyTorch MLP to a 2-D function, reporting through pedl.core.

On a pedl cluster the master runs `python3 train.py`. On a laptop:

    python3 train.py                           # const.yaml's settings, checkpoints in ./checkpoints
    python3 train.py --latest-checkpoint UUID  # resume from a local checkpoint
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
from typing import Any

import torch
from torch import nn

import pedl
import pedl.core

HERE = pathlib.Path(__file__).resolve().parent
TRAINING_REPORT_PERIOD = 50  # batches between training-metric reports


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config", default=str(HERE / "const.yaml"), help="experiment config used off-cluster (ignored on the cluster)"
    )
    parser.add_argument("--latest-checkpoint", default=None, help="off-cluster: checkpoint uuid to resume from")
    parser.add_argument(
        "--checkpoint-dir", default=None, help="off-cluster: where checkpoints go (default ./checkpoints)"
    )
    parser.add_argument("--seed", type=int, default=0, help="off-cluster: the trial seed")
    return parser.parse_args()


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


def save_checkpoint(
    core: pedl.core.Context, model: nn.Module, optimizer: torch.optim.Optimizer, batcher: torch.Generator, steps: int
) -> str:
    with core.checkpoint.store_path({"steps_completed": steps}) as (path, storage_id):
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "batcher": batcher.get_state()},
            path / "state.pt",
        )
    return storage_id


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    pred = model(x)
    return {"validation_loss": float(nn.functional.mse_loss(pred, y)), "validation_mae": float((pred - y).abs().mean())}


def train(core: pedl.core.Context, latest_checkpoint: str | None, seed: int) -> int:
    hp = core.hparams
    batch_size = int(hp.get("batch_size", 64))
    validation_period = batches_setting(core.config, "min_validation_period", 100)
    checkpoint_period = batches_setting(core.config, "min_checkpoint_period", 500)

    torch.manual_seed(seed)
    x_train, y_train = make_data(2048, seed=1)
    x_val, y_val = make_data(512, seed=2)
    model = make_model(int(hp.get("hidden_size", 64)))
    optimizer = torch.optim.Adam(model.parameters(), lr=float(hp["learning_rate"]))
    batcher = torch.Generator().manual_seed(seed)

    steps = 0
    if latest_checkpoint:
        with core.checkpoint.restore_path(latest_checkpoint) as path:
            state = torch.load(path / "state.pt", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batcher.set_state(state["batcher"])
        steps = int(core.checkpoint.get_metadata(latest_checkpoint)["steps_completed"])
        print(f"resumed from checkpoint {latest_checkpoint} at batch {steps}", flush=True)
    checkpointed_at = steps

    for op in core.searcher.operations():
        losses: list[float] = []
        while steps < op.length:
            idx = torch.randint(0, len(x_train), (batch_size,), generator=batcher)
            loss = nn.functional.mse_loss(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            steps += 1

            if steps % TRAINING_REPORT_PERIOD == 0 or steps == op.length:
                mean = sum(losses) / len(losses)
                core.train.report_training_metrics(
                    steps_completed=steps, metrics={"loss": mean, "rmse": math.sqrt(mean)}
                )
                losses = []
            if steps % validation_period == 0:
                core.train.report_validation_metrics(steps_completed=steps, metrics=evaluate(model, x_val, y_val))
                op.report_progress(steps)
            if steps % checkpoint_period == 0:
                save_checkpoint(core, model, optimizer, batcher, steps)
                checkpointed_at = steps
            if core.preempt.should_preempt():
                if checkpointed_at != steps:
                    save_checkpoint(core, model, optimizer, batcher, steps)
                print(f"preempted at batch {steps}; checkpoint saved, exiting", flush=True)
                return 0

        metrics = evaluate(model, x_val, y_val)
        if steps % validation_period != 0:
            core.train.report_validation_metrics(steps_completed=steps, metrics=metrics)
        if checkpointed_at != steps:
            save_checkpoint(core, model, optimizer, batcher, steps)
            checkpointed_at = steps
        op.report_completed(metrics["validation_loss"])
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
