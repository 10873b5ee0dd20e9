"""What a state-space client holds and filters: its local blocks, gain, series and the
proprietary Kalman filter states ``hc`` (FedGC/FedCF, see :mod:`fedcausal_flwr.statespace.model`).

Missing observations (NaN cells of ``y``): the filter updates with the observed components
only (:func:`kalman_filter_missing`): through the state they measure when they determine it,
else by the standard partial-observation update with the rows of ``C`` and ``R`` that were
observed (:func:`kalman_update`; nothing observed: predict only), which needs the noise
covariances ``Q`` and ``R``; every formula that reads ``y`` afterwards reads a missing cell
as the filter reads it. A missing input cell reads as its column's observed mean
(:func:`filled_inputs`). Complete series take the steady-state filter,
:func:`kalman_filter`, unchanged.

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


def kalman_update(prior: np.ndarray, S: np.ndarray, C: np.ndarray, R: np.ndarray,
                  y: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior ``(mean, covariance)`` from the observed components of ``y`` alone.

    ``G = S C_o^T (C_o S C_o^T + R_oo)^{-1}``, mean ``prior + G (y_o - C_o prior)``,
    covariance ``(I - G C_o) S`` with ``C_o``, ``R_oo``, ``y_o`` the rows (and columns) of the
    observed components: the full update of the system with the missing rows deleted. No
    component observed: the prior, unchanged (predict only).
    """
    obs = np.asarray(observed, dtype=bool)
    if not obs.any():
        return prior, S
    Co, Ro = C[obs], R[np.ix_(obs, obs)]
    G = S @ Co.T @ np.linalg.inv(Co @ S @ Co.T + Ro)
    post = S - G @ Co @ S
    return prior + G @ (y[obs] - Co @ prior), 0.5 * (post + post.T)


def kalman_filter_missing(A: np.ndarray, C: np.ndarray, K: np.ndarray, Q: np.ndarray,
                          R: np.ndarray, y: np.ndarray, B: np.ndarray | None = None,
                          u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(posterior states, y read at its missing cells)`` of a series with NaN cells.

    Per step, by what was observed of ``y^t``:

    - everything: the steady-state update ``hhat = h + K (y - C h)`` of :func:`kalman_filter`;
    - components that determine the state (``C_o`` of full column rank): the same gain
      through the state they measure, ``x = C_o^+ y_o`` (:func:`observed_state`):
      ``hhat = h + K C (x - h)``, i.e. the missing cells read as ``C x``; it uses the
      observed components alone (gain ``K [I; C_m C_o^+]`` on ``y_o - C_o h``);
    - fewer (none included): the standard partial-observation update
      (:func:`kalman_update`, covariance carried from the steady state's by ``A S A^T + Q``;
      nothing observed: predict only); the missing cells read as ``C hhat``.

    Why not the partial-observation update at every step: the local filter ignores the
    other clients' drive, so the fewer components it sees the more it trusts its own
    prediction, which lacks exactly the cross-client effect the server learns; on development
    seeds 100-103 (FedGC App defaults, 20% of cells missing) that halved ``A_hat_21``
    (``simulations/studies/statespace_missing.py``), the measured state kept it.
    """
    T, p = y.shape[0], A.shape[0]
    S_ss = slin.solve_discrete_are(A.T, C.T, Q, R)  # the steady state's prior covariance
    out, filled = np.zeros((T, p)), np.array(y, dtype=float)
    prev, S, steady = np.zeros(p), S_ss, True
    for t in range(T):
        prior = A @ prev + (B @ u[t - 1] if (B is not None and B.size and t) else 0.0)
        S = S_ss if steady else A @ S @ A.T + Q
        obs = ~np.isnan(y[t])
        x = prior if obs.all() else observed_state(C, y[t], obs, None)
        if obs.all():
            prev, steady = prior + K @ (y[t] - C @ prior), True
        elif x is not None:
            prev, steady = prior + K @ (C @ (x - prior)), True
            filled[t, ~obs] = (C @ x)[~obs]
        else:
            (prev, S), steady = kalman_update(prior, S, C, R, y[t], obs), False
            filled[t, ~obs] = (C @ prev)[~obs]
        out[t] = prev
    return out, filled


def observed_state(C: np.ndarray, y: np.ndarray, observed: np.ndarray,
                   fallback: np.ndarray | None) -> np.ndarray | None:
    """The least-squares state ``C_o^+ y_o`` of the observed components, or ``fallback``
    when they do not determine it (rank of ``C_o`` below P)."""
    if observed.sum() < C.shape[1]:
        return fallback
    x, _, rank, _ = np.linalg.lstsq(C[observed], y[observed], rcond=None)
    return x if rank == C.shape[1] else fallback


def filled_inputs(u: np.ndarray) -> np.ndarray:
    """``u`` with each missing (NaN) cell at its column's mean over the observed cells (0 for
    a column with none). For exogenous inputs such a row carries no information on ``B``
    and no bias; holding the last observed input instead attenuated ``B_hat_mn`` on
    development seeds 100-103 (FedCF, i.i.d. inputs, 20% of cells missing: cf_error_21
    0.215 ± 0.101 held, 0.017 ± 0.004 mean, 0.013 complete; a held i.i.d. input is unrelated
    to the true one)."""
    out = np.array(u, dtype=float)
    gap = np.isnan(out)
    if gap.any():
        seen = np.where(gap, 0.0, out).sum(axis=0)
        n = (~gap).sum(axis=0)
        mean = np.divide(seen, n, out=np.zeros_like(seen), where=n > 0)
        out[gap] = np.broadcast_to(mean, out.shape)[gap]
    return out


def missing_share(*series: np.ndarray) -> float:
    """Share of missing (NaN) cells over all cells of ``series`` (0 when there are none)."""
    cells = sum(np.size(x) for x in series)
    return float(sum(np.isnan(x).sum() for x in series) / cells) if cells else 0.0


# ---- client data -----------------------------------------------------------------------------
@dataclass
class ClientData:
    """What client m holds: its local blocks, gain, series and proprietary KF states.

    ``Q``, ``R``: the noise covariances of the local filter, needed only when ``y`` or ``u``
    has missing (NaN) cells. ``missing``: their share of the cells of ``y`` and ``u``; with
    any, ``y`` and ``u`` are kept as read by the filter (:func:`kalman_filter_missing`,
    :func:`filled_inputs`) and ``observed`` (T x D), ``u_observed`` (T x U) mark the cells
    that were observed (None for complete series); :meth:`given` gives them back as given.
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    K: np.ndarray
    y: np.ndarray
    u: np.ndarray
    Q: np.ndarray | None = None
    R: np.ndarray | None = None
    hc: np.ndarray = field(init=False)
    observed: np.ndarray | None = field(init=False, default=None)
    u_observed: np.ndarray | None = field(init=False, default=None)
    missing: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.missing = missing_share(self.y, self.u)
        if not self.missing:
            self.hc = kalman_filter(self.A, self.C, self.K, self.y, self.B, self.u)
            return
        if self.Q is None or self.R is None:
            raise ValueError("missing values in y or u: the partial-observation filter needs "
                             "the noise covariances Q (P x P) and R (D x D)")
        self.observed, self.u_observed = ~np.isnan(self.y), ~np.isnan(self.u)
        self.u = filled_inputs(self.u)
        self.hc, self.y = kalman_filter_missing(self.A, self.C, self.K, self.Q, self.R,
                                                self.y, self.B, self.u)

    def given(self) -> tuple[np.ndarray, np.ndarray]:
        """``(y, u)`` as given: NaN in the missing cells."""
        if self.observed is None:
            return self.y, self.u
        return (np.where(self.observed, self.y, np.nan),
                np.where(self.u_observed, self.u, np.nan))

    @property
    def dims(self) -> tuple[int, int, int]:
        """``(P, U, D)``."""
        return self.A.shape[0], self.B.shape[1], self.C.shape[0]


def checked_client(A: np.ndarray, B: np.ndarray, C: np.ndarray, K: np.ndarray, y: np.ndarray,
                   u: np.ndarray, who: str = "client", Q: np.ndarray | None = None,
                   R: np.ndarray | None = None) -> ClientData:
    """A :class:`ClientData`, or a ValueError naming ``who`` and the problem. NaN cells of
    ``y`` and ``u`` are missing values (they need ``Q`` and ``R``); infinities are errors."""
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
        ok = np.isfinite(x) | (np.isnan(x) if name in ("y", "u") else False)
        if not np.all(ok):
            bad = np.argwhere(~ok)[0]
            raise ValueError(f"{who}: {name} has {int((~ok).sum())} non-finite "
                             f"values (first at {tuple(int(i) for i in bad)})")
    if spectral_radius(A) >= 1.0:
        raise ValueError(f"{who}: A_mm is unstable (spectral radius {spectral_radius(A):.3f} "
                         ">= 1)")
    if np.linalg.matrix_rank(C) < p:
        raise ValueError(f"{who}: C_mm ({C.shape[0]} x {p}) does not have full column rank "
                         f"({np.linalg.matrix_rank(C)} < {p})")
    if K.shape != (p, C.shape[0]):
        raise ValueError(f"{who}: gain K is {K.shape}, expected {(p, C.shape[0])}")
    Q, R = (None if x is None else np.asarray(x, dtype=float) for x in (Q, R))
    for name, x, k in (("Q", Q, p), ("R", R, C.shape[0])):
        if x is not None and (x.shape != (k, k) or not np.all(np.isfinite(x))):
            raise ValueError(f"{who}: noise covariance {name} is {x.shape}, expected "
                             f"{(k, k)} and finite")
    try:
        return ClientData(A, B, C, K, y, u, Q, R)
    except ValueError as e:
        raise ValueError(f"{who}: {e}") from None
