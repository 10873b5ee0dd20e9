"""Differential privacy: clipping, the Gaussian mechanism and its accounting over a run.

A release clips each row (one time step's vector) of a sent array to L2 norm ``clip`` and
adds ``N(0, (z * 2 clip)^2 I)``. The unit protected is one row: replacing it moves the
clipped array by at most ``2 clip`` in L2 (the sensitivity), so the release is the Gaussian
mechanism with noise multiplier ``z`` (noise std / sensitivity).

Accounting is Renyi DP (Mironov 2017, "Renyi differential privacy", Prop. 7 and Prop. 1):
a Gaussian of multiplier ``z`` is ``(alpha, alpha / (2 z^2))``-RDP for every order
``alpha > 1``, ``k`` releases compose to ``(alpha, k alpha / (2 z^2))``, and the total is
converted to ``(epsilon, delta)`` at the best order. Flower's
:class:`~flwr.supercore.privacy_accounting.rdp_accountant.RdpAccountant` (Google's
``dp-accounting``, no sampling amplification) does both; :func:`noise_multiplier_for` inverts
it, so a run takes its TOTAL budget and derives ``z``. Unlike the classic per-release bound
``sigma = sqrt(2 ln(1.25 / delta)) sensitivity / epsilon`` (:func:`gaussian_sigma`, valid for
``epsilon < 1`` only), RDP composition holds for any ``epsilon``.

Pure numpy: no I/O, no logging; Flower only for its accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.extras import require_extra

ACCOUNTANT = "flwr RdpAccountant (dp-accounting RDP), Gaussian, no sampling amplification"


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Noise std of the classic Gaussian mechanism (one release, ``epsilon < 1``):
    ``sensitivity sqrt(2 ln(1.25/delta)) / epsilon``."""
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity >= 0):
        raise ValueError(f"need epsilon > 0, 0 < delta < 1, sensitivity >= 0; got {epsilon}, "
                         f"{delta}, {sensitivity}")
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def rdp_epsilon(noise_multiplier: float, releases: int, delta: float) -> float:
    """Total epsilon at ``delta`` of ``releases`` Gaussian releases of multiplier ``z``
    (Flower's RDP accountant; 0 releases: 0, ``z = inf``: 0)."""
    if releases <= 0 or math.isinf(noise_multiplier):
        return 0.0
    require_extra("Differential privacy (ss-dp)", "dp", "dp_accounting")
    from flwr.supercore.privacy_accounting import (
        GaussianPrivacyEvent,
        NeighboringRelation,
        PrivacyConfig,
        SamplingMethod,
    )
    from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

    acc = RdpAccountant(PrivacyConfig(delta, 1, NeighboringRelation.ADD_OR_REMOVE_ONE,
                                      SamplingMethod.NO_AMPLIFICATION))
    acc.compose(GaussianPrivacyEvent(float(noise_multiplier), 1, 1), int(releases))
    return acc.get_epsilon(delta)


def noise_multiplier_for(epsilon: float, delta: float, releases: int,
                         rtol: float = 1e-4) -> float:
    """The smallest multiplier ``z`` (to ``rtol``) whose ``releases``-fold composition is
    (``epsilon``, ``delta``)-DP: bisection of :func:`rdp_epsilon`, which falls with ``z``
    (``epsilon = inf`` or no release: ``inf``, i.e. no noise)."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need epsilon > 0, 0 < delta < 1; got {epsilon}, {delta}")
    if math.isinf(epsilon) or releases <= 0:
        return math.inf
    lo, hi = 1e-3, 1.0
    while rdp_epsilon(hi, releases, delta) > epsilon:
        lo, hi = hi, 2.0 * hi
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rdp_epsilon(mid, releases, delta) > epsilon else (lo, mid)
    return hi


def clip_rows(X: np.ndarray, bound: float) -> np.ndarray:
    """Each row scaled by ``min(1, bound / ||row||)`` (a 1-D array is one row)."""
    X = np.asarray(X, dtype=float)
    rows = X.reshape(-1, X.shape[-1]) if X.ndim else X.reshape(1, 1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return (rows * scale).reshape(X.shape)


@dataclass(frozen=True)
class GaussianRelease:
    """Clip rows to ``clip`` and add ``N(0, (noise_multiplier * 2 clip)^2)`` per entry."""

    noise_multiplier: float
    clip: float

    @property
    def sigma(self) -> float:
        """Noise std (absolute): ``z`` times the sensitivity ``2 clip``."""
        return self.noise_multiplier * 2.0 * self.clip

    def __call__(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The private release of ``X`` (``z = inf``: clipped only, no privacy)."""
        if X.size == 0:
            return np.asarray(X, dtype=float)
        if math.isinf(self.noise_multiplier):
            return clip_rows(X, self.clip)
        return clip_rows(X, self.clip) + rng.normal(0.0, self.sigma, np.shape(X))


def composed(releases: list[tuple[float, float]]) -> tuple[float, float]:
    """Basic sequential composition: ``(sum epsilon, sum delta)`` (a loose upper bound,
    kept to compare with :func:`rdp_epsilon`)."""
    return float(sum(e for e, _ in releases)), float(sum(d for _, d in releases))


def release_rng(seed: int, *key: int) -> np.random.Generator:
    """The generator of one release, a pure function of the run seed and ``key``."""
    return np.random.default_rng([int(seed), *map(int, key)])
