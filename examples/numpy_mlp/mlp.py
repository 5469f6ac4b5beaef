"""A small tanh MLP in plain numpy (SGD with momentum) and the spiral data set it learns.

Kept apart from train.py so the training loop there reads like any pedl.core script.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_spirals(
    points_per_class: int, *, classes: int = 3, noise: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved 2-D spiral arms, one arm per class: not linearly separable, easy to draw."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, points_per_class)
        theta = np.linspace(c * 4.0, (c + 1) * 4.0, points_per_class) + rng.normal(0, noise, points_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(points_per_class, c))
    return np.concatenate(xs).astype(np.float64), np.concatenate(ys)


class MLP:
    """Fully connected layers with tanh between them and softmax cross-entropy on top."""

    def __init__(self, sizes: list[int], rng: np.random.Generator) -> None:
        self.params: dict[str, np.ndarray] = {}
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            self.params[f"w{i}"] = rng.normal(0.0, np.sqrt(1.0 / n_in), (n_in, n_out))
            self.params[f"b{i}"] = np.zeros(n_out)
        self.velocity = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.layers = len(sizes) - 1

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        activations = [x]
        h = x
        for i in range(self.layers):
            h = h @ self.params[f"w{i}"] + self.params[f"b{i}"]
            if i < self.layers - 1:
                h = np.tanh(h)
            activations.append(h)
        return h, activations

    @staticmethod
    def _softmax_loss(logits: np.ndarray, y: np.ndarray) -> tuple[float, float, np.ndarray]:
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(shifted)
        probs /= probs.sum(axis=1, keepdims=True)
        n = len(y)
        loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
        accuracy = float((probs.argmax(axis=1) == y).mean())
        return loss, accuracy, probs

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        logits, _ = self._forward(x)
        loss, accuracy, _ = self._softmax_loss(logits, y)
        return loss, accuracy

    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float, momentum: float) -> tuple[float, float]:
        logits, acts = self._forward(x)
        loss, accuracy, probs = self._softmax_loss(logits, y)
        grad = probs
        grad[np.arange(len(y)), y] -= 1.0
        grad /= len(y)
        for i in reversed(range(self.layers)):
            g_w = acts[i].T @ grad
            g_b = grad.sum(axis=0)
            if i > 0:
                grad = (grad @ self.params[f"w{i}"].T) * (1.0 - acts[i] ** 2)
            for name, g in ((f"w{i}", g_w), (f"b{i}", g_b)):
                self.velocity[name] = momentum * self.velocity[name] - lr * g
                self.params[name] += self.velocity[name]
        return loss, accuracy

    def save(self, path: Path) -> None:
        arrays = dict(self.params)
        arrays.update({f"velocity_{k}": v for k, v in self.velocity.items()})
        np.savez(path, **arrays)

    def load(self, path: Path) -> None:
        with np.load(path) as data:
            for k in self.params:
                self.params[k] = data[k].copy()
                self.velocity[k] = data[f"velocity_{k}"].copy()
