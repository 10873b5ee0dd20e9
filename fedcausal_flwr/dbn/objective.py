"""The score DYNOTEARS, FDBNL and PFDBNL minimise, on second moments, and its solvers.

Notation of :mod:`fedcausal_flwr.dbn.model` (which re-exports these names): the clients'
sufficient statistics (:class:`Moments`, :func:`moments`), the loss l(W, A), the acyclicity
h(W) = tr(exp(W o W)) - d, the penalised objective F on split variables
(:func:`penalized_objective`: the one objective of the FDBNL server step (3), the PFDBNL
local step (10) and DYNOTEARS), its L-BFGS-B solvers (the screened W-part of (3) among them),
and centralized DYNOTEARS (Pamfil et al. 2020) with the FDBNL paper's Ave baseline.

Pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as slin

if TYPE_CHECKING:  # the solvers import scipy.optimize when they run: an FDBNL client (moments,
    import scipy.optimize as sopt  # closed-form steps) never loads it


class Moments(tuple):
    """(S, M, N) = (Xt'Xt, Xt'Xlag, Xlag'Xlag) / n_k, a 3-tuple (any (S, M, N) tuple serves
    where this is asked for), with ``factor`` Z = [Xt, Xlag] / sqrt(n_k) when the rows are
    complete and fewer than the columns: then [[S, M], [M', N]] = Z'Z has rank <= n_k and the
    local step (2) solves by Woodbury's identity (:func:`admm_local_step`)."""

    factor: np.ndarray | None

    def __new__(cls, S: np.ndarray, M: np.ndarray, N: np.ndarray,
                factor: np.ndarray | None = None) -> Moments:
        self = super().__new__(cls, (S, M, N))
        self.factor = factor
        return self

    def __reduce__(self):  # noqa: D105 - keep the factor through pickling
        return (Moments, (*self, self.factor))


_last: tuple[np.ndarray, np.ndarray] | None = None  # (W, exp(W o W)) of the latest call


def _expm(M: np.ndarray) -> np.ndarray:
    """exp(M) by scipy (Pade with scaling and squaring)."""
    return slin.expm(M)


def _exp_sq(W: np.ndarray) -> np.ndarray:
    """exp(W o W), the one matrix exponential of h (read-only: shared with the next call).

    The latest one is kept: the FDBNL server step asks again at its minimizer (h of the new
    state) and, when the screened support holds, the next round's curvature at that same W.
    """
    global _last
    last = _last
    if last is not None and last[0].shape == W.shape and np.array_equal(last[0], W):
        return last[1]
    E = _expm(W * W)
    E.setflags(write=False)
    _last = (W.copy(), E)
    return E


def _h_and_grad(W: np.ndarray) -> tuple[float, np.ndarray]:
    """h(W) and its gradient from one matrix exponential."""
    E = _exp_sq(W)
    return float(np.trace(E) - W.shape[0]), E.T * W * 2.0


def acyclicity(W: np.ndarray) -> float:
    """h(W) = tr(exp(W o W)) - d."""
    return _h_and_grad(W)[0]


def acyclicity_grad(W: np.ndarray) -> np.ndarray:
    """Gradient of h: exp(W o W)^T o 2W."""
    return _h_and_grad(W)[1]


def moments(Xt: np.ndarray, Xlag: np.ndarray) -> Moments:
    """Second moments (S, M, N) = (Xt'Xt, Xt'Xlag, Xlag'Xlag) / n_k.

    With missing values (NaN) each entry is the mean over the rows where both of its
    columns are observed (pairwise-complete), and the joint matrix [[S, M], [M', N]] is then
    made positive semidefinite by clipping its negative eigenvalues at 0 (:func:`psd`): an
    entry whose columns are never observed together is 0 before the repair.
    """
    Xt, Xlag = np.asarray(Xt, dtype=float), np.asarray(Xlag, dtype=float)
    if Xt.ndim != 2 or Xlag.ndim != 2:
        raise ValueError(f"Xt and Xlag must be 2-D, got shapes {Xt.shape} and {Xlag.shape}")
    n, d = Xt.shape
    if n == 0 or d == 0:
        raise ValueError(f"Xt must be non-empty n x d, got shape {Xt.shape}")
    if Xlag.shape[0] != n:
        raise ValueError(f"Xt has {n} rows but Xlag has {Xlag.shape[0]}")
    if Xlag.shape[1] == 0 or Xlag.shape[1] % d:
        raise ValueError(f"Xlag must be n x pd with p >= 1 and d = {d}, got shape {Xlag.shape}")
    if not (np.isnan(Xt).any() or np.isnan(Xlag).any()):
        Z = np.hstack([Xt, Xlag]) / np.sqrt(n) if n < d + Xlag.shape[1] else None
        return Moments(Xt.T @ Xt / n, Xt.T @ Xlag / n, Xlag.T @ Xlag / n, Z)
    Z = np.hstack([Xt, Xlag])
    seen = np.isfinite(Z).astype(float)
    Z = np.where(seen > 0, Z, 0.0)
    C = psd(Z.T @ Z / np.maximum(seen.T @ seen, 1.0))
    return Moments(C[:d, :d], C[:d, d:], C[d:, d:])


def psd(C: np.ndarray) -> np.ndarray:
    """The symmetric matrix ``C`` with its negative eigenvalues set to 0."""
    w, V = np.linalg.eigh(0.5 * (C + C.T))
    return (V * np.maximum(w, 0.0)) @ V.T


def _loss_and_grad(W: np.ndarray, A: np.ndarray, mom: Moments
                   ) -> tuple[float, np.ndarray, np.ndarray]:
    """l(W, A) and its gradients -S(I - W) + MA and NA - M'(I - W), from the moments."""
    S, M, N = mom
    E = np.eye(W.shape[0]) - W
    SE, MA, NA = S @ E, M @ A, N @ A
    loss = 0.5 * (np.sum(E * SE) - 2.0 * np.sum(E * MA) + np.sum(A * NA))
    return float(loss), MA - SE, NA - M.T @ E


def squared_loss(W: np.ndarray, A: np.ndarray, mom: Moments) -> float:
    """l(W, A) = 1/(2 n) ||Xt - Xt W - Xlag A||_F^2 computed from the moments."""
    return _loss_and_grad(W, A, mom)[0]


def penalized_objective(x: np.ndarray, d: int, alpha: float, rho: float, lambda_w: float,
                        lambda_a: float, mom: Moments | None = None,
                        V_W: np.ndarray | None = None, V_A: np.ndarray | None = None,
                        weight: float | np.ndarray = 0.0, lam: np.ndarray | None = None
                        ) -> tuple[float, np.ndarray]:
    """F and dF/dx on split variables x = [W+, W-, A_1+, A_1-, ..., A_p+, A_p-].

    F = l(W, A) [if mom] + weight/2 (||W - V_W||^2 + ||A - V_A||^2) [if V_W, V_A]
        + alpha h(W) + rho/2 h(W)^2 + lambda_w |W|_1 + lambda_a |A|_1,
    the one objective of the FDBNL server step (3), the PFDBNL local step (10) and DYNOTEARS.
    With no lag blocks in x (p = 0, ``V_A`` of shape (0, d)) it is the W-part of (3) that
    :func:`admm_global_step` minimizes once A is known in closed form. ``lam`` ((p + 1) x d^2,
    block by block) replaces the two lambdas entry by entry and an array ``weight`` of that
    shape weights each entry of the quadratic term (prior knowledge, sites that inform only
    some entries: :class:`Constraints`).
    """
    dd = d * d
    blocks = x.reshape(-1, 2, dd)
    diff = blocks[:, 0] - blocks[:, 1]
    W, A = diff[0].reshape(d, d), diff[1:].reshape(-1, d)
    G = np.zeros_like(diff)  # gradient wrt (W, A_1, ..., A_p), each block flattened
    gW, gA = G[0].reshape(d, d), G[1:].reshape(-1, d)  # views into G
    f = 0.0
    if mom is not None:
        f, lW, lA = _loss_and_grad(W, A, mom)
        gW += lW
        gA += lA
    if V_W is not None and np.ndim(weight):
        R = diff - np.concatenate([np.ravel(V_W), np.ravel(V_A)]).reshape(diff.shape)
        wR = weight * R
        f += 0.5 * np.vdot(R, wR)
        G += wR
    elif V_W is not None:
        RW, RA = W - V_W, A - V_A
        f += 0.5 * weight * (np.vdot(RW, RW) + np.vdot(RA, RA))
        gW += weight * RW
        gA += weight * RA
    h, gh = _h_and_grad(W)
    gW += (alpha + rho * h) * gh
    if lam is None:
        f += (alpha * h + 0.5 * rho * h * h + lambda_w * blocks[0].sum()
              + lambda_a * blocks[1:].sum())
        lam = np.full((G.shape[0], 1), float(lambda_a))
        lam[0] = lambda_w
    else:
        f += alpha * h + 0.5 * rho * h * h + float(np.vdot(lam, blocks[:, 0] + blocks[:, 1]))
    out = np.empty_like(blocks)
    np.add(lam, G, out=out[:, 0])
    np.subtract(lam, G, out=out[:, 1])
    return float(f), out.ravel()


def split_to_dense(x: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(W, A) from split variables [W+, W-, A_1+, A_1-, ...], each block d x d row-major."""
    blocks = x.reshape(-1, 2, d, d)
    diff = blocks[:, 0] - blocks[:, 1]
    return diff[0], diff[1:].reshape(-1, d)


@functools.lru_cache(maxsize=32)
def _split_bounds(d: int, p: int) -> sopt.Bounds:
    """x >= 0, with the diagonal of W+ and W- pinned to 0 (no self-loops in W).

    As arrays, built once per (d, p): scipy converts a list of pairs on every call.
    """
    import scipy.optimize as sopt

    upper = np.full((2 * (p + 1), d, d), np.inf)
    upper[:2, np.arange(d), np.arange(d)] = 0.0
    upper.flags.writeable = False
    return sopt.Bounds(np.zeros(upper.size), upper.ravel())


def _fixed_bounds(d: int, p: int, fixed: np.ndarray) -> sopt.Bounds:
    """:func:`_split_bounds` with both halves of every ``fixed`` entry ((p + 1) x d x d,
    block by block) pinned to 0."""
    import scipy.optimize as sopt

    upper = np.where(np.reshape(fixed, (p + 1, 1, d, d)), 0.0,
                     _split_bounds(d, p).ub.reshape(p + 1, 2, d, d))
    return sopt.Bounds(np.zeros(upper.size), upper.ravel())


def _lbfgs(d: int, p: int, restarts: int, alpha: float, rho: float, lambda_w: float,
           lambda_a: float, x0: np.ndarray | None = None, mom: Moments | None = None,
           V_W: np.ndarray | None = None, V_A: np.ndarray | None = None,
           weight: float | np.ndarray = 0.0, lam: np.ndarray | None = None,
           fixed: np.ndarray | None = None, ftol: float | None = None, maxiter: int = 0
           ) -> np.ndarray:
    """Minimize :func:`penalized_objective` by ``restarts`` warm-started L-BFGS-B calls
    (``fixed``: entries held at exactly 0 by the bounds; ``ftol``: L-BFGS-B's relative
    decrease test, None for scipy's default 2.2e-9; ``maxiter`` > 0: at most that many
    iterations per call)."""
    import scipy.optimize as sopt

    x = np.zeros(2 * (p + 1) * d * d) if x0 is None else x0
    args = (d, alpha, rho, lambda_w, lambda_a, mom, V_W, V_A, weight, lam)
    bounds = _split_bounds(d, p) if fixed is None else _fixed_bounds(d, p, fixed)
    x = np.clip(x, bounds.lb, bounds.ub) if fixed is not None else x
    options = {k: v for k, v in (("ftol", ftol), ("maxiter", maxiter)) if v} or None
    for _ in range(max(1, restarts)):
        x = sopt.minimize(penalized_objective, x, args=args, method="L-BFGS-B", jac=True,
                          bounds=bounds, options=options).x
    return x


def screen(V_W: np.ndarray, weight: float | np.ndarray, lam: float | np.ndarray,
           fixed: np.ndarray | None = None) -> np.ndarray:
    """The entries of W that can be nonzero at a stationary point of the W-part of (3):
    weight |V_W| > lambda, off the diagonal and not ``fixed``.

    dh/dW_ij = 2 W_ij exp(W o W)_ji vanishes at W_ij = 0 and has the sign of W_ij elsewhere, so
    stationarity with W_ij != 0 needs weight (V_ij - W_ij) - lambda sign(W_ij) to have the sign
    of W_ij: |weight V_ij| > lambda, and then sign(W_ij) = sign(V_ij).
    """
    S = np.abs(weight * V_W) > lam
    np.fill_diagonal(S, False)
    return S if fixed is None else S & ~np.asarray(fixed, bool).reshape(S.shape)


def screened_objective(u: np.ndarray, S: np.ndarray, sign: np.ndarray, V_W: np.ndarray,
                       weight: float | np.ndarray, lam: float | np.ndarray, alpha: float,
                       rho: float, rest: float) -> tuple[float, np.ndarray]:
    """The W-part of (3), F = weight/2 ||W - V_W||^2 + alpha h(W) + rho/2 h(W)^2 + lambda |W|_1,
    and dF/du at W = sign o u on the entries ``S`` (0 elsewhere), u >= 0 (so |W|_1 = sum u).

    ``weight`` and ``lam`` are scalars or the values on ``S``; ``rest`` = weight/2 ||V_W||^2
    off ``S`` (a constant: F is the full objective's value, so L-BFGS-B's relative test is
    unchanged).
    """
    W = np.zeros(V_W.shape)
    W[S] = sign * u
    R = W[S] - V_W[S]
    h, gh = _h_and_grad(W)
    f = rest + 0.5 * float(np.sum(weight * R * R)) + alpha * h + 0.5 * rho * h * h
    f += float(np.sum(lam * u))
    return f, sign * (weight * R + (alpha + rho * h) * gh[S]) + lam


def curvature(W: np.ndarray, S: np.ndarray, weight: float | np.ndarray, alpha: float,
              rho: float) -> np.ndarray:
    """An estimate of the diagonal of the Hessian of the W-part of (3) on the entries ``S``
    at W: weight + 2 (alpha + rho h) exp(W o W)_ji + rho (dh/dW_ij)^2 (of h's own second
    derivative only the part without the derivative of the exponential)."""
    E = _exp_sq(W)
    h = float(np.trace(E) - W.shape[0])
    gh = (E.T * W * 2.0)[S]
    return weight + 2.0 * (alpha + rho * h) * E.T[S] + rho * gh * gh


def _screened_w_step(V_W: np.ndarray, weight: float | np.ndarray, alpha: float, rho: float,
                     lam: float | np.ndarray, restarts: int, init: np.ndarray | None,
                     fixed: np.ndarray | None = None) -> np.ndarray:
    """W minimizing the W-part of (3) by L-BFGS-B on |W| over the entries of :func:`screen`
    (signs those of V_W), from |init| there or from 0; every other entry is 0.

    Each call runs in the variables z = sqrt(c) |W_S| with c the :func:`curvature` at its
    start point: the minimizer is the same, and the stiff late rounds (rho1 up to 1e16),
    where the entries on cycles are far more curved than the others, take a few iterations
    instead of hundreds.
    """
    import scipy.optimize as sopt

    S = screen(V_W, weight, lam, fixed)
    sign = np.sign(V_W[S])
    w = weight[S] if np.ndim(weight) else float(weight)
    lam_S = lam[S] if np.ndim(lam) else float(lam)
    rest = 0.5 * float(np.sum((weight * V_W * V_W)[~S]))
    u = np.zeros(sign.size) if init is None else np.maximum(sign * init[S], 0.0)
    W = np.zeros(V_W.shape)
    bounds = sopt.Bounds(np.zeros(u.size), np.full(u.size, np.inf))

    def scaled(z: np.ndarray, scale: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = screened_objective(z * scale, S, sign, V_W, w, lam_S, alpha, rho, rest)
        return f, g * scale

    for _ in range(max(1, restarts)):
        if not u.size:
            break
        W[S] = sign * u
        scale = 1.0 / np.sqrt(curvature(W, S, w, alpha, rho))
        u = scale * sopt.minimize(scaled, u / scale, args=(scale,), method="L-BFGS-B",
                                  jac=True, bounds=bounds).x
    W[S] = sign * u
    return W


def split_from_dense(W: np.ndarray, A: np.ndarray | None = None) -> np.ndarray:
    """Split variables [W+, W-, A_1+, A_1-, ...] of (W, A): X+ = max(X, 0), X- = max(-X, 0);
    the inverse of :func:`split_to_dense` (the diagonal of W is zeroed, as the bounds pin it)."""
    d = W.shape[0]
    W = np.array(W, dtype=float)
    np.fill_diagonal(W, 0.0)
    blocks = [W] if A is None else [W, *np.asarray(A, dtype=float).reshape(-1, d, d)]
    return np.concatenate([np.stack([np.maximum(B, 0.0), np.maximum(-B, 0.0)]).ravel()
                           for B in blocks])


def dynotears(mom: Moments, lambda_w: float, lambda_a: float, max_iter: int = 100,
              h_tol: float = 1e-8, rho_max: float = 1e16) -> tuple[np.ndarray, np.ndarray]:
    """Centralized DYNOTEARS (Pamfil et al. 2020) by augmented Lagrangian; unthresholded (W, A)."""
    d = mom[0].shape[0]
    p = mom[2].shape[0] // d
    x, rho, alpha, h = np.zeros(2 * (p + 1) * d * d), 1.0, 0.0, np.inf
    x_new, h_new = x, h
    for _ in range(max_iter):
        while rho < rho_max:
            x_new = _lbfgs(d, p, 1, alpha, rho, lambda_w, lambda_a, x0=x, mom=mom)
            h_new = acyclicity(split_to_dense(x_new, d)[0])
            if h_new > 0.25 * h:
                rho *= 10.0
            else:
                break
        x, h = x_new, h_new
        alpha += rho * h
        if h <= h_tol or rho >= rho_max:
            break
    return split_to_dense(x, d)


def ave_baseline(clients: Sequence[Moments], lambda_w: float, lambda_a: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's Ave baseline: per-client DYNOTEARS, weights averaged (unthresholded)."""
    fits = [dynotears(mom, lambda_w, lambda_a) for mom in clients]
    return (np.mean([W for W, _ in fits], axis=0), np.mean([A for _, A in fits], axis=0))
