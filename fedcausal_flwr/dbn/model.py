"""Dynamic Bayesian network structure learning: DYNOTEARS, FDBNL and PFDBNL.

Notation follows the FDBNL paper (Chen, Ma, Yue 2025). ``W`` (d x d) is the intra-slice
graph, ``A`` (pd x d) stacks the lag matrices ``A_1 .. A_p``; ``W[i, j] != 0`` means i -> j.
Client k holds ``Xt`` (n_k x d) and ``Xlag`` (n_k x pd) and only ever shares matrices.

Everything here is pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as slin
import scipy.optimize as sopt

from fedcausal_flwr.knowledge import KnowledgeSettings, Masks
from fedcausal_flwr.settings import (
    MAX_CLIENTS,
    MAX_LAGS,
    MAX_REPLICAS,
    MAX_ROUNDS,
    MAX_VARS,
    ScreenedRunSettings,
    numbers,
    setting,
)


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


VARIABLE_SETS = ("union", "shared", "same")
#: where PFDBNL's local step (10) starts: the client's last W_k, A_k, its copies, 0
LOCAL_STARTS = ("previous", "copies", "zero")


@dataclass(frozen=True)
class FDBNLSettings(ScreenedRunSettings, KnowledgeSettings):
    """Every setting of FDBNL (Algorithm 1), with the App's defaults (the one source of them).

    How the defaults were chosen: ``docs/algorithms/fdbnl.md``.

    ``lambda_w``, ``lambda_a``: L1 weights of W and A. ``lambda_scale``: ``"pooled"`` multiplies
    them by the number K of participating clients (sum_k l_k = K x pooled loss for equal n_k,
    so lambda keeps its centralized DYNOTEARS meaning); ``"paper"`` applies them once in the
    server step (3). ``rho1``, ``rho2``: penalties of h(W) and of consensus, grown by ``phi1``,
    ``phi2`` per round up to ``rho_max``. ``dual_update``: ``"paper"`` uses W^(t+1) in the dual
    step (4), ``"code"`` the official code's W^(t). ``code_compat``: PFDBNL departures of the
    official code. ``max_rounds``: the round budget; the run stops earlier once h(W) <=
    ``h_tol`` and max_k ||B_k - W||_F / max(||W||_F, 1) <= ``primal_tol``.
    ``clients_per_round``: clients sampled per round (0: all); ``seed``: their sampling.
    ``tau_w``, ``tau_a``: thresholds of the reported graphs. ``d``, ``p``: the expected data
    shape (0: the majority of what the clients report). ``restarts``: chained L-BFGS-B calls of
    PFDBNL's local step (10). ``server_a_step``, ``server_warm_start``, ``server_restarts``,
    ``server_screen``: the solver of the server step (3), see :func:`admm_global_step`.
    ``forbid``, ``require``, ``tiers``, ``exogenous``: prior knowledge
    (:mod:`fedcausal_flwr.knowledge`).
    ``variables``: the federation's variables when sites hold different ones (``"union"``:
    all, each entry learned from the sites that observe both its variables; ``"shared"``:
    those every site has; ``"same"``: a site with other variables is dropped).
    ``max_missing``: a site with a larger share of missing cells is dropped.
    """

    section: ClassVar[str] = "dbn"

    lambda_w: float = setting(0.05, "lambda-w", ge=0, wire=True)
    lambda_a: float = setting(0.05, "lambda-a", ge=0, wire=True)
    lambda_scale: str = setting("pooled", "lambda-scale", choices=("pooled", "paper"))
    rho1: float = setting(1.0, "rho1", gt=0)
    rho2: float = setting(1.0, "rho2", gt=0)
    phi1: float = setting(2.5, "phi1", ge=1)
    phi2: float = setting(1.1, "phi2", ge=1)
    rho_max: float = setting(1e16, "rho-max", gt=0)
    h_tol: float = setting(1e-8, "h-tol", ge=0)
    primal_tol: float = setting(1e-2, "primal-tol", ge=0)
    max_rounds: int = setting(200, "num-rounds", ge=1, le=MAX_ROUNDS)
    restarts: int = setting(1, ge=1, le=1000, wire=True,
                            doc="chained L-BFGS-B calls of PFDBNL's local step (10)")
    server_restarts: int = setting(1, ge=1, le=1000,
                                  doc="chained L-BFGS-B calls of the server step (3)")
    server_warm_start: bool = setting(True, doc="server step starts at the previous W, not 0")
    server_a_step: str = setting("closed-form", choices=("closed-form", "lbfgs"),
                                 doc="A of the server step: soft threshold, or joint L-BFGS-B")
    server_screen: bool = setting(True, doc="server step solves W only on the entries that "
                                            "can be nonzero (|weight V| > lambda), signs fixed")
    dual_update: str = setting("paper", "dual-update", choices=("paper", "code"))
    code_compat: bool = setting(False, "code-compat", wire=True)
    clients_per_round: int = setting(0, "clients-per-round", ge=0, le=MAX_CLIENTS)
    seed: int = setting(0, "seed", ge=0)
    tau_w: float = setting(0.2, "tau-w", ge=0)
    tau_a: float = setting(0.2, "tau-a", ge=0)
    d: int = setting(0, ge=0, le=MAX_VARS)
    p: int = setting(0, ge=0, le=MAX_LAGS)
    replicas: int = setting(0, "replicas", ge=0, le=MAX_REPLICAS,
                            doc="half-sample replicas for edge frequencies (even; 0: none)")
    stability_threshold: float = setting(0.6, "stability-threshold", gt=0.5, le=1,
                                         doc="frequency an edge needs to be stable")
    lambda_select: str = setting("fixed", "lambda-select", choices=("fixed", "holdout"),
                                 doc="lambdas as set, or chosen on held-out blocks")
    lambda_path: str = setting("0.2,0.1,0.05,0.025,0.0125", "lambda-path",
                               doc="candidate lambdas (both W and A) of lambda-select holdout")
    tau_path: str = setting("0.1,0.2,0.3,0.4", "tau-path",
                            doc="candidate thresholds (both W and A) of lambda-select holdout")
    holdout: float = setting(0.2, "holdout", gt=0, lt=1,
                             doc="share of each client's rows, its last, held out")
    variables: str = setting("union", "variables", choices=VARIABLE_SETS,
                             doc="graph over the union of the sites' variables, the shared "
                                 "ones, or the same ones at every site")
    max_missing: float = setting(0.5, "max-missing", ge=0, le=1,
                                 doc="largest share of missing cells a site may have")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.replicas % 2:
            raise ValueError(f"run config {self.app_key('replicas')!r} = {self.replicas}: "
                             "must be even (replicas come in complementary pairs of halves)")
        for key, text in (("lambda-path", self.lambda_path), ("tau-path", self.tau_path)):
            try:
                values = numbers(text)
            except ValueError:
                values = ()
            if not values or min(values) < 0:
                raise ValueError(f"run config {self.app_key(key)!r} = {text!r}: expected "
                                 "comma-separated numbers >= 0 (allowed: str such as "
                                 "'0.1,0.05')")
        if len(numbers(self.lambda_path)) * (self.replicas + 2) > MAX_REPLICAS:
            raise ValueError(f"{self.app_key('lambda-path')!r} x {self.app_key('replicas')!r}"
                             f": more than {MAX_REPLICAS} replicas in one run")

    @property
    def replicated(self) -> bool:
        """Whether a run carries replicas (half samples or a penalty path)."""
        return self.replicas > 0 or self.lambda_select != "fixed"

    def taus(self) -> tuple[float, ...]:
        """The candidate thresholds of ``lambda-select holdout`` (none otherwise)."""
        return numbers(self.tau_path) if self.lambda_select == "holdout" else ()

    def fdbnl_round_args(self) -> dict[str, Any]:
        """The numbers of FDBNL's server round (:func:`fdbnl_server_round`)."""
        return {n: getattr(self, n) for n in (
            "lambda_w", "lambda_a", "lambda_scale", "dual_update", "server_restarts",
            "server_warm_start", "server_a_step", "server_screen", "phi1", "phi2", "rho_max")}

    def pfdbnl_round_args(self) -> dict[str, Any]:
        """The numbers of PFDBNL's server round (:func:`pfdbnl_server_round`)."""
        return {"phi1": self.phi1, "phi2": self.phi2, "rho_max": self.rho_max,
                "code_compat": self.code_compat}

    def stop_args(self) -> dict[str, Any]:
        """The numbers of the stop rule (:func:`converged`)."""
        return {"h_tol": self.h_tol, "primal_tol": self.primal_tol,
                "max_rounds": self.max_rounds}


@dataclass(frozen=True)
class PFDBNLSettings(FDBNLSettings):
    """FDBNL's settings with PFDBNL's own L1 weights ``lambda_w``, ``lambda_a`` (run-config
    keys ``pfdbnl-lambda-w``, ``pfdbnl-lambda-a``; FDBNL's ``lambda-w``, ``lambda-a`` set to
    other than FDBNL's defaults are refused, :meth:`~fedcausal_flwr.settings.Settings.rekeyed`),
    plus ``mu``, the weight of the proximal term of Algorithm 2, and the solver of its local
    step (10): ``local_start`` (where L-BFGS-B starts: ``"previous"``,
    the client's own last W_k, A_k, which the server sends back; ``"copies"``, the copies
    W~_k, A~_k; ``"zero"``), ``local_maxiter`` (L-BFGS-B iterations per call; 0: no cap) and
    ``local_ftol`` (its relative decrease test; 0: scipy's default)
    (``docs/algorithms/pfdbnl.md``, "Local-step cost")."""

    lambda_w: float = setting(0.1, "pfdbnl-lambda-w", ge=0, wire=True,
                              doc="L1 weight of W (PFDBNL's own, chosen on heterogeneous "
                                  "clients; FDBNL's is 'lambda-w')")
    lambda_a: float = setting(0.075, "pfdbnl-lambda-a", ge=0, wire=True,
                              doc="L1 weight of A (PFDBNL's own, chosen on heterogeneous "
                                  "clients; FDBNL's is 'lambda-a')")
    mu: float = setting(0.1, "mu", ge=0, wire=True)
    local_start: str = setting("previous", choices=LOCAL_STARTS, wire=True,
                               doc="where L-BFGS-B starts in PFDBNL's local step (10): the "
                                   "client's last W_k, A_k, the copies W~_k, A~_k, or 0")
    local_maxiter: int = setting(100, ge=0, le=100000, wire=True,
                                 doc="L-BFGS-B iterations per call of PFDBNL's local step "
                                     "(10) (0: no cap)")
    local_ftol: float = setting(0.0, ge=0, lt=1, wire=True,
                                doc="L-BFGS-B's relative decrease test in the local step (10) "
                                    "(0: scipy's default 2.2e-9)")


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


def _exp_sq(W: np.ndarray) -> np.ndarray:
    """exp(W o W), the one matrix exponential of h."""
    return slin.expm(W * W)


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


def consensus_targets(B: Sequence[np.ndarray], beta: Sequence[np.ndarray], rho2: float
                      ) -> np.ndarray:
    """V = mean_k(B_k + beta_k / rho2): the consensus terms equal K rho2/2 ||W - V||^2 + c."""
    if len(B) == 0 or len(B) != len(beta):
        raise ValueError(f"need as many duals as locals (> 0), got {len(B)} and {len(beta)}")
    V = np.zeros_like(B[0], dtype=float)
    for Bk, bk in zip(B, beta, strict=True):
        V = V + consensus_target(Bk, bk, rho2)
    return V / len(B)


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
    upper = np.full((2 * (p + 1), d, d), np.inf)
    upper[:2, np.arange(d), np.arange(d)] = 0.0
    upper.flags.writeable = False
    return sopt.Bounds(np.zeros(upper.size), upper.ravel())


def _fixed_bounds(d: int, p: int, fixed: np.ndarray) -> sopt.Bounds:
    """:func:`_split_bounds` with both halves of every ``fixed`` entry ((p + 1) x d x d,
    block by block) pinned to 0."""
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
                   informed: Sequence[np.ndarray], rho2: float) -> tuple[np.ndarray, np.ndarray]:
    """``(V, n)``: V = the mean of B_k + beta_k / rho2 over the clients whose data inform each
    entry (``informed``: boolean masks), n their number (V = 0 where n = 0)."""
    n = np.sum([m.astype(float) for m in informed], axis=0)
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
                       informed: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None
                       ) -> ServerState:
    """One FDBNL server round from the accepted local replies {id: (B_k, D_k)}.

    Global step, dual updates for the ids in ``local`` only, alpha and rho updates; returns
    the new state (round + 1, h = h(W^(t+1))). Missing duals start at zero. The numbers are
    :class:`FDBNLSettings`' (:meth:`FDBNLSettings.fdbnl_round_args`). ``knowledge``: masks
    of forbidden entries (held at 0) and required ones (no L1 penalty). ``informed``: per
    client the masks of the entries its data inform (its observed variables; absent: all);
    the consensus of an entry averages the clients that inform it and weighs it by their
    number, its duals move only there, and an entry nobody informs stays 0.
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
                                  [inf[k][0] for k in ids], state.rho2)
        V_A, n_A = masked_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                                  [inf[k][1] for k in ids], state.rho2)
        weight = (n_W * state.rho2, n_A * state.rho2)
        lW, lA = entry_penalties(n_W, n_A, lambda_w, lambda_a, lambda_scale, knowledge)
    else:
        V_W = consensus_targets([local[k][0] for k in ids], [beta[k] for k in ids], state.rho2)
        V_A = consensus_targets([local[k][1] for k in ids], [gamma[k] for k in ids], state.rho2)
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
                        informed: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None
                        ) -> ServerState:
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
        W = consensus_targets([local[k][0] for k in ids], [beta[k] for k in ids], state.rho2)
        A = consensus_targets([local[k][1] for k in ids], [gamma[k] for k in ids], state.rho2)
    else:
        inf = _informed(ids, state, informed)
        W, n_W = masked_targets([local[k][0] for k in ids], [beta[k] for k in ids],
                                [inf[k][0] for k in ids], state.rho2)
        A, n_A = masked_targets([local[k][1] for k in ids], [gamma[k] for k in ids],
                                [inf[k][1] for k in ids], state.rho2)
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


def threshold(M: np.ndarray, tau: float, keep: np.ndarray | None = None) -> np.ndarray:
    """Zero every entry with |m| < tau (except the ``keep`` ones: required edges)."""
    small = np.abs(M) < tau
    return np.where(small if keep is None else small & ~keep, 0.0, M)
