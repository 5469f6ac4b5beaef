"""A DeepSpeedTrial written for pedl's tests, on Determined 0.38.1's API unmodified: a linear regression of
y = 3x + 1 whose model is a DeepSpeed engine (ZeRO stage 0, SGD). Determined 0.38.1's DeepSpeedTrialContext
puts the engine on CUDA and refuses a trial without GPUs, so on CPU slots it never trains: pedl's load check
ends such a trial at once, naming the GPU slots it needs.

Hyperparameters: `global_batch_size`, `lr`."""

from collections.abc import Iterator
from typing import Any

import deepspeed
import torch
from determined import pytorch
from determined.pytorch import deepspeed as det_ds
from torch import nn

RECORDS = 64


def dataset(seed: int) -> torch.utils.data.TensorDataset:
    x = torch.rand(RECORDS, 1, generator=torch.Generator().manual_seed(seed))
    return torch.utils.data.TensorDataset(x, 3 * x + 1)


class RegressionTrial(det_ds.DeepSpeedTrial):
    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        hparams = context.get_hparams()
        model = nn.Linear(1, 1)
        config = {
            "train_batch_size": hparams["global_batch_size"],
            "optimizer": {"type": "SGD", "params": {"lr": hparams["lr"]}},
            "zero_optimization": {"stage": 0},
        }
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        self.engine = context.wrap_model_engine(engine)

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(0), batch_size=self.engine.train_micro_batch_size_per_gpu(), shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(1), batch_size=self.engine.train_micro_batch_size_per_gpu())

    def train_batch(self, iterator: Iterator[Any], epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = self.context.to_device(next(iterator))
        loss = nn.functional.mse_loss(self.engine(x), y)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss}

    def evaluate_batch(self, iterator: Iterator[Any], batch_idx: int) -> dict[str, Any]:
        x, y = self.context.to_device(next(iterator))
        return {"validation_loss": nn.functional.mse_loss(self.engine(x), y)}
