"""Differential privacy of FedGC's and FedCF's uploads (the mechanism and its accounting
are :mod:`fedcausal_flwr.privacy`'s).

What a run releases (:func:`dp_releases`, :func:`dp_release_key`), the noise multiplier of
the run's total budget (:func:`dp_noise_multiplier`), the server's ridge correction for noisy
regressors (:func:`dp_noise_ridge`), the run's account (:func:`dp_report`) and a client's
release (:func:`private`). No I/O, no Flower; :mod:`fedcausal_flwr.statespace.model`
re-exports these names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.statespace.settings import FedCFSettings, StateSpaceSettings


def dp_sent_arrays(s: StateSpaceSettings) -> int:
    """State arrays a client sends per window: FedGC 2, FedCF 4 (:func:`client_states`)."""
    return 4 if isinstance(s, FedCFSettings) else 2


def dp_fresh(s: StateSpaceSettings) -> bool:
    """Whether a client's upload changes with its parameters. FedGC's innovation target
    sends ``[C^+ y^t, hhat_c^{t-1}]`` (:func:`fedgc_states`), fixed by the data: a window's
    release is then drawn once and repeated in every epoch (a repeat is post-processing,
    free); otherwise every window is a fresh release."""
    return isinstance(s, FedCFSettings) or s.target != "innovation"


def dp_release_key(s: StateSpaceSettings, k: int, T: int) -> int:
    """The release (noise draw) of exchange k: k itself, or the window's place in its epoch
    when the upload is fixed (:func:`dp_fresh`)."""
    per_epoch = len(range(1, T, s.window))
    return k if dp_fresh(s) else (k - 1) % per_epoch + 1


def dp_releases(s: StateSpaceSettings, T: int, rounds: int) -> int:
    """Gaussian releases per client in ``rounds`` windows: arrays x distinct releases."""
    per_epoch = len(range(1, T, s.window))
    return dp_sent_arrays(s) * (rounds if dp_fresh(s) else min(rounds, per_epoch))


def dp_noise_multiplier(s: StateSpaceSettings, T: int, rounds: int) -> float:
    """``z`` whose composition over :func:`dp_releases` is (``dp_epsilon``, ``dp_delta``)
    (:func:`~fedcausal_flwr.privacy.noise_multiplier_for`; ``inf``: clipped, no noise;
    NaN: DP off)."""
    from fedcausal_flwr.privacy import noise_multiplier_for

    if not s.dp:
        return math.nan

    return noise_multiplier_for(s.dp_epsilon, s.dp_delta, dp_releases(s, T, rounds))


def dp_noise_ridge(s: StateSpaceSettings, noise_multiplier: float) -> float:
    """The server's ridge correction for noisy regressors (errors in variables; Fuller 1987,
    Measurement Error Models, sec. 1.2): each sent entry carries independent noise of
    variance ``sigma^2 = (2 z clip)^2``, which adds ``sigma^2 I`` (``2 sigma^2 I`` after
    time differencing) to the regressors' second moment and shrinks ``A_hat`` towards 0; a
    ridge weight of minus that removes it in expectation. FedGC only (0 otherwise)."""
    if (not s.dp or not s.dp_debias or math.isinf(noise_multiplier)
            or isinstance(s, FedCFSettings)):
        return 0.0
    sigma = 2.0 * noise_multiplier * s.dp_clip_msg
    return -(2.0 if s.difference else 1.0) * sigma ** 2


def dp_report(s: StateSpaceSettings, T: int, rounds: int, noise_multiplier: float
              ) -> dict[str, Any]:
    """The run's DP account per client: releases made in ``rounds`` windows, their total
    (epsilon, delta) by the RDP accountant, the budget and the mechanism."""
    from fedcausal_flwr.privacy import ACCOUNTANT, rdp_epsilon

    n = dp_releases(s, T, rounds)
    z = noise_multiplier
    return {"epsilon": rdp_epsilon(z, n, s.dp_delta), "delta": s.dp_delta,
            "budget_epsilon": s.dp_epsilon, "releases_per_client": n,
            "noise_multiplier": z if math.isfinite(z) else None,
            "sigma": 2.0 * z * s.dp_clip_msg if math.isfinite(z) else 0.0,
            "clip": s.dp_clip_msg, "fresh_per_window": dp_fresh(s),
            "noise_ridge": dp_noise_ridge(s, z), "accountant": ACCOUNTANT,
            "unit": "one time step's row of a sent state array (replace-one, sensitivity "
                    "2 clip); the server's gradients are post-processing"}


def private(arrays: Sequence[np.ndarray], m: int, key: int, *, noise_multiplier: float,
            clip: float, seed: int) -> list[np.ndarray]:
    """Client m's release ``key`` of ``arrays``: rows clipped to ``clip``, Gaussian noise of
    multiplier ``noise_multiplier`` (:class:`~fedcausal_flwr.privacy.GaussianRelease`; NaN:
    DP off, unchanged). Array j draws its noise from ``release_rng(seed, 1, m, key, j)``."""
    if math.isnan(noise_multiplier):
        return list(arrays)
    from fedcausal_flwr.privacy import GaussianRelease, release_rng

    rel = GaussianRelease(noise_multiplier, clip)
    return [rel(a, release_rng(seed, 1, m, key, j)) for j, a in enumerate(arrays)]
