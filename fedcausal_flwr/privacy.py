"""Differential privacy: clipping, the Gaussian mechanism and its accounting.

A release clips each row (one time step's vector) to norm ``clip`` and adds
``N(0, (sigma * clip)^2 I)``; neighbouring inputs move a clipped vector by at most ``2 clip``,
so ``sigma = 2 sqrt(2 ln(1.25 / delta)) / epsilon`` gives (epsilon, delta)-DP per release
(classic Gaussian mechanism, valid for epsilon < 1). Runs compose releases sequentially.

Pure numpy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Noise std of the Gaussian mechanism: ``sensitivity sqrt(2 ln(1.25/delta)) / epsilon``."""
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity >= 0):
        raise ValueError(f"need epsilon > 0, 0 < delta < 1, sensitivity >= 0; got {epsilon}, "
                         f"{delta}, {sensitivity}")
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def clip_rows(X: np.ndarray, bound: float) -> np.ndarray:
    """Each row scaled by ``min(1, bound / ||row||)`` (a 1-D array is one row)."""
    X = np.asarray(X, dtype=float)
    rows = X.reshape(-1, X.shape[-1]) if X.ndim else X.reshape(1, 1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return (rows * scale).reshape(X.shape)


@dataclass(frozen=True)
class GaussianRelease:
    """Clip rows to ``clip`` and add ``N(0, (sigma_mult clip)^2)`` noise: (epsilon, delta)-DP."""

    epsilon: float
    delta: float
    clip: float

    @property
    def sigma(self) -> float:
        """Noise std (absolute): sensitivity ``2 clip``."""
        return gaussian_sigma(2.0 * self.clip, self.epsilon, self.delta)

    def __call__(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The private release of ``X``."""
        if X.size == 0:
            return np.asarray(X, dtype=float)
        return clip_rows(X, self.clip) + rng.normal(0.0, self.sigma, np.shape(X))


def composed(releases: list[tuple[float, float]]) -> tuple[float, float]:
    """Basic sequential composition: ``(sum epsilon, sum delta)``."""
    return float(sum(e for e, _ in releases)), float(sum(d for _, d in releases))


def release_rng(seed: int, *key: int) -> np.random.Generator:
    """The generator of one release, a pure function of the run seed and ``key``."""
    return np.random.default_rng([int(seed), *map(int, key)])
