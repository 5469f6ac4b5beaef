"""Train a small numpy MLP to tell three spiral arms apart, reporting through pedl.core.

On a pedl cluster the master runs `python3 train.py` with the trial's hyperparameters. On a laptop:

    python3 train.py                           # const.yaml's settings, checkpoints in ./checkpoints
    python3 train.py --config grid.yaml        # the first grid point
    python3 train.py --latest-checkpoint UUID  # resume from a local checkpoint
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

import numpy as np
from mlp import MLP, make_spirals

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


def save_checkpoint(core: pedl.core.Context, net: MLP, steps: int, rng: np.random.Generator) -> str:
    with core.checkpoint.store_path({"steps_completed": steps}) as (path, storage_id):
        net.save(path / "weights.npz")
        (path / "state.json").write_text(json.dumps({"rng": rng.bit_generator.state}))
    return storage_id


def train(core: pedl.core.Context, latest_checkpoint: str | None, seed: int) -> int:
    hp = core.hparams
    lr = float(hp["learning_rate"])
    momentum = float(hp.get("momentum", 0.9))
    batch_size = int(hp.get("batch_size", 32))
    hidden = int(hp.get("hidden_size", 64))
    validation_period = batches_setting(core.config, "min_validation_period", 100)
    checkpoint_period = batches_setting(core.config, "min_checkpoint_period", 500)

    # The data are the same for every trial; the seed only changes initialization and batching.
    x_train, y_train = make_spirals(200, seed=1)
    x_val, y_val = make_spirals(100, seed=2)
    rng = np.random.default_rng(seed)
    net = MLP([2, hidden, hidden, 3], rng)

    steps = 0
    if latest_checkpoint:
        with core.checkpoint.restore_path(latest_checkpoint) as path:
            net.load(path / "weights.npz")
            rng.bit_generator.state = json.loads((path / "state.json").read_text())["rng"]
        steps = int(core.checkpoint.get_metadata(latest_checkpoint)["steps_completed"])
        print(f"resumed from checkpoint {latest_checkpoint} at batch {steps}", flush=True)
    checkpointed_at = steps

    for op in core.searcher.operations():
        window: list[tuple[float, float]] = []
        while steps < op.length:
            idx = rng.integers(0, len(x_train), size=batch_size)
            window.append(net.train_step(x_train[idx], y_train[idx], lr, momentum))
            steps += 1

            if steps % TRAINING_REPORT_PERIOD == 0 or steps == op.length:
                losses, accuracies = zip(*window, strict=True)
                core.train.report_training_metrics(
                    steps_completed=steps,
                    metrics={"loss": float(np.mean(losses)), "accuracy": float(np.mean(accuracies))},
                )
                window = []
            if steps % validation_period == 0:
                val_loss, val_accuracy = net.evaluate(x_val, y_val)
                core.train.report_validation_metrics(
                    steps_completed=steps, metrics={"validation_loss": val_loss, "validation_accuracy": val_accuracy}
                )
                op.report_progress(steps)
                print(
                    f"batch {steps}: validation_loss={val_loss:.4f} validation_accuracy={val_accuracy:.3f}", flush=True
                )
            if steps % checkpoint_period == 0:
                save_checkpoint(core, net, steps, rng)
                checkpointed_at = steps
            if core.preempt.should_preempt():
                if checkpointed_at != steps:
                    save_checkpoint(core, net, steps, rng)
                print(f"preempted at batch {steps}; checkpoint saved, exiting", flush=True)
                return 0

        val_loss, val_accuracy = net.evaluate(x_val, y_val)
        if steps % validation_period != 0:
            core.train.report_validation_metrics(
                steps_completed=steps, metrics={"validation_loss": val_loss, "validation_accuracy": val_accuracy}
            )
        if checkpointed_at != steps:
            save_checkpoint(core, net, steps, rng)
            checkpointed_at = steps
        op.report_completed(val_loss)
    return 0


def main() -> int:
    args = parse_args()
    info = pedl.get_cluster_info()
    # On the cluster the master says where to resume from and which seed to use.
    latest = info.latest_checkpoint if info else args.latest_checkpoint
    seed = info.trial.trial_seed if info and info.trial else args.seed
    with pedl.core.init(config=args.config, checkpoint_storage=args.checkpoint_dir) as core:
        return train(core, latest, seed)


if __name__ == "__main__":
    sys.exit(main())
