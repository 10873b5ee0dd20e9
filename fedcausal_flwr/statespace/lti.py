"""Simulators of the state-space family: block LTI systems, their series and the oracle.

``h^t = A h^{t-1} + B u^{t-1} + b^t + w^t``, ``y^t = C h^t + v^t`` with per-client blocks
of sizes ``P, U, D`` (see :mod:`fedcausal_flwr.statespace.model` for the learning equations).
These functions draw the truth that the synthetic runs are scored against; a client only
ever sees its own :class:`~fedcausal_flwr.statespace.kalman.ClientData`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as slin

from fedcausal_flwr.statespace.blocks import block, offsets
from fedcausal_flwr.statespace.kalman import (
    ClientData,
    kalman_filter,
    kalman_gain,
    spectral_radius,
)

__all__ = ["LTISystem", "inputs", "mean_shifts", "oracle_filter", "random_system", "simulate",
           "split_clients"]


@dataclass(frozen=True)
class LTISystem:
    """A block LTI system; ``P, U, D`` are the per-client state, input, output sizes."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    Q: np.ndarray
    R: np.ndarray
    P: tuple[int, ...]
    U: tuple[int, ...]
    D: tuple[int, ...]

    def block(self, M: np.ndarray, rows: Sequence[int], cols: Sequence[int], m: int, n: int
              ) -> np.ndarray:
        """Block (m, n) of ``M`` with row sizes ``rows`` and column sizes ``cols``."""
        return block(M, rows, cols, m, n)


def random_system(P: Sequence[int], U: Sequence[int], D: Sequence[int],
                  couplings: dict[tuple[int, int], np.ndarray], rng: np.random.Generator, *,
                  rho_local: tuple[float, float] = (0.5, 0.8), b_std: float = 0.5,
                  b_couplings: bool = True, q: float = 1e-3, r: float = 1e-3,
                  max_rho: float = 0.95) -> LTISystem:
    """Random stable system with given off-diagonal ``A_mn = couplings[(m, n)]`` (else 0).

    Diagonal blocks are ``U diag(s) V^T`` with random orthogonal U, V and singular values
    drawn in ``rho_local`` (so ``||A_mm||_2 < 1``); ``B`` blocks ~ N(0, b_std^2)
    (off-diagonal ones only when ``b_couplings``); ``C_mm`` ~ N(0, 1). The whole ``A`` is
    rescaled to spectral radius ``max_rho`` when it is larger.
    """
    pa, ua = offsets(P), offsets(U)
    A = np.zeros((pa[-1], pa[-1]))
    B = rng.normal(0.0, b_std, (pa[-1], ua[-1]))
    for m, p in enumerate(P):
        U1, _, V1 = np.linalg.svd(rng.normal(size=(p, p)))
        A[pa[m]:pa[m + 1], pa[m]:pa[m + 1]] = U1 @ np.diag(rng.uniform(*rho_local, p)) @ V1
        for n in range(len(P)):
            if n != m and not b_couplings:
                B[pa[m]:pa[m + 1], ua[n]:ua[n + 1]] = 0.0
    for (m, n), blk in couplings.items():
        A[pa[m]:pa[m + 1], pa[n]:pa[n + 1]] = blk
    rho = spectral_radius(A)
    if rho > max_rho:
        A *= max_rho / rho
    C = slin.block_diag(*[rng.normal(size=(d, p)) for d, p in zip(D, P, strict=True)])
    return LTISystem(A, B, C, q * np.eye(pa[-1]), r * np.eye(C.shape[0]), tuple(P), tuple(U),
                     tuple(D))


def mean_shifts(T: int, P: Sequence[int], windows: Sequence[tuple[float, float, float]],
                client: int = 0, cycle: bool = False) -> np.ndarray:
    """Piecewise-constant state offsets ``b^t`` (T x sum P) on one client's states.

    ``windows`` holds ``(start, stop, level)`` with start, stop as fractions of T. The level
    goes to every state of the client, or (``cycle``) to state ``i mod P`` in window i, so
    that the shifts excite every direction of the client's state.
    """
    pa = offsets(P)
    b = np.zeros((T, pa[-1]))
    for i, (lo, hi, level) in enumerate(windows):
        cols = (slice(pa[client] + i % P[client], pa[client] + i % P[client] + 1) if cycle
                else slice(pa[client], pa[client + 1]))
        b[int(lo * T):int(hi * T), cols] = level
    return b


def simulate(sys: LTISystem, T: int, rng: np.random.Generator, *, u: np.ndarray | None = None,
             shifts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """States, measurements and inputs ``(h, y, u)`` for t = 0..T-1, ``h^{-1} = 0``."""
    n, k = sys.A.shape[0], sys.B.shape[1]
    u = np.zeros((T, k)) if u is None else u
    b = np.zeros((T, n)) if shifts is None else shifts
    w = rng.multivariate_normal(np.zeros(n), sys.Q, T)
    v = rng.multivariate_normal(np.zeros(sys.C.shape[0]), sys.R, T)
    h = np.zeros((T, n))
    prev = np.zeros(n)
    for t in range(T):
        prev = sys.A @ prev + (sys.B @ u[t - 1] if t else 0.0) + b[t] + w[t]
        h[t] = prev
    return h, h @ sys.C.T + v, u


def inputs(T: int, U: int, rng: np.random.Generator, ar: float = 0.0) -> np.ndarray:
    """Unit-variance inputs: i.i.d. N(0, 1) (``ar = 0``) or AR(1) with coefficient ``ar``."""
    e = rng.normal(size=(T, U))
    if ar == 0.0:
        return e
    u = np.zeros_like(e)
    s = np.sqrt(1.0 - ar * ar)
    for t in range(T):
        u[t] = (ar * u[t - 1] if t else 0.0) + s * e[t]
    return u


def oracle_filter(sys: LTISystem, y: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
    """The centralized Kalman oracle: all ``y``, the true full ``A, B``, block-diagonal ``C``."""
    K = kalman_gain(sys.A, sys.C, sys.Q, sys.R)
    return kalman_filter(sys.A, sys.C, K, y, sys.B, u)


def split_clients(sys: LTISystem, y: np.ndarray, u: np.ndarray, only: int | None = None
                  ) -> list[ClientData]:
    """Per-client data with local DARE gains from the local blocks and noise covariances
    (kept with the client for a series with missing values)."""
    out = []
    for m in range(len(sys.P)) if only is None else [only]:
        A = sys.block(sys.A, sys.P, sys.P, m, m)
        C = sys.block(sys.C, sys.D, sys.P, m, m)
        Q = sys.block(sys.Q, sys.P, sys.P, m, m)
        R = sys.block(sys.R, sys.D, sys.D, m, m)
        da, ua = offsets(sys.D), offsets(sys.U)
        out.append(ClientData(A, sys.block(sys.B, sys.P, sys.U, m, m), C,
                              kalman_gain(A, C, Q, R), y[:, da[m]:da[m + 1]],
                              u[:, ua[m]:ua[m + 1]], Q, R))
    return out
