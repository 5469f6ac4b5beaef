"""A PyTorchTrial written for pedl's tests, on Determined 0.38.1's API unmodified: a linear regression
of y = 3x + 1 on a fixed synthetic dataset, so its loss falls and every run of it is alike.

Hyperparameters: `global_batch_size`, `lr`, `delay` (seconds slept per batch, so a test can act
while it trains), `invalid_hp_at` (a batch index at which it raises det.InvalidHP), `fail_once_at`
(a batch index at which its first run exits hard, as a killed process does)."""

import os
import pathlib
import time
from typing import Any

import determined as det
import torch
from determined import pytorch
from torch import nn

RECORDS = 256


def dataset(seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(RECORDS, 1, generator=g)
    return torch.utils.data.TensorDataset(x, 3 * x + 1)


class RegressionTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()
        self.model = context.wrap_model(nn.Linear(1, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=self.hparams["lr"]))

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(0), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(1), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: pytorch.TorchData, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        if batch_idx == self.hparams.get("invalid_hp_at"):
            raise det.InvalidHP(f"batch {batch_idx}: this learning rate diverges")
        if batch_idx == self.hparams.get("fail_once_at"):
            markers = pathlib.Path(os.environ.get("PEDL_TEST_MARKERS", "/nonexistent"))
            marker = markers / f"failed-{self.context.get_trial_id()}"
            if not marker.exists():
                marker.write_text(str(batch_idx))
                os._exit(9)  # as a killed process: no checkpoint, no goodbye
        time.sleep(float(self.hparams.get("delay", 0)))
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "batch_index": float(batch_idx), "rank": float(self.context.distributed.get_rank())}

    def evaluate_batch(self, batch: pytorch.TorchData, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_loss": nn.functional.mse_loss(self.model(x), y).item()}


class NotATrial:
    """For the bad-input test: a class that is not a Trial."""
