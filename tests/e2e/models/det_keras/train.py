"""The same regression in Keras, trained by model.fit() with Determined 0.38.1's DeterminedCallback under
det.core.init(): it reports, checkpoints each epoch, and resumes from the trial's latest checkpoint.

Hyperparameters: `global_batch_size`, `lr`, `epochs`, `delay` (seconds slept after each batch, so that a
test can pause it mid-run)."""

import logging
import time

import determined as det
import tensorflow as tf
from determined import keras
from model_def import dataset

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    assert info is not None, "run on a cluster"
    hparams = info.trial.hparams
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(hparams["lr"]), loss="mse", metrics=["mae"])
    with det.core.init() as core_context:
        callback = keras.DeterminedCallback(
            core_context,
            checkpoint=info.latest_checkpoint,
            continue_id=info.trial.trial_id,
            train_metrics_report_period=2,
        )
        slow = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda *_: time.sleep(hparams.get("delay", 0)))
        model.fit(
            *dataset(0),
            batch_size=hparams["global_batch_size"],
            epochs=hparams["epochs"],
            validation_data=dataset(1),
            callbacks=[callback, slow],
            verbose=0,
        )
