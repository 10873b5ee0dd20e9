"""Equations and settings: the pooled mean is the n-weighted mean of the clients' means."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedcausal_flwr.settings import RunSettings, setting


@dataclass(frozen=True)
class ToySettings(RunSettings):
    """Rounds of averaging and the damping of the server's step."""

    section: ClassVar[str] = "toymean"

    rounds: int = setting(3, "rounds", ge=1)
    step: float = setting(1.0, "step", gt=0, le=1, wire=True)
    seed: int = setting(0, "seed", ge=0)


def pooled_mean(means: Mapping[int, np.ndarray], counts: Mapping[int, int]) -> np.ndarray:
    """sum_k n_k mean_k / sum_k n_k."""
    n = sum(counts.values())
    return sum(counts[k] * np.asarray(means[k]) for k in means) / n


def moved(mu: np.ndarray, target: np.ndarray, step: float) -> np.ndarray:
    """mu + step (target - mu)."""
    return mu + step * (target - mu)


def reference(xs: Sequence[np.ndarray], s: ToySettings) -> np.ndarray:
    """The loop the federation must reproduce."""
    mu = np.zeros(xs[0].shape[1])
    target = pooled_mean({k: x.mean(0) for k, x in enumerate(xs)},
                         {k: len(x) for k, x in enumerate(xs)})
    for _ in range(s.rounds):
        mu = moved(mu, target, s.step)
    return mu
