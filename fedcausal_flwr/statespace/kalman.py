"""What a state-space client holds and filters: its local blocks, gain, series and the
proprietary Kalman filter states ``hc`` (FedGC/FedCF, see :mod:`fedcausal_flwr.statespace.model`).

Pure numpy/scipy: no I/O, no Flower.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as slin


def spectral_radius(A: np.ndarray) -> float:
    """max |eig(A)| (0 for an empty matrix)."""
    return float(np.max(np.abs(np.linalg.eigvals(A)))) if A.size else 0.0


# ---- Kalman filters ------------------------------------------------------------------------
def kalman_gain(A: np.ndarray, C: np.ndarray, Q: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Steady-state filter gain ``K = S C^T (C S C^T + R)^{-1}``, S the DARE prior covariance."""
    S = slin.solve_discrete_are(A.T, C.T, Q, R)
    return S @ C.T @ np.linalg.inv(C @ S @ C.T + R)


def kalman_filter(A: np.ndarray, C: np.ndarray, K: np.ndarray, y: np.ndarray,
                  B: np.ndarray | None = None, u: np.ndarray | None = None) -> np.ndarray:
    """Posterior states ``hhat^t = h^t + K (y^t - C h^t)``, ``h^t = A hhat^{t-1} + B u^{t-1}``."""
    T, p = y.shape[0], A.shape[0]
    out = np.zeros((T, p))
    prev = np.zeros(p)
    for t in range(T):
        prior = A @ prev + (B @ u[t - 1] if (B is not None and B.size and t) else 0.0)
        prev = prior + K @ (y[t] - C @ prior)
        out[t] = prev
    return out


# ---- client data -----------------------------------------------------------------------------
@dataclass
class ClientData:
    """What client m holds: its local blocks, gain, series and proprietary KF states."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    K: np.ndarray
    y: np.ndarray
    u: np.ndarray
    hc: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.hc = kalman_filter(self.A, self.C, self.K, self.y, self.B, self.u)

    @property
    def dims(self) -> tuple[int, int, int]:
        """``(P, U, D)``."""
        return self.A.shape[0], self.B.shape[1], self.C.shape[0]


def checked_client(A: np.ndarray, B: np.ndarray, C: np.ndarray, K: np.ndarray, y: np.ndarray,
                   u: np.ndarray, who: str = "client") -> ClientData:
    """A :class:`ClientData`, or a ValueError naming ``who`` and the problem."""
    A, B, C, K, y, u = (np.asarray(x, dtype=float) for x in (A, B, C, K, y, u))
    p = A.shape[0]
    if A.shape != (p, p) or C.ndim != 2 or C.shape[1] != p:
        raise ValueError(f"{who}: A_mm is {A.shape} and C_mm is {C.shape}; need P x P, D x P")
    if y.ndim != 2 or y.shape[1] != C.shape[0]:
        raise ValueError(f"{who}: y has shape {y.shape}, expected T x {C.shape[0]}")
    if u.ndim != 2 or u.shape[0] != y.shape[0] or B.shape != (p, u.shape[1]):
        raise ValueError(f"{who}: u is {u.shape} and B_mm is {B.shape}; need T x U, P x U "
                         f"with T = {y.shape[0]}")
    if y.shape[0] < 2:
        raise ValueError(f"{who}: {y.shape[0]} time steps; need at least 2")
    for name, x in (("y", y), ("u", u), ("A_mm", A), ("B_mm", B), ("C_mm", C), ("K", K)):
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(f"{who}: {name} has {int((~np.isfinite(x)).sum())} non-finite "
                             f"values (first at {tuple(int(i) for i in bad)})")
    if spectral_radius(A) >= 1.0:
        raise ValueError(f"{who}: A_mm is unstable (spectral radius {spectral_radius(A):.3f} "
                         ">= 1)")
    if np.linalg.matrix_rank(C) < p:
        raise ValueError(f"{who}: C_mm ({C.shape[0]} x {p}) does not have full column rank "
                         f"({np.linalg.matrix_rank(C)} < {p})")
    if K.shape != (p, C.shape[0]):
        raise ValueError(f"{who}: gain K is {K.shape}, expected {(p, C.shape[0])}")
    return ClientData(A, B, C, K, y, u)
