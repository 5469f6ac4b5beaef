"""The same PyTorchTrial trained from a script through Determined 0.38.1's Trainer API."""

import logging

import determined as det
from determined import pytorch
from model_def import RegressionTrial

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    assert info is not None, "run on a cluster"
    with pytorch.init(hparams=info.trial.hparams) as train_context:
        trial = RegressionTrial(train_context)
        trainer = pytorch.Trainer(trial, train_context)
        trainer.fit(
            max_length=pytorch.Batch(int(info.trial.hparams["batches"])),
            validation_period=pytorch.Batch(4),
            checkpoint_period=pytorch.Batch(4),
            latest_checkpoint=info.latest_checkpoint,
        )
