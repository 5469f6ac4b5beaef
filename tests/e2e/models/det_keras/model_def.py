"""A TFKerasTrial written for pedl's tests, on Determined 0.38.1's legacy Keras API unmodified: a linear
regression of y = 2a - b + 0.5 on a fixed synthetic dataset, so its loss falls and every run of it is alike.

Hyperparameters: `global_batch_size`, `lr`."""

import numpy as np
import tensorflow as tf
from determined import keras

RECORDS = 128


def dataset(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).random((RECORDS, 2), dtype=np.float32)
    return x, (2 * x[:, :1] - x[:, 1:] + 0.5).astype(np.float32)


class RegressionTrial(keras.TFKerasTrial):
    def __init__(self, context: keras.TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> tf.keras.Model:
        model = self.context.wrap_model(tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)]))
        optimizer = self.context.wrap_optimizer(tf.keras.optimizers.SGD(self.context.get_hparam("lr")))
        model.compile(optimizer=optimizer, loss="mse", metrics=["mae"])
        return model

    def build_training_data_loader(self) -> keras.InputData:
        return dataset(0)

    def build_validation_data_loader(self) -> keras.InputData:
        return dataset(1)
