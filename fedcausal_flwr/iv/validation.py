"""FedIV's validation moment criterion: model selection without pooling.

g is scored by psi' C^-1 psi over random Fourier features of z (Lemma 1 on a fixed class,
:func:`criterion`), from the clients' validation sums only (:func:`validation_sums`,
:func:`pooled_criterion`).

Pure torch/numpy: no I/O, no Flower; :mod:`fedcausal_flwr.iv.model` re-exports these names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from fedcausal_flwr.extras import missing_extra
from fedcausal_flwr.iv.networks import Batch, predict

try:
    import torch
    from torch import nn
except ModuleNotFoundError as e:
    raise missing_extra(e, "FedIV", "fediv", "torch") from e


def rff(z_dim: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random Fourier features ``(W, b)`` of bandwidth sqrt(z_dim) for the validation class."""
    rng = np.random.default_rng([int(seed), 0xF1])
    return rng.standard_normal((z_dim, m)) / math.sqrt(z_dim), rng.uniform(0, 2 * np.pi, m)


def features(z: np.ndarray, basis: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """phi(z) = [1, sqrt(2/m) cos(z W + b)] (rows of flattened ``z``)."""
    W, b = basis
    zf = np.asarray(z, dtype=float).reshape(len(z), -1)
    return np.hstack([np.ones((len(zf), 1)), math.sqrt(2 / W.shape[1]) * np.cos(zf @ W + b)])


def validation_sums(g: nn.Module, b: Batch, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sum_k phi_k e_k, sum_k phi_k phi_k^T)`` with e = y - g(x) on ``b``.

    The weighting uses a fixed e~ = 1 (DeepGMM fixes e~ from a pooled pre-stage) rather than
    the current residuals: weighting by the current e^2 would reward rounds whose residuals
    are large, and selected near-initial models in our runs.
    """
    with torch.no_grad():
        e = (b.y - predict(g, b.x)).cpu().numpy().ravel()
    return phi.T @ e, phi.T @ phi


def criterion(psi_sum: np.ndarray, c_sum: np.ndarray, n: int, ridge: float = 1e-8) -> float:
    """sup_v v^T psi - 1/4 v^T C v = psi^T C^{-1} psi over the linear span of phi (Lemma 1).

    ``psi = psi_sum / n``, ``C = c_sum / n``; smaller is better (fewer moment violations).
    """
    psi, C = psi_sum / n, c_sum / n
    C = C + ridge * np.trace(C) / len(C) * np.eye(len(C))
    return float(psi @ np.linalg.solve(C, psi))


def pooled_criterion(sums: Sequence[tuple[np.ndarray, np.ndarray, int]],
                     combine: Callable[[list[np.ndarray]], np.ndarray] | None = None) -> float:
    """:func:`criterion` of the clients' summed validation sums ``(psi_sum, c_sum, n)``.

    ``combine``: a robust centre of the clients' means ``psi_sum / n``, ``c_sum / n``
    (coordinate-wise, e.g. ``federation.robust.robust_mean``) in place of the pooled sums:
    one client's sums then move ``psi`` and ``C`` by no more than the honest clients' spread
    (each client weighs alike); None: the pooled sums."""
    if combine is not None:
        return criterion(combine([s[0] / s[2] for s in sums]),
                         combine([s[1] / s[2] for s in sums]), 1)
    return criterion(sum(s[0] for s in sums), sum(s[1] for s in sums), sum(s[2] for s in sums))
