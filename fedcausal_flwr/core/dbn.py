"""Dynamic Bayesian network structure learning: DYNOTEARS, FDBNL and PFDBNL.

Notation follows the FDBNL paper (Chen, Ma, Yue 2025). ``W`` (d x d) is the intra-slice
graph, ``A`` (pd x d) stacks the lag matrices ``A_1 .. A_p``; ``W[i, j] != 0`` means i -> j.
Client k holds ``Xt`` (n_k x d) and ``Xlag`` (n_k x pd) and only ever shares matrices.

Everything here is pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Moments = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ADMMSettings:
    """Hyper-parameters of FDBNL / PFDBNL (paper defaults).

    ``lambda_scale``: ``"paper"`` applies lambda once in the server step, as in the paper, so
    its strength relative to the K consensus terms falls as K grows; ``"pooled"`` multiplies it
    by the number of participating clients so lambda keeps its centralized DYNOTEARS meaning
    (sum_k l_k = K * pooled loss when the n_k are equal).
    ``dual_update``: ``"paper"`` uses W^(t+1) in the dual step (Eq. 4), ``"code"`` the official
    code's W^(t). ``code_compat``: PFDBNL departures of the official code (spec section 3).
    """

    lambda_w: float = 0.1
    lambda_a: float = 0.1
    lambda_scale: str = "paper"
    rho1: float = 1.0
    rho2: float = 1.0
    phi1: float = 1.6
    phi2: float = 1.1
    rho_max: float = 1e16
    h_tol: float = 1e-8
    max_rounds: int = 200
    restarts: int = 5
    mu: float = 0.1
    dual_update: str = "paper"
    code_compat: bool = False
    clients_per_round: int = 0  # 0: every client every round


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


def acyclicity(W: np.ndarray) -> float:
    """h(W) = tr(exp(W o W)) - d."""
    raise NotImplementedError


def acyclicity_grad(W: np.ndarray) -> np.ndarray:
    """Gradient of h: exp(W o W)^T o 2W."""
    raise NotImplementedError


def moments(Xt: np.ndarray, Xlag: np.ndarray) -> Moments:
    """Second moments (S, M, N) = (Xt'Xt, Xt'Xlag, Xlag'Xlag) / n_k."""
    raise NotImplementedError


def squared_loss(W: np.ndarray, A: np.ndarray, mom: Moments) -> float:
    """l(W, A) = 1/(2 n) ||Xt - Xt W - Xlag A||_F^2 computed from the moments."""
    raise NotImplementedError


def admm_local_step(mom: Moments, W: np.ndarray, A: np.ndarray, beta: np.ndarray,
                    gamma: np.ndarray, rho2: float) -> tuple[np.ndarray, np.ndarray]:
    """FDBNL local step (2): closed-form (B_k, D_k)."""
    raise NotImplementedError


def consensus_targets(B: Sequence[np.ndarray], beta: Sequence[np.ndarray], rho2: float
                      ) -> np.ndarray:
    """V = mean_k(B_k + beta_k / rho2): the consensus terms equal K rho2/2 ||W - V||^2 + c."""
    raise NotImplementedError


def admm_global_step(V_W: np.ndarray, V_A: np.ndarray, weight: float, alpha: float,
                     rho1: float, lambda_w: float, lambda_a: float, restarts: int = 5
                     ) -> tuple[np.ndarray, np.ndarray]:
    """FDBNL server step (3) by L-BFGS-B on split variables, zero diagonal in W."""
    raise NotImplementedError


def dual_update(dual: np.ndarray, local: np.ndarray, consensus: np.ndarray, rho2: float
                ) -> np.ndarray:
    """beta + rho2 (B - W)."""
    raise NotImplementedError


def pfdbnl_local_step(mom: Moments, W_anchor: np.ndarray, A_anchor: np.ndarray, mu: float,
                      alpha: float, rho1: float, lambda_w: float, lambda_a: float,
                      restarts: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """PFDBNL local step (10): personalized (W_k, A_k) by L-BFGS-B."""
    raise NotImplementedError


def pfdbnl_copy(local: np.ndarray, consensus: np.ndarray, dual: np.ndarray, mu: float,
                rho2: float, code_compat: bool = False) -> np.ndarray:
    """PFDBNL closed form (11): W~_k = (2 mu W_k + rho2 W - beta_k) / (2 mu + rho2)."""
    raise NotImplementedError


def participants(ids: Sequence[int], per_round: int, rng: np.random.Generator) -> list[int]:
    """Clients of one round: all (per_round <= 0 or >= len) or a uniform sample, sorted."""
    raise NotImplementedError


def fdbnl_server_round(state: ServerState, local: Mapping[int, tuple[np.ndarray, np.ndarray]],
                       s: ADMMSettings) -> ServerState:
    """One FDBNL server round from the accepted local replies {id: (B_k, D_k)}.

    Global step, dual updates for the ids in ``local`` only, alpha and rho updates; returns
    the new state (round + 1, h = h(W^(t+1))). Missing duals start at zero.
    """
    raise NotImplementedError


def fdbnl_client_payload(state: ServerState, cid: int) -> list[np.ndarray]:
    """What the server sends client ``cid``: [W, A, beta_k, gamma_k] (rho2 goes in config)."""
    raise NotImplementedError


def pfdbnl_client_payload(state: ServerState, cid: int) -> list[np.ndarray]:
    """What the server sends client ``cid``: [W, A, W~_k, A~_k, beta_k, gamma_k]."""
    raise NotImplementedError


def pfdbnl_client_step(mom: Moments, payload: Sequence[np.ndarray], alpha: float, rho1: float,
                       rho2: float, s: ADMMSettings) -> list[np.ndarray]:
    """Client side of one PFDBNL round: returns [W~_k, A~_k, W_k, A_k, h(W_k) as 0-d array]."""
    raise NotImplementedError


def pfdbnl_server_round(state: ServerState, local: Mapping[int, Sequence[np.ndarray]],
                        s: ADMMSettings) -> ServerState:
    """One PFDBNL server round from accepted replies {id: pfdbnl_client_step output}."""
    raise NotImplementedError


def initial_state(d: int, p: int, s: ADMMSettings) -> ServerState:
    """W = 0, A = 0, alpha = 0, rho from the settings."""
    raise NotImplementedError


def converged(state: ServerState, s: ADMMSettings) -> bool:
    """Stop rule: h <= h_tol or max_rounds reached."""
    raise NotImplementedError


def fdbnl_reference(clients: Sequence[Moments], s: ADMMSettings, seed: int = 0
                    ) -> tuple[ServerState, list[dict]]:
    """In-process FDBNL: the same core calls in the same order as the Flower strategy.

    Client ids are 0..K-1 in order. Returns the final state and per-round history dicts.
    """
    raise NotImplementedError


def pfdbnl_reference(clients: Sequence[Moments], s: ADMMSettings, seed: int = 0
                     ) -> tuple[ServerState, list[dict]]:
    """In-process PFDBNL, same contract as :func:`fdbnl_reference`."""
    raise NotImplementedError


def dynotears(mom: Moments, lambda_w: float, lambda_a: float, max_iter: int = 100,
              h_tol: float = 1e-8, rho_max: float = 1e16) -> tuple[np.ndarray, np.ndarray]:
    """Centralized DYNOTEARS (augmented Lagrangian, spec 4.3); unthresholded (W, A)."""
    raise NotImplementedError


def ave_baseline(clients: Sequence[Moments], lambda_w: float, lambda_a: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's Ave baseline: per-client DYNOTEARS, weights averaged (unthresholded)."""
    raise NotImplementedError


def threshold(M: np.ndarray, tau: float) -> np.ndarray:
    """Zero every entry with |m| < tau."""
    raise NotImplementedError
