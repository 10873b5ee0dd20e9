"""Synthetic DBN / SVAR(p) data for FDBNL and PFDBNL (spec section 4.1).

Conventions: ``W`` (d x d) is the intra-slice DAG, ``A`` (pd x d) = vstack(A_1 .. A_p), and
``W[i, j] != 0`` means i -> j. The model is ``x_t' = x_t' W + sum_i x_{t-i}' A_i + u_t'``.

Seeds: a truth drawn from ``seed`` (an int or a sequence of ints, as numpy's ``default_rng``
takes) uses the stream ``seed``; its data use ``[*seed, DATA_TAG]``; an A redrawn for stability
uses ``[*seed, REDRAW_TAG, attempt]``. Heterogeneous client k draws its truth from
``[seed, k]``. Every function is therefore a pure function of its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.data.timeseries import Pair, lagged

Seed = int | Sequence[int]

WEIGHT_RANGES = {"paper": (0.3, 0.5), "code": (0.5, 2.0)}
GENERATORS = ("svar", "code")
DATA_TAG = 0xDA7A
REDRAW_TAG = 0x5AB1E


def _entropy(seed: Seed) -> list[int]:
    return [int(seed)] if np.ndim(seed) == 0 else [int(s) for s in seed]


def data_seed(seed: Seed) -> list[int]:
    """Seed of the data stream that belongs to the truth drawn from ``seed``."""
    return [*_entropy(seed), DATA_TAG]


def _check(d: int, p: int, weights: str) -> None:
    if d < 1 or p < 1:
        raise ValueError(f"need d >= 1 and p >= 1, got d={d}, p={p}")
    if weights not in WEIGHT_RANGES:
        raise ValueError(f"weights must be one of {tuple(WEIGHT_RANGES)}, got {weights!r}")


def _signed_uniform(rng: np.random.Generator, mask: np.ndarray, low: float, high: float
                    ) -> np.ndarray:
    magnitude = rng.uniform(low, high, size=mask.shape)
    sign = rng.choice([-1.0, 1.0], size=mask.shape)
    return np.where(mask, sign * magnitude, 0.0)


def _intra_structure(rng: np.random.Generator, d: int, degree: float) -> np.ndarray:
    """0/1 DAG: lower triangle of a permuted undirected ER graph, nodes permuted again."""
    upper = np.triu(rng.random((d, d)) < min(degree / d, 1.0), k=1)
    undirected = upper | upper.T
    perm = rng.permutation(d)
    dag = np.tril(undirected[np.ix_(perm, perm)], k=-1)
    perm = rng.permutation(d)
    return dag[np.ix_(perm, perm)]


def _lag_matrices(rng: np.random.Generator, d: int, p: int, degree: float, weights: str,
                  eta: float) -> np.ndarray:
    low, high = WEIGHT_RANGES[weights]
    blocks = []
    for lag in range(1, p + 1):
        mask = rng.random((d, d)) < min(degree / d, 1.0)
        scale = eta ** -(lag - 1)
        blocks.append(_signed_uniform(rng, mask, scale * low, scale * high))
    return np.vstack(blocks)


def dbn_truth(seed: Seed, d: int, p: int = 1, degree_w: float = 4.0, degree_a: float = 1.0,
              weights: str = "paper", eta: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Draw a weighted intra-slice DAG W (d x d) and lag matrices A (pd x d).

    W: ER graph with edge probability ``degree_w / d`` on unordered pairs, oriented by the lower
    triangle of a random node order. A_l: each entry (self-lags included) is an edge with
    probability ``degree_a / d``. Weights are uniform on ``±[lo, hi]`` (``"paper"``: [0.3, 0.5];
    ``"code"``: [0.5, 2.0]), scaled by ``eta^-(l-1)`` for lag l.
    """
    _check(d, p, weights)
    rng = np.random.default_rng(seed)
    low, high = WEIGHT_RANGES[weights]
    W = _signed_uniform(rng, _intra_structure(rng, d, degree_w), low, high)
    return W, _lag_matrices(rng, d, p, degree_a, weights, eta)


def companion_radius(W: np.ndarray, A: np.ndarray) -> float:
    """Spectral radius of the companion matrix of the reduced-form VAR of (W, A)."""
    d = W.shape[0]
    p = A.shape[0] // d
    Minv = np.linalg.inv(np.eye(d) - W)
    C = np.zeros((p * d, p * d))
    C[:d, :] = np.hstack([(A[i * d:(i + 1) * d] @ Minv).T for i in range(p)])
    C[d:, :-d] = np.eye((p - 1) * d)
    return float(np.max(np.abs(np.linalg.eigvals(C))))


def stable_truth(seed: Seed, d: int, p: int = 1, degree_w: float = 4.0, degree_a: float = 1.0,
                 weights: str = "paper", eta: float = 1.5, max_tries: int = 200
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``dbn_truth`` whose reduced-form VAR is stationary (companion spectral radius < 1).

    W is kept; while the radius is >= 1, A is redrawn from ``[*seed, REDRAW_TAG, attempt]``.
    With the paper's weights a redraw is rare; with the ``"code"`` weights at larger d it can be
    hopeless, and a ValueError is raised after ``max_tries`` redraws.
    """
    W, A = dbn_truth(seed, d, p, degree_w, degree_a, weights, eta)
    for attempt in range(1, max_tries + 1):
        if companion_radius(W, A) < 1.0:
            return W, A
        rng = np.random.default_rng([*_entropy(seed), REDRAW_TAG, attempt])
        A = _lag_matrices(rng, d, p, degree_a, weights, eta)
    if companion_radius(W, A) < 1.0:
        return W, A
    raise ValueError(f"no stationary A found for seed={seed} after {max_tries} redraws "
                     f"(d={d}, weights={weights!r}); use weights='paper' or generator='code'")


def _simulate_svar(W: np.ndarray, A: np.ndarray, n: int, rng: np.random.Generator,
                   burn_in: int) -> np.ndarray:
    d = W.shape[0]
    p = A.shape[0] // d
    Minv = np.linalg.inv(np.eye(d) - W)
    U = rng.standard_normal((burn_in + n, d))
    X = np.zeros((p + burn_in + n, d))
    for t in range(burn_in + n):
        past = X[t:t + p][::-1].reshape(-1)  # [x_{t-1}, ..., x_{t-p}]
        X[t + p] = (past @ A + U[t]) @ Minv
    return X[p + burn_in:]


def _code_pair(W: np.ndarray, A: np.ndarray, n: int, rng: np.random.Generator) -> Pair:
    """Official-code data: X i.i.d. from the static SEM W, Y = zero-padded lags of X."""
    d = W.shape[0]
    p = A.shape[0] // d
    X = rng.standard_normal((n, d)) @ np.linalg.inv(np.eye(d) - W)
    Y = np.zeros((n, p * d))
    for i in range(1, min(p, n - 1) + 1):
        Y[i:, (i - 1) * d:i * d] = X[:-i]
    return X + Y @ A, Y


def _check_generator(W: np.ndarray, A: np.ndarray, generator: str) -> None:
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    d = W.shape[0]
    if W.shape != (d, d) or A.ndim != 2 or A.shape[1] != d or A.shape[0] % d:
        raise ValueError(f"need W (d x d) and A (pd x d), got {W.shape} and {A.shape}")
    if generator == "svar" and companion_radius(W, A) >= 1.0:
        raise ValueError("the SVAR is not stationary (companion spectral radius >= 1); "
                         "draw the truth with stable_truth")


def dbn_series(W: np.ndarray, A: np.ndarray, n: int, seed: Seed, generator: str = "svar",
               burn_in: int = 100) -> np.ndarray:
    """Simulate n rows (n x d).

    ``"svar"``: ``x_t = (I - W)^{-T} (sum_i A_i' x_{t-i} + u_t)``, u ~ N(0, I), started at zero
    and run ``burn_in`` steps first. ``"code"``: the observed ``X + Y A`` of the official code;
    its rows are not an SVAR, and the lags it is fitted against are those of the latent X (use
    ``dbn_data``).
    """
    W, A = np.asarray(W, float), np.asarray(A, float)
    _check_generator(W, A, generator)
    rng = np.random.default_rng(seed)
    if generator == "code":
        return _code_pair(W, A, n, rng)[0]
    return _simulate_svar(W, A, n, rng, burn_in)


def dbn_data(W: np.ndarray, A: np.ndarray, n: int, seed: Seed, generator: str = "svar",
             burn_in: int = 100) -> Pair:
    """What the algorithms fit: ``(Xt (n x d), Xlag (n x pd))``.

    ``"svar"``: n + p rows after burn-in, lagged with the first p rows dropped.
    ``"code"``: ``(X + Y A, Y)`` with Y the zero-padded lags of i.i.d. SEM rows X.
    """
    W, A = np.asarray(W, float), np.asarray(A, float)
    _check_generator(W, A, generator)
    rng = np.random.default_rng(seed)
    if generator == "code":
        return _code_pair(W, A, n, rng)
    p = A.shape[0] // W.shape[0]
    return lagged(_simulate_svar(W, A, n + p, rng, burn_in), p, pad="drop")


def truths_dbn(seed: int, K: int, d: int, p: int = 1, degree_w: float = 4.0,
               degree_a: float = 1.0, weights: str = "paper", generator: str = "code",
               heterogeneous: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """The K clients' true (W, A): one shared pair (repeated) or one per client from [seed, k].

    With ``generator="svar"`` the truths come from ``stable_truth``.
    """
    if K < 1:
        raise ValueError(f"need K >= 1 clients, got {K}")
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    draw = stable_truth if generator == "svar" else dbn_truth
    if not heterogeneous:
        return [draw(seed, d, p, degree_w, degree_a, weights)] * K
    return [draw([seed, k], d, p, degree_w, degree_a, weights) for k in range(K)]


def federated_dbn(seed: int, K: int, n_k: int, d: int, p: int = 1, degree_w: float = 4.0,
                  degree_a: float = 1.0, weights: str = "paper", generator: str = "code",
                  heterogeneous: bool = False
                  ) -> tuple[list[Pair], list[tuple[np.ndarray, np.ndarray]]]:
    """K clients' ``(Xt, Xlag)`` of n_k rows each, and their true (W, A).

    Homogeneous: K n_k rows are simulated once and split into K contiguous blocks.
    Heterogeneous: client k simulates n_k rows from its own truth (seed [seed, k]).
    """
    if n_k < 1:
        raise ValueError(f"need n_k >= 1 rows per client, got {n_k}")
    truths = truths_dbn(seed, K, d, p, degree_w, degree_a, weights, generator, heterogeneous)
    if heterogeneous:
        clients = [dbn_data(*truths[k], n_k, data_seed([seed, k]), generator)
                   for k in range(K)]
        return clients, truths
    Xt, Xlag = dbn_data(*truths[0], K * n_k, data_seed(seed), generator)
    blocks = [slice(k * n_k, (k + 1) * n_k) for k in range(K)]
    return [(Xt[b].copy(), Xlag[b].copy()) for b in blocks], truths


def client_dbn(seed: int, k: int, K: int, n_k: int, d: int, p: int = 1,
               degree_w: float = 4.0, degree_a: float = 1.0, weights: str = "paper",
               generator: str = "code", heterogeneous: bool = False) -> Pair:
    """Client k's ``(Xt, Xlag)``, equal to ``federated_dbn(...)[0][k]``."""
    if not 0 <= k < K:
        raise ValueError(f"client index k={k} outside 0..{K - 1}")
    if n_k < 1:
        raise ValueError(f"need n_k >= 1 rows per client, got {n_k}")
    if not heterogeneous:
        clients, _ = federated_dbn(seed, K, n_k, d, p, degree_w, degree_a, weights, generator)
        return clients[k]
    draw = stable_truth if generator == "svar" else dbn_truth
    W, A = draw([seed, k], d, p, degree_w, degree_a, weights)
    return dbn_data(W, A, n_k, data_seed([seed, k]), generator)
