"""State-space federated causal learning: FedGC (Mohanty et al.) and FedCF (Mohamed et al.).

Global LTI system ``h^t = A h^{t-1} + B u^{t-1} + b^t + w^t``, ``y^t = C h^t + v^t`` with block
``A = [A_mn]``, ``B = [B_mn]`` and block-diagonal ``C``. Client m knows ``A_mm, B_mm, C_mm``,
runs a proprietary Kalman filter ``hc`` and augments it with ``theta_m y_m`` (and the constant
``phi_m`` in FedCF). The server learns the off-diagonal blocks ``A_mn`` (and ``B_mn``) from the
states the clients send and returns gradients w.r.t. the augmented states.

One exchange carries a *window* of time steps ``ts`` (each t >= 1): the clients' states with
their current parameters, the server's window-mean gradients, one Jacobi step on both sides.
``W = 1`` is FedGC's online schedule, ``W = T - 1`` FedCF's full batch.

FedGC is FedCF without inputs, with ``phi = 0`` and ``xi = 0``: then ``r_s = -D`` and
``L_s^FedCF = (1 + xi) L_s^FedGC`` (tested). Row convention: a window of states is ``W x P``.

:class:`FedGCSettings` and :class:`FedCFSettings` (:mod:`fedcausal_flwr.statespace.settings`)
hold every setting with the App's defaults; block indexing and time differencing are in
:mod:`fedcausal_flwr.statespace.blocks`, known-zero blocks in
:mod:`fedcausal_flwr.statespace.knownzero`, differential privacy in
:mod:`fedcausal_flwr.statespace.dp` (this module re-exports all four);
:func:`fedcausal_flwr.statespace.loop.reference` is the in-process loop the Flower path is
tested against; the client's data and Kalman filter are in :mod:`fedcausal_flwr.statespace.kalman`.
The simulators (systems, series, the centralized oracle) are in
:mod:`fedcausal_flwr.statespace.lti`.
Everything here is pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import scipy.linalg as slin

from fedcausal_flwr.statespace.blocks import (  # noqa: F401 - re-exported: statespace.model's
    block,
    differenced,
    offsets,
    time_difference,
    time_difference_adjoint,
)
from fedcausal_flwr.statespace.dp import (  # noqa: F401 - re-exported: statespace.model's
    dp_fresh,
    dp_noise_multiplier,
    dp_noise_ridge,
    dp_release_key,
    dp_releases,
    dp_report,
    dp_sent_arrays,
    private,
)
from fedcausal_flwr.statespace.kalman import ClientData
from fedcausal_flwr.statespace.knownzero import (  # noqa: F401 - re-exported: statespace.model's
    ANY_CLIENT,
    ZeroBlock,
    known_zero_masks,
    parse_known_zero,
    zero_block_list,
)
from fedcausal_flwr.statespace.settings import (  # noqa: F401 - re-exported: statespace.model's
    PAPER_SCHEDULE,
    TARGETS,
    FedCFSettings,
    FedGCSettings,
    StateSpaceSettings,
)


def with_known_zero(par: ServerParams, masks: tuple[np.ndarray, np.ndarray] | None
                    ) -> ServerParams:
    """``par`` carrying ``masks`` (:func:`known_zero_masks`), its known-zero entries set to
    exactly 0; ``par`` itself without masks."""
    if masks is None:
        return par
    zA, zB = masks
    return ServerParams(np.where(zA, 0.0, par.A_hat), np.where(zB, 0.0, par.B_hat),
                        par.curv_A, par.curv_B, zA, zB)


def windows(T: int, W: int, epochs: int) -> list[np.ndarray]:
    """Time indices of every exchange: t = 1..T-1 in chunks of W, ``epochs`` times."""
    if W < 1:
        raise ValueError(f"window must be >= 1, got {W}")
    chunks = [np.arange(s, min(s + W, T)) for s in range(1, T, W)]
    return [c for _ in range(epochs) for c in chunks]


@dataclass
class ClientParams:
    """Client m's private parameters and the running curvature bound of its theta step."""

    theta: np.ndarray
    phi: np.ndarray
    curv: float = 0.0


@dataclass
class ServerParams:
    """Off-diagonal estimates, full-size with zero diagonal blocks, the running curvature
    bounds of their steps and the known-zero masks (None: no known-zero block; see
    :func:`with_known_zero`)."""

    A_hat: np.ndarray
    B_hat: np.ndarray
    curv_A: float = 0.0
    curv_B: float = 0.0
    zero_A: np.ndarray | None = None
    zero_B: np.ndarray | None = None

    @property
    def masks(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(zero_A, zero_B)``, or None."""
        return None if self.zero_A is None else (self.zero_A, self.zero_B)


def initial_server(P: Sequence[int], U: Sequence[int], init_std: float = 0.0,
                   rng: np.random.Generator | None = None) -> ServerParams:
    """``A_hat = B_hat = 0`` off the diagonal (or N(0, init_std^2) with ``rng``)."""
    pa, ua = offsets(P), offsets(U)
    A = np.zeros((pa[-1], pa[-1]))
    B = np.zeros((pa[-1], ua[-1]))
    if init_std and rng is not None:
        A, B = rng.normal(0, init_std, A.shape), rng.normal(0, init_std, B.shape)
    return ServerParams(*off_diagonal(A, B, P, U))


def off_diagonal(A: np.ndarray, B: np.ndarray, P: Sequence[int], U: Sequence[int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    pa, ua = offsets(P), offsets(U)
    A, B = A.copy(), B.copy()
    for m in range(len(P)):
        A[pa[m]:pa[m + 1], pa[m]:pa[m + 1]] = 0.0
        B[pa[m]:pa[m + 1], ua[m]:ua[m + 1]] = 0.0
    return A, B


def initial_client(c: ClientData, init_std: float = 0.0, seed: int = 0, m: int = 0
                   ) -> ClientParams:
    """``theta, phi`` ~ N(0, init_std^2) seeded by ``(seed, m)``; zeros when init_std is 0."""
    p, _, d = c.dims
    if not init_std:
        return ClientParams(np.zeros((p, d)), np.zeros(p))
    rng = np.random.default_rng([seed, 3, m])
    return ClientParams(rng.normal(0, init_std, (p, d)), rng.normal(0, init_std, p))


def initial_server_for(P: Sequence[int], U: Sequence[int], init_std: float, seed: int,
                       masks: tuple[np.ndarray, np.ndarray] | None = None) -> ServerParams:
    """Server start of a run: N(0, init_std^2) off-diagonal blocks seeded by ``seed``, the
    known-zero blocks (``masks``, :func:`known_zero_masks`) at 0."""
    return with_known_zero(initial_server(P, U, init_std, np.random.default_rng([seed, 4])),
                           masks)


# ---- the augmented client --------------------------------------------------------------------
def client_states(c: ClientData, par: ClientParams, ts: np.ndarray, target: str
                  ) -> list[np.ndarray]:
    """What client m sends for window ``ts``: ``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``.

    ``target`` is ``h_a^t = A hhat_a^{t-1} + B u^{t-1} + phi`` (predicted), ``hhat_a^t``
    (refined) or ``h_a^t + C^+ r_a^t = C^+ y^t`` (innovation: the refined state with gain
    ``C^+`` instead of ``K``, so all of ``B_mn u_n^{t-1}`` in ``h^t`` reaches the server, not
    only the part ``K C`` lets through). FedGC uses only ``[hhat_a^{t-1}, hhat_c^{t-1}]``.
    """
    ha_prev = c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T
    if target == "refined":
        h = c.hc[ts] + c.y[ts] @ par.theta.T
    elif target == "innovation":
        h = c.y[ts] @ np.linalg.pinv(c.C).T
    else:
        h = ha_prev @ c.A.T + c.u[ts - 1] @ c.B.T + par.phi
    return [h, ha_prev, c.hc[ts - 1], c.u[ts - 1]]


def local_residual(c: ClientData, par: ClientParams, ts: np.ndarray) -> np.ndarray:
    """``r_a^t = y^t - C (A hhat_a^{t-1} + B u^{t-1} + phi)`` (eq 20 / eq 5), W x D; 0 in
    the components of ``y^t`` that were not observed (``c.observed``)."""
    ha_prev = c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T
    r = c.y[ts] - (ha_prev @ c.A.T + c.u[ts - 1] @ c.B.T + par.phi) @ c.C.T
    return r if c.observed is None else np.where(c.observed[ts], r, 0.0)


def local_loss(c: ClientData, par: ClientParams, ts: np.ndarray) -> float:
    """Window mean of ``||r_a^t||^2``."""
    return float(np.mean(np.sum(local_residual(c, par, ts) ** 2, axis=1)))


def local_gradients(c: ClientData, par: ClientParams, ts: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(grad_theta L_a, grad_phi L_a)`` (eq 21 and the FedCF table), window means."""
    r = local_residual(c, par, ts)
    W = len(ts)
    return (-2.0 / W) * (c.C @ c.A).T @ r.T @ c.y[ts - 1], (-2.0 / W) * c.C.T @ r.sum(axis=0)


def server_grad_theta(c: ClientData, ts: np.ndarray, g: np.ndarray, g_tilde: np.ndarray,
                      target: str, alg1_literal: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``(grad_theta L_s, grad_phi L_s)`` from the server's gradients (eqs 7-8)."""
    y_prev = c.y[ts - 1]
    if target == "refined":  # d hhat_a^t / d theta = y^t; phi does not enter
        return g.T @ c.y[ts] + g_tilde.T @ y_prev, np.zeros(c.A.shape[0])
    if target == "innovation":  # C^+ y^t depends on neither theta nor phi
        return g_tilde.T @ y_prev, np.zeros(c.A.shape[0])
    gt = np.zeros_like(g) if alg1_literal else g_tilde
    return (g @ c.A + gt).T @ y_prev, g.sum(axis=0)


def client_step(c: ClientData, par: ClientParams, ts: np.ndarray, g: np.ndarray,
                g_tilde: np.ndarray, *, lr_client: float, eta1: float, eta2: float,
                lambda_l: float, xi: float, learn_phi: bool, target: str,
                alg1_literal: bool, difference: bool) -> ClientParams:
    """One Jacobi step of ``theta`` (and ``phi``): eq 24 / eqs 9-10, normalized step."""
    gth_a, gph_a = local_gradients(c, par, ts)
    gth_s, gph_s = server_grad_theta(c, ts, g, g_tilde, target, alg1_literal)
    Y = c.y[ts - 1] if target != "refined" else np.vstack([c.y[ts - 1], c.y[ts]])
    sy = np.linalg.norm(Y, 2) ** 2 / len(ts)
    CA, A = np.linalg.norm(c.C @ c.A, 2) ** 2, max(np.linalg.norm(c.A, 2) ** 2, 1.0)
    if difference:  # local loss on levels, server loss on differenced rows
        Ys = [c.y[ts - 1]] if target != "refined" else [c.y[ts - 1], c.y[ts]]
        dY = np.vstack([time_difference(Yk) for Yk in Ys])
        sd = np.linalg.norm(dY, 2) ** 2 / (len(ts) - 1) if dY.size else 0.0
        bound = 2.0 * (eta1 * CA * np.linalg.norm(c.y[ts - 1], 2) ** 2 / len(ts)
                       + eta2 * (1.0 + xi) * A * sd)
    else:
        bound = 2.0 * sy * (eta1 * CA + eta2 * (1.0 + xi) * A)
    curv = max(par.curv, bound)
    L = curv + 2.0 * lambda_l + 1e-12
    theta = par.theta - (lr_client / L) * (eta1 * gth_a + eta2 * gth_s
                                           + 2.0 * lambda_l * par.theta)
    phi = par.phi
    if learn_phi:
        Lp = 2.0 * (eta1 * np.linalg.norm(c.C, 2) ** 2 + eta2) + 1e-12
        phi = par.phi - (lr_client / Lp) * (eta1 * gph_a + eta2 * gph_s)
    return ClientParams(theta, phi, curv)


# ---- the server ------------------------------------------------------------------------------
class LossTerm(NamedTuple):
    """One part ``weight * ||E||^2`` of a server loss, linear in the estimates:
    ``d E[t, i] / d (row i of [A_hat, B_hat]) = sign * X[t]`` (``X`` the window's regressors
    ``[hc, u]`` of all clients, as squared: differenced with ``difference``)."""

    weight: float
    sign: float
    E: np.ndarray
    X: np.ndarray


@dataclass
class ServerWindow:
    """Window results: losses, per-client gradients and the gradients of the estimates;
    ``terms``: the loss's parts (:class:`LossTerm`), for :func:`granger_window`."""

    L_s: float
    penalty: float
    residual: float
    g: list[np.ndarray]
    g_tilde: list[np.ndarray]
    grad_A: np.ndarray
    grad_B: np.ndarray
    terms: list[LossTerm] = field(default_factory=list)


def server_window(A_diag: Sequence[np.ndarray], B_diag: Sequence[np.ndarray],
                  par: ServerParams, msgs: Sequence[Sequence[np.ndarray]], xi: float,
                  difference: bool = False) -> ServerWindow:
    """FedCF server model (eqs 11-16) on one window; ``msgs[m]`` from :func:`client_states`.

    ``h_s = A_mm hc + sum_n A_mn hc_n + B_mm u + sum_n B_mn u_n``, ``r_s = h_s - target``,
    ``D_m = A_mm (ha - hc) - sum_n A_mn hc_n``, ``L_s = mean_t sum_m ||r_s||^2 + xi ||D_m||^2``;
    with ``difference`` the means are over ``||Delta r_s||^2 + xi ||Delta D_m||^2``
    (:func:`time_difference`; not in the paper), which ``phi_m`` does not enter.
    """
    P = [a.shape[0] for a in A_diag]
    U = [b.shape[1] for b in B_diag]
    pa = offsets(P)
    HC = np.hstack([m[2] for m in msgs])
    UU = np.hstack([m[3] for m in msgs])
    X = HC @ par.A_hat.T  # x_m for all m (the diagonal blocks of A_hat are zero)
    Bu = UU @ par.B_hat.T
    R, Dm = [], []
    for m, (target, ha, hc, u) in enumerate(msgs):
        sl = slice(pa[m], pa[m + 1])
        R.append(hc @ A_diag[m].T + X[:, sl] + u @ B_diag[m].T + Bu[:, sl] - target)
        Dm.append((ha - hc) @ A_diag[m].T - X[:, sl])
    (Re, GR, n), (De, GD, _) = (differenced(np.hstack(Z), difference) for Z in (R, Dm))
    res, pen = float(np.sum(Re * Re)) / n, float(np.sum(De * De)) / n
    g = [(-2.0 / n) * GR[:, pa[m]:pa[m + 1]] for m in range(len(P))]
    gt = [(2.0 * xi / n) * GD[:, pa[m]:pa[m + 1]] @ A_diag[m] for m in range(len(P))]
    grad_A = (2.0 / n) * (GR - xi * GD).T @ HC
    grad_B = (2.0 / n) * GR.T @ UU
    grad_A, grad_B = off_diagonal(grad_A, grad_B, P, U)
    X = differenced(np.hstack([HC, UU]), difference)[0]
    X_pen = np.hstack([X[:, :pa[-1]], np.zeros_like(X[:, pa[-1]:])])  # B_hat is not in D_m
    terms = [LossTerm(1.0, 1.0, Re, X), LossTerm(xi, -1.0, De, X_pen)]
    return ServerWindow(res + xi * pen, pen, res, g, gt, grad_A, grad_B, terms)


def fedgc_server_window(A_diag: Sequence[np.ndarray], A_hat: np.ndarray,
                        msgs: Sequence[Sequence[np.ndarray]], target: str = "predicted",
                        difference: bool = False) -> ServerWindow:
    """FedGC server (eqs 15, 16, 22) on one window; ``msgs[m]`` from :func:`fedgc_states`.

    ``target="predicted"`` (the paper): ``msgs[m] = [hhat_a^{t-1}, hhat_c^{t-1}]``,
    ``D_m = A_mm (ha - hc) - sum_n A_mn hc_n``, ``L_s = mean_t sum_m ||D_m||^2``,
    ``g_m = 2 A_mm^T D_m`` (w.r.t. ``hhat_a^{t-1}``), ``grad A_mn = -2 D_m hc_n^T``.

    ``target="innovation"`` (not in the paper; FedCF's innovation target with ``B = 0``,
    ``phi = 0``, ``xi = 0``): ``msgs[m] = [C_mm^+ y_m^t, hhat_c^{t-1}]``,
    ``D_m = C^+ y^t - A_mm hc - sum_n A_mn hc_n``: what client m's own model leaves of its
    measured state, regressed on the others' states (eq 15 with the measured instead of the
    augmented state). It depends on no ``theta``, so ``g_m = 0`` and ``theta_m`` learns from
    its local loss alone (eq 20). Eq 15's target ``A_mm theta_m y^{t-1}`` is client m's
    prediction of that drive from its own past, whose only cross-client content is the
    persistent part; differenced, that part is gone (see :func:`time_difference`).

    ``difference``: ``L_s = mean_t sum_m ||Delta D_m||^2`` (:func:`time_difference`).
    """
    P = [a.shape[0] for a in A_diag]
    pa = offsets(P)
    HC = np.hstack([m[1] for m in msgs])
    X = HC @ A_hat.T
    if target == "innovation":
        D = np.hstack([z - hc @ A_diag[m].T - X[:, pa[m]:pa[m + 1]]
                       for m, (z, hc) in enumerate(msgs)])
    else:
        D = np.hstack([(ha - hc) @ A_diag[m].T - X[:, pa[m]:pa[m + 1]]
                       for m, (ha, hc) in enumerate(msgs)])
    De, GD, n = differenced(D, difference)
    g = [(2.0 / n) * GD[:, pa[m]:pa[m + 1]] @ A_diag[m] for m in range(len(P))]
    if target == "innovation":
        g = [np.zeros_like(x) for x in g]
    grad_A = off_diagonal((-2.0 / n) * GD.T @ HC, np.zeros((pa[-1], 0)), P, [0] * len(P))[0]
    L = float(np.sum(De * De)) / n
    terms = [LossTerm(1.0, -1.0, De, differenced(HC, difference)[0])]
    return ServerWindow(L, L, L, [np.zeros_like(x) for x in g], g, grad_A,
                        np.zeros((pa[-1], 0)), terms)


def server_step(par: ServerParams, win: ServerWindow, msgs: Sequence[Sequence[np.ndarray]],
                *, lr_server: float, lambda_g: float, xi: float, difference: bool,
                hc_index: int = 2, u_index: int = 3, noise_ridge: float = 0.0) -> ServerParams:
    """``A_hat -= lr / L_A (grad + 2 (lambda_g + noise_ridge) A_hat)``; likewise ``B_hat``
    without ``noise_ridge`` (eqs 3, 14-15).

    ``L_A``, ``L_B``: running maxima of the windows' curvature bounds, plus the ridge (on the
    differenced states and inputs with ``difference``). Known-zero entries (``par.masks``):
    their gradient is 0 and the new iterate holds them at exactly 0 (a projection, no
    penalty).
    """
    def curvature(Z: np.ndarray) -> float:
        if difference:
            Z = time_difference(Z)
        return np.linalg.norm(Z, 2) ** 2 / max(Z.shape[0], 1) if Z.size else 0.0

    HC = np.hstack([m[hc_index] for m in msgs])
    if par.masks is not None:  # the known-zero entries get no gradient
        win = replace(win, grad_A=np.where(par.zero_A, 0.0, win.grad_A),
                      grad_B=np.where(par.zero_B, 0.0, win.grad_B))
    cA = max(par.curv_A, 2.0 * max(1.0 + xi, 1.0) * curvature(HC))
    A = par.A_hat - (lr_server / (cA + 2 * lambda_g + 1e-12)) * (
        win.grad_A + 2 * (lambda_g + noise_ridge) * par.A_hat)
    B, cB = par.B_hat, par.curv_B
    if B.size:
        UU = np.hstack([m[u_index] for m in msgs])
        cB = max(cB, 2.0 * curvature(UU))
        B = B - (lr_server / (cB + 2 * lambda_g + 1e-12)) * (win.grad_B + 2 * lambda_g * B)
    return with_known_zero(ServerParams(A, B, cA, cB), par.masks)


# ---- standard errors and the Granger test ----------------------------------------------------
def hac_lags(n: int) -> int:
    """Newey-West lag truncation ``floor(4 (n / 100)^(2/9))`` for ``n`` score rows (0 for
    ``n <= 1``): Newey & West (1994), Review of Economic Studies 61(4), section 3."""
    return int(np.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 1 else 0


@dataclass
class GrangerStats:
    """The sandwich's two sides summed over windows: ``hessian`` ``H = sum_j w_j X_j^T X_j``
    (K x K, K = states + inputs of all clients), ``meat[i]`` the HAC long-run covariance of
    row i's scores (rows x K x K), ``n`` score rows and the largest lag used."""

    hessian: np.ndarray
    meat: np.ndarray
    n: int
    lags: int

    def __add__(self, other: GrangerStats) -> GrangerStats:
        return GrangerStats(self.hessian + other.hessian, self.meat + other.meat,
                            self.n + other.n, max(self.lags, other.lags))


def scores(terms: Sequence[LossTerm]) -> np.ndarray:
    """``s[t, i] = sum_j w_j sign_j E_j[t, i] X_j[t]`` (n x rows x K): half the gradient of
    time step t's loss w.r.t. row i of ``[A_hat, B_hat]``."""
    return sum(t.weight * t.sign * t.E[:, :, None] * t.X[:, None, :] for t in terms)


def granger_window(terms: Sequence[LossTerm], lags: int = -1) -> GrangerStats:
    """One window's share of :class:`GrangerStats`: ``H`` and Newey-West's Bartlett-weighted
    ``sum_{|l| <= L} (1 - |l| / (L + 1)) sum_t s_t s_{t-l}^T`` per row (``L``:
    :func:`hac_lags` of the window's rows when ``lags`` is -1; lags do not cross windows)."""
    live = [t for t in terms if t.weight]
    H = sum(t.weight * t.X.T @ t.X for t in live)
    S = scores(live)
    n = S.shape[0]
    L = hac_lags(n) if lags < 0 else min(int(lags), max(n - 1, 0))
    meat = np.einsum("tia,tib->iab", S, S)
    for lag in range(1, L + 1):
        G = np.einsum("tia,tib->iab", S[lag:], S[:-lag])
        meat += (1.0 - lag / (L + 1.0)) * (G + G.transpose(0, 2, 1))
    return GrangerStats(H, meat, n, L)


@dataclass
class GrangerTest:
    """Per-entry standard errors and two-sided p-values of ``A_hat`` and ``B_hat`` for
    H0: entry = 0, full-size: on the diagonal blocks, known and not learned (``A_hat`` is 0
    there), the standard error is 0 and the p-value 1."""

    se_A: np.ndarray
    pvalue_A: np.ndarray
    se_B: np.ndarray
    pvalue_B: np.ndarray


def off_diagonal_columns(P: Sequence[int], U: Sequence[int], m: int) -> np.ndarray:
    """Columns of ``[A_hat, B_hat]`` that row block m learns: other clients' states, then
    other clients' inputs (offset by ``sum P``)."""
    pa, ua = offsets(P), offsets(U)
    a = [j for j in range(pa[-1]) if not pa[m] <= j < pa[m + 1]]
    b = [pa[-1] + j for j in range(ua[-1]) if not ua[m] <= j < ua[m + 1]]
    return np.array(a + b, dtype=int)


def granger_test(stats: GrangerStats, A_hat: np.ndarray, B_hat: np.ndarray,
                 P: Sequence[int], U: Sequence[int],
                 masks: tuple[np.ndarray, np.ndarray] | None = None) -> GrangerTest:
    """Sandwich standard errors and Wald t-tests of every learned entry.

    ``V_i = H_J^{-1} Omega_i,J H_J^{-1}`` for row i of client m's blocks, ``J`` the columns
    it learns (:func:`off_diagonal_columns`), ``H``, ``Omega_i`` from :class:`GrangerStats`;
    ``se = sqrt(diag V_i)``, ``p = 2 P(T_df > |entry / se|)``, ``df = n - |J|``. This is the
    M-estimator covariance of the server loss's minimiser (Newey-West HAC for the serially
    correlated scores: filter errors, differencing); ``A_hat`` after k full-batch normalized
    steps from 0 is that minimiser shrunk by ``I - (I - lr H / L)^k`` (eigenvalues in
    [0, 1]), whose covariance is no larger, so the test is conservative before convergence.
    Known-zero entries (``masks``) are not learned: ``J`` leaves them out (the restricted
    fit's covariance) and their standard error and p-value are NaN (fixed by the user).
    """
    pa, n_a = offsets(P), sum(P)
    se = np.zeros((n_a, n_a + sum(U)))
    df = np.ones((n_a, 1))
    Z = None if masks is None else np.hstack(masks)
    for m in range(len(P)):
        J = off_diagonal_columns(P, U, m)
        if Z is not None and P[m]:
            J = J[~Z[pa[m], J]]
        if not J.size:
            continue
        Hinv = np.linalg.pinv(stats.hessian[np.ix_(J, J)])
        df[pa[m]:pa[m + 1]] = max(stats.n - J.size, 1)
        for i in range(pa[m], pa[m + 1]):
            V = Hinv @ stats.meat[i][np.ix_(J, J)] @ Hinv
            se[i, J] = np.sqrt(np.clip(np.diag(V), 0.0, None))
    from scipy.stats import t as student_t  # the server's test: lazy (clients never load it)

    est = np.hstack([A_hat, B_hat])
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2.0 * student_t.sf(np.abs(est / se), df)
    p[~(se > 0)] = 1.0  # nothing learned there: A_hat (B_hat) is 0
    if Z is not None:
        se[Z], p[Z] = np.nan, np.nan
    return GrangerTest(se[:, :n_a], p[:, :n_a], se[:, n_a:], p[:, n_a:])


def last_epoch(k: int, total: int, T: int, W: int) -> bool:
    """Whether exchange k (1-based) of ``total`` recorded windows is among the last
    ``ceil((T - 1) / W)``: one pass over t = 1..T-1, whose windows the test uses."""
    return k > total - len(range(1, T, W))


# ---- protocol steps --------------------------------------------------------------------------
def fedgc_server_update(A_diag: Sequence[np.ndarray], spar: ServerParams,
                        msgs: Sequence[Sequence[np.ndarray]], *, target: str, difference: bool,
                        lr_server: float, lambda_g: float, noise_ridge: float = 0.0
                        ) -> tuple[ServerWindow, ServerParams]:
    """FedGC's server on one window: :func:`fedgc_server_window`, then the ``A_hat`` step
    (eq 3) with the penalty's curvature alone (FedGC has no ``xi``); ``noise_ridge``:
    :func:`dp_noise_ridge`."""
    win = fedgc_server_window(A_diag, spar.A_hat, msgs, target, difference)
    return win, server_step(spar, win, msgs, lr_server=lr_server, lambda_g=lambda_g, xi=0.0,
                            difference=difference, hc_index=1, noise_ridge=noise_ridge)


def fedcf_server_update(A_diag: Sequence[np.ndarray], B_diag: Sequence[np.ndarray],
                        spar: ServerParams, msgs: Sequence[Sequence[np.ndarray]], *, xi: float,
                        difference: bool, lr_server: float, lambda_g: float
                        ) -> tuple[ServerWindow, ServerParams]:
    """FedCF's server on one window: :func:`server_window`, then the ``A_hat, B_hat`` steps
    (eqs 14-15)."""
    win = server_window(A_diag, B_diag, spar, msgs, xi, difference)
    return win, server_step(spar, win, msgs, lr_server=lr_server, lambda_g=lambda_g, xi=xi,
                            difference=difference)


def fedgc_states(c: ClientData, par: ClientParams, ts: np.ndarray,
                 target: str = "predicted") -> list[np.ndarray]:
    """What FedGC's server model needs of client m: ``[hhat_a^{t-1}, hhat_c^{t-1}]`` (eq 15,
    ``target="predicted"``; the middle two of :func:`client_states`) or
    ``[C_mm^+ y^t, hhat_c^{t-1}]`` (``"innovation"``, see :func:`fedgc_server_window`).
    Either way two ``W x P`` state arrays (``C_mm`` and ``y`` stay with the client)."""
    if target == "innovation":
        return [c.y[ts] @ np.linalg.pinv(c.C).T, c.hc[ts - 1]]
    return [c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T, c.hc[ts - 1]]


def history_row(k: int, win: ServerWindow, local: Sequence[float]) -> dict[str, float]:
    """Per-exchange numbers: L_s, its parts and the clients' local losses."""
    row = {"round": k, "L_s": win.L_s, "penalty": win.penalty, "residual": win.residual}
    row.update({f"L_a_{m}": float(v) for m, v in enumerate(local)})
    return row


# ---- evaluation ------------------------------------------------------------------------------
def full_estimate(A_diag: Sequence[np.ndarray], A_hat: np.ndarray) -> np.ndarray:
    """Known diagonal blocks plus learned off-diagonal blocks."""
    return A_hat + slin.block_diag(*A_diag)


def block_error(est: np.ndarray, truth: np.ndarray, rows: Sequence[int], cols: Sequence[int],
                m: int, n: int) -> float:
    """``||est_mn - truth_mn||_F``."""
    r, c = offsets(rows), offsets(cols)
    sl = (slice(r[m], r[m + 1]), slice(c[n], c[n + 1]))
    return float(np.linalg.norm(est[sl] - truth[sl]))


def counterfactual(C_mm: np.ndarray, B_hat_mn: np.ndarray, delta_u: np.ndarray) -> np.ndarray:
    """Change of ``E[y_m]`` when client n's input changes by ``delta_u``: ``C_mm B_mn du``."""
    return C_mm @ (B_hat_mn @ delta_u)


def counterfactual_error(C_mm: np.ndarray, B_hat_mn: np.ndarray, B_mn: np.ndarray) -> float:
    """``||C_mm (B_hat_mn - B_mn)||_F / ||C_mm B_mn||_F`` (FedCF's counterfactual error)."""
    return float(np.linalg.norm(C_mm @ (B_hat_mn - B_mn)) / np.linalg.norm(C_mm @ B_mn))


def prediction_loss(c: ClientData, states: np.ndarray, ts: np.ndarray) -> float:
    """Mean ``||y^t - C A states^{t-1}||^2`` of a posterior state sequence (plain, aug, oracle)."""
    r = c.y[ts] - states[ts - 1] @ (c.C @ c.A).T
    return float(np.mean(np.sum(r * r, axis=1)))


def augmented_states(c: ClientData, par: ClientParams) -> np.ndarray:
    """``hhat_a^t = hhat_c^t + theta y^t`` for all t."""
    return c.hc + c.y @ par.theta.T


def iterate_windows(T: int, W: int, epochs: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(exchange number, ts)`` pairs of a run."""
    yield from enumerate(windows(T, W, epochs), start=1)
