"""Dynamic Bayesian network structure learning: DYNOTEARS, FDBNL and PFDBNL.

Notation follows the FDBNL paper (Chen, Ma, Yue 2025). ``W`` (d x d) is the intra-slice
graph, ``A`` (pd x d) stacks the lag matrices ``A_1 .. A_p``; ``W[i, j] != 0`` means i -> j.
Client k holds ``Xt`` (n_k x d) and ``Xlag`` (n_k x pd) and only ever shares matrices.

Here: the ADMM steps of FDBNL (2)-(4) and PFDBNL (10)-(11), the server rounds, the client
payloads and the in-process reference loops. The settings are in
:mod:`fedcausal_flwr.dbn.settings`, the moments, the score (loss, acyclicity h, penalised
objective), its L-BFGS-B solvers and centralized DYNOTEARS in
:mod:`fedcausal_flwr.dbn.objective`; this module re-exports both.

Everything here is pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as slin

from fedcausal_flwr.dbn.objective import (  # noqa: F401 - re-exported: dbn.model's names
    Moments,
    _lbfgs,
    _screened_w_step,
    acyclicity,
    acyclicity_grad,
    ave_baseline,
    curvature,
    dynotears,
    moments,
    penalized_objective,
    psd,
    screen,
    screened_objective,
    split_from_dense,
    split_to_dense,
    squared_loss,
)
from fedcausal_flwr.dbn.settings import (  # noqa: F401 - re-exported: dbn.model's names
    LOCAL_STARTS,
    FDBNLSettings,
    PFDBNLSettings,
)
from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.settings import VARIABLE_SETS  # noqa: F401 - re-exported

#: A robust centre of per-client arrays (NaN: not informed), in place of their mean.
Combine = Callable[[list[np.ndarray]], np.ndarray]


@dataclass
class ServerState:
    """Server-side ADMM state; duals are keyed by client id (partition id)."""

    W: np.ndarray
    A: np.ndarray
    alpha: float = 0.0
    rho1: float = 1.0
    rho2: float = 1.0
    round: int = 0
    beta: dict[int, np.ndarray] = field(default_factory=dict)
    gamma: dict[int, np.ndarray] = field(default_factory=dict)
    # PFDBNL only: the client copies W~_k, A~_k and personalized W_k, A_k
    W_tilde: dict[int, np.ndarray] = field(default_factory=dict)
    A_tilde: dict[int, np.ndarray] = field(default_factory=dict)
    W_local: dict[int, np.ndarray] = field(default_factory=dict)
    A_local: dict[int, np.ndarray] = field(default_factory=dict)
    h: float = float("inf")
    residual: float = float("inf")


def admm_local_step(mom: Moments, W: np.ndarray, A: np.ndarray, beta: np.ndarray,
                    gamma: np.ndarray, rho2: float) -> tuple[np.ndarray, np.ndarray]:
    """FDBNL local step (2): closed-form (B_k, D_k), the solution of
    ([[S, M], [M', N]] + rho2 I) [B; D] = [S - beta + rho2 W; M' - gamma + rho2 A].

    With a low-rank ``mom.factor`` Z (n_k rows, [[S, M], [M', N]] = Z'Z) by Woodbury's
    identity, (Z'Z + rho2 I)^-1 R = (R - Z' (Z Z' + rho2 I)^-1 Z R) / rho2: an n_k x n_k
    solve instead of a (p + 1) d one.
    """
    S, M, N = mom
    d = S.shape[0]
    rhs = np.vstack([S - beta + rho2 * W, M.T - gamma + rho2 * A])
    Z = getattr(mom, "factor", None)
    if Z is not None:
        inner = Z @ Z.T + rho2 * np.eye(Z.shape[0])
        BD = (rhs - Z.T @ slin.solve(inner, Z @ rhs, assume_a="pos")) / rho2
    else:
        lhs = np.block([[S, M], [M.T, N]]) + rho2 * np.eye(d + N.shape[0])
        BD = slin.solve(lhs, rhs, assume_a="pos")
    return BD[:d], BD[d:]


def consensus_target(B: np.ndarray, beta: np.ndarray, rho2: float) -> np.ndarray:
    """B_k + beta_k / rho2: client k's term of the consensus (what the server averages)."""
    return B + beta / rho2


def consensus_targets(B: Sequence[np.ndarray], beta: Sequence[np.ndarray], rho2: float,
                      combine: Combine | None = None) -> np.ndarray:
    """V = mean_k(B_k + beta_k / rho2): the consensus terms equal K rho2/2 ||W - V||^2 + c.
    ``combine``: a robust centre of the K targets used instead of their mean (e.g. the
    coordinate-wise trimmed mean of ``federation.robust.robust_mean``); None: the mean."""
    if len(B) == 0 or len(B) != len(beta):
        raise ValueError(f"need as many duals as locals (> 0), got {len(B)} and {len(beta)}")
    if combine is not None:
        return combine([consensus_target(Bk, bk, rho2) for Bk, bk in zip(B, beta, strict=True)])
    V = np.zeros_like(B[0], dtype=float)
    for Bk, bk in zip(B, beta, strict=True):
        V = V + consensus_target(Bk, bk, rho2)
    return V / len(B)


def admm_global_step(V_W: np.ndarray, V_A: np.ndarray, weight: float, alpha: float,
                     rho1: float, lambda_w: float, lambda_a: float, restarts: int = 1,
                     init: tuple[np.ndarray, np.ndarray] | None = None,
                     a_step: str = "closed-form", screened: bool = True
                     ) -> tuple[np.ndarray, np.ndarray]:
    """FDBNL server step (3) in the form weight/2 (||W - V_W||^2 + ||A - V_A||^2)
    + alpha h(W) + rho1/2 h(W)^2 + lambda_w |W|_1 + lambda_a |A|_1 (Eq. 3 with the consensus
    identity of :func:`consensus_targets`, weight = K rho2).

    ``a_step="closed-form"``: A does not enter h, so the objective separates and
    A = soft_threshold(V_A, lambda_a / weight) exactly; W alone is found by L-BFGS-B on its
    2 d^2 split variables, or (``screened``) on |W| over the entries :func:`screen` finds, the
    only ones a stationary point can hold, with their signs fixed (exact; the variables drop
    from 2 d^2 to about the number of entries that survive the consensus' soft threshold).
    ``"lbfgs"``: W and A together on 2 (p + 1) d^2 split variables (the official code's
    solver; same minimizer to solver tolerance). L-BFGS-B starts from ``init`` = (W, A) (the
    previous round's estimate) or from zero, and is called ``restarts`` times in a row, each
    call from the last one's end. The diagonal of W is held at 0.
    """
    d = V_W.shape[0]
    p = V_A.shape[0] // d
    if isinstance(weight, tuple):
        return _entrywise_global_step(V_W, V_A, weight, alpha, rho1, lambda_w, lambda_a,
                                      restarts, init, a_step, screened)
    if a_step == "lbfgs":
        x0 = None if init is None else split_from_dense(*init)
        x = _lbfgs(d, p, restarts, alpha, rho1, lambda_w, lambda_a, x0=x0, V_W=V_W, V_A=V_A,
                   weight=weight)
        return split_to_dense(x, d)
    if a_step != "closed-form":
        raise ValueError(f"a_step must be 'closed-form' or 'lbfgs', got {a_step!r}")
    A = soft_threshold(V_A, lambda_a / weight)
    if screened:
        return _screened_w_step(V_W, weight, alpha, rho1, lambda_w, restarts,
                                None if init is None else init[0]), A
    x0 = None if init is None else split_from_dense(init[0])
    x = _lbfgs(d, 0, restarts, alpha, rho1, lambda_w, 0.0, x0=x0, V_W=V_W,
               V_A=np.zeros((0, d)), weight=weight)
    return split_to_dense(x, d)[0], A


def _entrywise_global_step(V_W: np.ndarray, V_A: np.ndarray,
                           weight: tuple[np.ndarray, np.ndarray], alpha: float, rho1: float,
                           lambda_w: np.ndarray, lambda_a: np.ndarray, restarts: int,
                           init: tuple[np.ndarray, np.ndarray] | None, a_step: str,
                           screened: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`admm_global_step` with a weight and a lambda per entry (arrays shaped like W and
    A); an entry of weight 0 (no client informs it) or of infinite lambda (forbidden) is held
    at exactly 0 by the bounds."""
    d = V_W.shape[0]
    p = V_A.shape[0] // d
    (wW, wA), lW, lA = weight, np.asarray(lambda_w, float), np.asarray(lambda_a, float)
    fW, fA = (wW <= 0) | np.isinf(lW), (wA <= 0) | np.isinf(lA)
    lW, lA = np.where(fW, 0.0, lW), np.where(fA, 0.0, lA)
    if a_step == "lbfgs":
        x0 = None if init is None else split_from_dense(*init)
        x = _lbfgs(d, p, restarts, alpha, rho1, 0.0, 0.0, x0=x0, V_W=V_W, V_A=V_A,
                   weight=np.concatenate([wW.ravel(), wA.ravel()]).reshape(p + 1, d * d),
                   lam=np.concatenate([lW.ravel(), lA.ravel()]).reshape(p + 1, d * d),
                   fixed=np.concatenate([fW.ravel(), fA.ravel()]))
        return split_to_dense(x, d)
    if a_step != "closed-form":
        raise ValueError(f"a_step must be 'closed-form' or 'lbfgs', got {a_step!r}")
    A = np.where(fA, 0.0, soft_threshold(V_A, lA / np.where(fA, 1.0, wA)))
    if screened:
        return _screened_w_step(V_W, wW, alpha, rho1, lW, restarts,
                                None if init is None else init[0], fixed=fW), A
    x0 = None if init is None else split_from_dense(init[0])
    x = _lbfgs(d, 0, restarts, alpha, rho1, 0.0, 0.0, x0=x0, V_W=V_W, V_A=np.zeros((0, d)),
               weight=wW.reshape(1, d * d), lam=lW.reshape(1, d * d), fixed=fW)
    return split_to_dense(x, d)[0], A


def entry_penalties(n_W: np.ndarray, n_A: np.ndarray, lambda_w: float, lambda_a: float,
                    lambda_scale: str, knowledge: Masks | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The L1 weight of each entry of W and A in the server step (3): lambda times the number
    of clients that inform the entry (``"pooled"``) or lambda (``"paper"``); 0 on required
    entries, infinite (held at 0) on forbidden ones."""
    pooled = lambda_scale == "pooled"
    lW = lambda_w * (n_W if pooled else np.ones_like(n_W))
    lA = lambda_a * (n_A if pooled else np.ones_like(n_A))
    if knowledge is not None:
        lW = np.where(knowledge.require_W, 0.0, np.where(knowledge.forbid_W, np.inf, lW))
        lA = np.where(knowledge.require_A, 0.0, np.where(knowledge.forbid_A, np.inf, lA))
    return lW, lA


def masked_targets(B: Sequence[np.ndarray], beta: Sequence[np.ndarray],
                   informed: Sequence[np.ndarray], rho2: float, combine: Combine | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(V, n)``: V = the mean of B_k + beta_k / rho2 over the clients whose data inform each
    entry (``informed``: boolean masks), n their number (V = 0 where n = 0); ``combine``: as
    in :func:`consensus_targets` (it gets NaN where a client does not inform an entry)."""
    n = np.sum([m.astype(float) for m in informed], axis=0)
    if combine is not None:
        V = combine([np.where(m, consensus_target(Bk, bk, rho2), np.nan)
                     for Bk, bk, m in zip(B, beta, informed, strict=True)])
        return np.where(n > 0, V, 0.0), n
    V = np.zeros_like(np.asarray(B[0], dtype=float))
    for Bk, bk, m in zip(B, beta, informed, strict=True):
        V = V + np.where(m, consensus_target(Bk, bk, rho2), 0.0)
    return V / np.maximum(n, 1.0), n


def soft_threshold(V: np.ndarray, t: float) -> np.ndarray:
    """sign(V) max(|V| - t, 0): the minimizer of t |X|_1 + 1/2 ||X - V||^2."""
    return np.sign(V) * np.maximum(np.abs(V) - t, 0.0)


def dual_step(dual: np.ndarray, local: np.ndarray, consensus: np.ndarray, rho2: float
                ) -> np.ndarray:
    """beta + rho2 (B - W)."""
    return dual + rho2 * (local - consensus)


def pfdbnl_local_step(mom: Moments, W_anchor: np.ndarray, A_anchor: np.ndarray, mu: float,
                      alpha: float, rho1: float, lambda_w: float, lambda_a: float,
                      restarts: int = 1, knowledge: Masks | None = None,
                      init: tuple[np.ndarray, np.ndarray] | None = None,
                      ftol: float | None = None, maxiter: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """PFDBNL local step (10): personalized (W_k, A_k) by ``restarts`` chained L-BFGS-B calls
    (``knowledge``: forbidden entries held at 0, required ones without L1 penalty).
    L-BFGS-B starts from ``init`` = (W, A) or from zero; ``ftol``: its relative decrease
    test (None: scipy's default); ``maxiter`` > 0: at most that many iterations per call
    (an inexact step, as in inexact ADMM)."""
    d = W_anchor.shape[0]
    p = A_anchor.shape[0] // d
    lam = fixed = None
    if knowledge:
        fixed = np.concatenate([knowledge.forbid_W.ravel(), knowledge.forbid_A.ravel()])
        free = np.concatenate([knowledge.require_W.ravel(), knowledge.require_A.ravel()])
        lam = np.where(free, 0.0, np.repeat([lambda_w] + [lambda_a] * p, d * d)
                       ).reshape(p + 1, d * d)
    x = _lbfgs(d, p, restarts, alpha, rho1, lambda_w, lambda_a,
               x0=None if init is None else split_from_dense(*init), mom=mom, V_W=W_anchor,
               V_A=A_anchor, weight=2.0 * mu, lam=lam, fixed=fixed, ftol=ftol, maxiter=maxiter)
    return split_to_dense(x, d)


def pfdbnl_copy(local: np.ndarray, consensus: np.ndarray, dual: np.ndarray, mu: float,
                rho2: float, code_compat: bool = False) -> np.ndarray:
    """PFDBNL closed form (11): W~_k = (2 mu W_k + rho2 W - beta_k) / (2 mu + rho2)."""
    if code_compat:  # the official code's operator precedence
        return 2.0 * mu * local + rho2 * consensus - dual / (2.0 * mu + rho2)
    return (2.0 * mu * local + rho2 * consensus - dual) / (2.0 * mu + rho2)


def participants(ids: Sequence[int], per_round: int, rng: np.random.Generator) -> list[int]:
    """Clients of one round: all (per_round <= 0 or >= len) or a uniform sample, sorted."""
    ids = [int(i) for i in ids]
    if per_round <= 0 or per_round >= len(ids):
        return sorted(ids)
    return sorted(int(i) for i in rng.choice(np.asarray(ids), per_round, replace=False))


def _lambda_multiplier(K: int, lambda_scale: str) -> int:
    """K for lambda_scale "pooled", 1 for "paper"."""
    if lambda_scale not in ("paper", "pooled"):
        raise ValueError(f"lambda_scale must be 'paper' or 'pooled', got {lambda_scale!r}")
    return K if lambda_scale == "pooled" else 1


def _next_rho(rho: float, phi: float, rho_max: float) -> float:
    return min(rho * phi, rho_max)


def _zeros_like_duals(state: ServerState) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros_like(state.W), np.zeros_like(state.A)


def fdbnl_server_round(state: ServerState, local: Mapping[int, tuple[np.ndarray, np.ndarray]],
                       *, lambda_w: float, lambda_a: float, lambda_scale: str,
                       dual_update: str, server_restarts: int, server_warm_start: bool,
                       server_a_step: str, phi1: float, phi2: float, rho_max: float,
                       server_screen: bool = True,
                       knowledge: Masks | None = None,
                       informed: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
                       combine: Combine | None = None) -> ServerState:
    """One FDBNL server round from the accepted local replies {id: (B_k, D_k)}.

    Global step, dual updates for the ids in ``local`` only, alpha and rho updates; returns
    the new state (round + 1, h = h(W^(t+1))). Missing duals start at zero. The numbers are
    :class:`FDBNLSettings`' (:meth:`FDBNLSettings.fdbnl_round_args`). ``knowledge``: masks
    of forbidden entries (held at 0) and required ones (no L1 penalty). ``informed``: per
    client the masks of the entries its data inform (its observed variables; absent: all);
    the consensus of an entry averages the clients that inform it and weighs it by their
    number, its duals move only there, and an entry nobody informs stays 0. ``combine``: a
    robust centre of the consensus targets instead of their mean (:func:`consensus_targets`).
    """
    if dual_update not in ("paper", "code"):
        raise ValueError(f"dual_update must be 'paper' or 'code', got {dual_update!r}")
    ids = sorted(local)
    if not ids:
        raise ValueError("fdbnl_server_round needs at least one accepted client")
    K = len(ids)
    lam = _lambda_multiplier(K, lambda_scale)
    local = {k: (np.asarray(local[k][0], dtype=float), np.asarray(local[k][1], dtype=float))
             for k in ids}
    zW, zA = _zeros_like_duals(state)
    beta = {k: state.beta.get(k, zW) for k in ids}
    gamma = {k: state.gamma.get(k, zA) for k in ids}
    masked = knowledge is not None or informed is not None
    if masked:
        inf = _informed(ids, state, informed)
        V_W, n_W = masked_targets([local[k][0] for k in ids], [beta[k] for k in ids],
                                  [inf[k][0] for k in ids],
                              state.rho2, combine)
        V_A, n_A = masked_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                                  [inf[k][1] for k in ids],
                              state.rho2, combine)
        weight = (n_W * state.rho2, n_A * state.rho2)
        lW, lA = entry_penalties(n_W, n_A, lambda_w, lambda_a, lambda_scale, knowledge)
    else:
        V_W = consensus_targets([local[k][0] for k in ids], [beta[k] for k in ids],
                              state.rho2, combine)
        V_A = consensus_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                              state.rho2, combine)
        weight, lW, lA = K * state.rho2, lam * lambda_w, lam * lambda_a
    W, A = admm_global_step(V_W, V_A, weight, state.alpha, state.rho1, lW, lA,
                            server_restarts, (state.W, state.A) if server_warm_start else None,
                            server_a_step, server_screen)
    W_ref, A_ref = (W, A) if dual_update == "paper" else (state.W, state.A)
    new_beta, new_gamma = dict(state.beta), dict(state.gamma)
    for k in ids:
        new_beta[k] = dual_step(beta[k], local[k][0], W_ref, state.rho2)
        new_gamma[k] = dual_step(gamma[k], local[k][1], A_ref, state.rho2)
        if masked:  # duals move only where the client's data inform
            new_beta[k] = np.where(inf[k][0], new_beta[k], 0.0)
            new_gamma[k] = np.where(inf[k][1], new_gamma[k], 0.0)
    B = [np.where(inf[k][0], local[k][0] - W, 0.0) + W if masked else local[k][0]
         for k in ids]
    h = acyclicity(W)
    return ServerState(W=W, A=A, alpha=state.alpha + state.rho1 * h,
                       rho1=_next_rho(state.rho1, phi1, rho_max),
                       rho2=_next_rho(state.rho2, phi2, rho_max), round=state.round + 1,
                       beta=new_beta, gamma=new_gamma, W_tilde=dict(state.W_tilde),
                       A_tilde=dict(state.A_tilde), W_local=dict(state.W_local),
                       A_local=dict(state.A_local), h=h, residual=primal_residual(B, W))


def _informed(ids: Sequence[int], state: ServerState,
              informed: Mapping[int, tuple[np.ndarray, np.ndarray]] | None
              ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    everything = (np.ones(state.W.shape, bool), np.ones(state.A.shape, bool))
    return {k: (informed or {}).get(k, everything) for k in ids}


def fdbnl_client_payload(state: ServerState, cid: int) -> list[np.ndarray]:
    """What the server sends client ``cid``: [W, A, beta_k, gamma_k] (rho2 goes in config)."""
    zW, zA = _zeros_like_duals(state)
    return [state.W.copy(), state.A.copy(), state.beta.get(cid, zW).copy(),
            state.gamma.get(cid, zA).copy()]


def pfdbnl_client_payload(state: ServerState, cid: int) -> list[np.ndarray]:
    """What the server sends client ``cid``: [W, A, W~_k, A~_k, beta_k, gamma_k, W_k, A_k]
    (W_k, A_k: the personalized graph the client last sent, 0 before its first reply; the
    start of its next local step (10))."""
    zW, zA = _zeros_like_duals(state)
    return [state.W.copy(), state.A.copy(), state.W_tilde.get(cid, zW).copy(),
            state.A_tilde.get(cid, zA).copy(), state.beta.get(cid, zW).copy(),
            state.gamma.get(cid, zA).copy(), state.W_local.get(cid, zW).copy(),
            state.A_local.get(cid, zA).copy()]


def local_init(payload: Sequence[np.ndarray], local_start: str
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where client k's local step (10) starts: its last (W_k, A_k) (``"previous"``), its
    copies (W~_k, A~_k) (``"copies"``) or zero (``"zero"``: None)."""
    if local_start not in LOCAL_STARTS:
        raise ValueError(f"local_start must be one of {LOCAL_STARTS}, got {local_start!r}")
    if local_start == "zero":
        return None
    return (payload[6], payload[7]) if local_start == "previous" else (payload[2], payload[3])


def pfdbnl_client_step(mom: Moments, payload: Sequence[np.ndarray], alpha: float, rho1: float,
                       rho2: float, *, lambda_w: float, lambda_a: float, mu: float,
                       code_compat: bool, restarts: int, local_start: str,
                       local_maxiter: int, local_ftol: float, knowledge: Masks | None = None
                       ) -> list[np.ndarray]:
    """Client side of one PFDBNL round (``payload``: :func:`pfdbnl_client_payload`): returns
    [W~_k, A~_k, W_k, A_k, h(W_k) as 0-d array] (``knowledge``: see
    :func:`pfdbnl_local_step`; ``local_start``: see :func:`local_init`; ``local_maxiter`` > 0:
    L-BFGS-B iterations per call; ``local_ftol`` > 0: its relative decrease test)."""
    W, A, W_tilde, A_tilde, beta, gamma = payload[:6]
    if code_compat:  # zero prox anchor, one L-BFGS-B call
        W_anchor, A_anchor, restarts = np.zeros_like(W), np.zeros_like(A), 1
    else:
        W_anchor, A_anchor = W_tilde, A_tilde
    W_k, A_k = pfdbnl_local_step(mom, W_anchor, A_anchor, mu, alpha, rho1, lambda_w,
                                 lambda_a, restarts, knowledge,
                                 local_init(payload, local_start), local_ftol or None,
                                 local_maxiter)
    return [pfdbnl_copy(W_k, W, beta, mu, rho2, code_compat),
            pfdbnl_copy(A_k, A, gamma, mu, rho2, code_compat),
            W_k, A_k, np.array(acyclicity(W_k))]


def site_local_step(view: Any, mom: Moments, payload: Sequence[np.ndarray], rho2: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """FDBNL local step (2) of a site over the variables it observes (``view``: its
    :class:`~fedcausal_flwr.dbn.sites.SiteView`): ``payload`` = federation-shaped
    [W, A, beta_k, gamma_k]; returns federation-shaped (B_k, D_k), 0 where it sees nothing."""
    B, D = admm_local_step(view.moments(mom), *(view.down(x) for x in payload), rho2=rho2)
    return view.up(B, "W"), view.up(D, "A")


def site_personal_step(view: Any, mom: Moments, payload: Sequence[np.ndarray], alpha: float,
                       rho1: float, rho2: float, knowledge: Masks | None = None, **wire: Any
                       ) -> list[np.ndarray]:
    """:func:`pfdbnl_client_step` of a site over the variables it observes (``knowledge``:
    masks over the federation's variables); arrays in and out federation-shaped."""
    masks = None if knowledge is None else knowledge.subset(view.cols, view.p, view.D)
    out = pfdbnl_client_step(view.moments(mom), [view.down(x) for x in payload], alpha, rho1,
                             rho2, knowledge=masks, **wire)
    return [view.up(x, like) for x, like in zip(out[:4], "WAWA", strict=True)] + [out[4]]


def pfdbnl_server_round(state: ServerState, local: Mapping[int, Sequence[np.ndarray]], *,
                        phi1: float, phi2: float, rho_max: float, code_compat: bool,
                        knowledge: Masks | None = None,
                        informed: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
                        combine: Combine | None = None) -> ServerState:
    """One PFDBNL server round from accepted replies {id: pfdbnl_client_step output}
    (the numbers: :meth:`FDBNLSettings.pfdbnl_round_args`; ``knowledge``, ``informed``: as in
    :func:`fdbnl_server_round`: the average of an entry is over the clients that inform it,
    forbidden entries and those nobody informs are 0)."""
    ids = sorted(local)
    if not ids:
        raise ValueError("pfdbnl_server_round needs at least one accepted client")
    K = len(ids)
    local = {k: [np.asarray(m, dtype=float) for m in local[k]] for k in ids}
    zW, zA = _zeros_like_duals(state)
    beta = {k: state.beta.get(k, zW) for k in ids}
    gamma = {k: state.gamma.get(k, zA) for k in ids}
    if knowledge is None and informed is None:
        W = consensus_targets([local[k][0] for k in ids], [beta[k] for k in ids],
                              state.rho2, combine)
        A = consensus_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                              state.rho2, combine)
    else:
        inf = _informed(ids, state, informed)
        W, n_W = masked_targets([local[k][0] for k in ids], [beta[k] for k in ids],
                                [inf[k][0] for k in ids],
                              state.rho2, combine)
        A, n_A = masked_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                                [inf[k][1] for k in ids],
                              state.rho2, combine)
        fW, fA = n_W == 0, n_A == 0
        if knowledge is not None:
            fW, fA = fW | knowledge.forbid_W, fA | knowledge.forbid_A
        W, A = np.where(fW, 0.0, W), np.where(fA, 0.0, A)
    new = ServerState(W=W, A=A, rho1=_next_rho(state.rho1, phi1, rho_max),
                      rho2=_next_rho(state.rho2, phi2, rho_max), round=state.round + 1,
                      beta=dict(state.beta), gamma=dict(state.gamma),
                      W_tilde=dict(state.W_tilde), A_tilde=dict(state.A_tilde),
                      W_local=dict(state.W_local), A_local=dict(state.A_local))
    hs = [float(local[k][4]) for k in ids]
    for k in ids:
        W_tilde, A_tilde, W_k, A_k = local[k][:4]
        new.beta[k] = dual_step(beta[k], W_tilde, W, state.rho2)
        new.gamma[k] = dual_step(gamma[k], A_tilde, A, state.rho2)
        if informed is not None:
            mW, mA = _informed([k], state, informed)[k]
            new.beta[k], new.gamma[k] = (np.where(mW, new.beta[k], 0.0),
                                         np.where(mA, new.gamma[k], 0.0))
        new.W_tilde[k], new.A_tilde[k], new.W_local[k], new.A_local[k] = W_tilde, A_tilde, W_k, A_k
    new.h = float(np.mean(hs))
    new.residual = primal_residual([local[k][0] for k in ids], W)
    h_alpha = 2.0 * hs[-1] / K if code_compat else new.h
    new.alpha = state.alpha + state.rho1 * h_alpha
    return new


def initial_state(d: int, p: int, rho1: float, rho2: float,
                  init: tuple[np.ndarray, np.ndarray] | None = None) -> ServerState:
    """W = A = 0 (or the warm start ``init = (W, A)``), alpha = 0, the penalties rho1, rho2."""
    W, A = (np.zeros((d, d)), np.zeros((p * d, d))) if init is None else init
    if np.shape(W) != (d, d) or np.shape(A) != (p * d, d):
        raise ValueError(f"warm start: W {np.shape(W)} and A {np.shape(A)} do not fit d={d}, "
                         f"p={p} (need {(d, d)} and {(p * d, d)})")
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(A))):
        raise ValueError("warm start: W and A must be finite")
    return ServerState(W=np.array(W, dtype=float), A=np.array(A, dtype=float), rho1=rho1,
                       rho2=rho2)


def converged(state: ServerState, h_tol: float, primal_tol: float, max_rounds: int) -> bool:
    """Stop rule: (h <= h_tol and primal residual <= primal_tol) or max_rounds reached."""
    return ((state.h <= h_tol and state.residual <= primal_tol)
            or state.round >= max_rounds)


def primal_residual(locals_: Sequence[np.ndarray], W: np.ndarray) -> float:
    """max_k ||B_k - W||_F / max(||W||_F, 1): relative to W, absolute while ||W|| < 1."""
    return max(np.linalg.norm(B - W) for B in locals_) / max(np.linalg.norm(W), 1.0)


def _history_row(state: ServerState, n_clients: int) -> dict:
    return {"round": state.round, "h": state.h, "alpha": state.alpha, "rho1": state.rho1,
            "rho2": state.rho2, "n_clients": n_clients, "primal_residual": state.residual}


def _dims(clients: Sequence[Moments], sites: Sequence[Any] | None = None) -> tuple[int, int]:
    if not clients:
        raise ValueError("need at least one client")
    if sites is not None:
        return sites[0].D, sites[0].p
    d = clients[0][0].shape[0]
    return d, clients[0][2].shape[0] // d


def fdbnl_reference(clients: Sequence[Moments], s: FDBNLSettings, seed: int | None = None,
                    init: tuple[np.ndarray, np.ndarray] | None = None,
                    knowledge: Masks | None = None, sites: Sequence[Any] | None = None
                    ) -> tuple[ServerState, list[dict]]:
    """In-process FDBNL: the same core calls in the same order as the Flower strategy.

    Client ids are 0..K-1 in order. Returns the final state and per-round history dicts.
    ``knowledge``: masks of forbidden and required entries (:meth:`Knowledge.masks
    <fedcausal_flwr.knowledge.Knowledge.masks>`). ``sites``: per client its
    :class:`~fedcausal_flwr.dbn.sites.SiteView` when the clients hold different variables
    (``clients`` then holds each one's own moments).
    """
    rng = np.random.default_rng(s.seed if seed is None else seed)
    state, history = initial_state(*_dims(clients, sites), s.rho1, s.rho2, init), []
    informed = None if sites is None else {k: v.informed() for k, v in enumerate(sites)}
    while not converged(state, **s.stop_args()):
        ids = participants(range(len(clients)), s.clients_per_round, rng)
        if sites is None:
            local = {k: admm_local_step(clients[k], *fdbnl_client_payload(state, k),
                                        rho2=state.rho2) for k in ids}
        else:
            local = {k: site_local_step(sites[k], clients[k], fdbnl_client_payload(state, k),
                                        state.rho2) for k in ids}
        state = fdbnl_server_round(state, local, **s.fdbnl_round_args(), knowledge=knowledge,
                                   informed=informed)
        history.append(_history_row(state, len(ids)))
    return state, history


def pfdbnl_reference(clients: Sequence[Moments], s: PFDBNLSettings, seed: int | None = None,
                     init: tuple[np.ndarray, np.ndarray] | None = None,
                     knowledge: Masks | None = None, sites: Sequence[Any] | None = None
                     ) -> tuple[ServerState, list[dict]]:
    """In-process PFDBNL, same contract as :func:`fdbnl_reference`."""
    rng = np.random.default_rng(s.seed if seed is None else seed)
    state, history = initial_state(*_dims(clients, sites), s.rho1, s.rho2, init), []
    informed = None if sites is None else {k: v.informed() for k, v in enumerate(sites)}
    while not converged(state, **s.stop_args()):
        ids = participants(range(len(clients)), s.clients_per_round, rng)
        if sites is None:
            local = {k: pfdbnl_client_step(clients[k], pfdbnl_client_payload(state, k),
                                           state.alpha, state.rho1, state.rho2, **s.to_wire(),
                                           knowledge=knowledge) for k in ids}
        else:
            local = {k: site_personal_step(sites[k], clients[k], pfdbnl_client_payload(state, k),
                                           state.alpha, state.rho1, state.rho2, knowledge,
                                           **s.to_wire()) for k in ids}
        state = pfdbnl_server_round(state, local, **s.pfdbnl_round_args(), knowledge=knowledge,
                                    informed=informed)
        history.append(_history_row(state, len(ids)))
    return state, history


def threshold(M: np.ndarray, tau: float, keep: np.ndarray | None = None) -> np.ndarray:
    """Zero every entry with |m| < tau (except the ``keep`` ones: required edges)."""
    small = np.abs(M) < tau
    return np.where(small if keep is None else small & ~keep, 0.0, M)
