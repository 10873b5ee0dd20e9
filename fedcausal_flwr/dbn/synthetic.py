"""Synthetic DBN / SVAR(p) data for FDBNL and PFDBNL.

Conventions: ``W`` (d x d) is the intra-slice DAG, ``A`` (pd x d) = vstack(A_1 .. A_p), and
``W[i, j] != 0`` means i -> j. The model is ``x_t' = x_t' W + sum_i x_{t-i}' A_i + u_t'``.

Seeds: a truth drawn from ``seed`` (an int or a sequence of ints, as numpy's ``default_rng``
takes) uses the stream ``seed``; its data use ``[*seed, DATA_TAG]``; an A redrawn for stability
uses ``[*seed, REDRAW_TAG, attempt]``; per-variable noise scales (``noise_scales=(lo, hi)``)
use ``[*seed, NOISE_TAG]`` of the data seed. Heterogeneous client k draws its truth from
``[seed, k]``. Every function is therefore a pure function of its arguments.

Intra-slice graphs: ``graph="er"`` (Erdos-Renyi, the default) or ``"sf"`` (scale-free,
Barabasi-Albert preferential attachment with m = round(degree / 2) edges per new node, hubs
as parents, oriented by the order of attachment and then node-permuted).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from fedcausal_flwr.data.timeseries import Pair, lagged

Seed = int | Sequence[int]

WEIGHT_RANGES = {"paper": (0.3, 0.5), "code": (0.5, 2.0)}
GENERATORS = ("svar", "code")
GRAPHS = ("er", "sf")
DATA_TAG = 0xDA7A
NOISE_TAG = 0x5CA1E
REDRAW_TAG = 0x5AB1E


def _entropy(seed: Seed) -> list[int]:
    return [int(seed)] if np.ndim(seed) == 0 else [int(s) for s in seed]


def data_seed(seed: Seed) -> list[int]:
    """Seed of the data stream that belongs to the truth drawn from ``seed``."""
    return [*_entropy(seed), DATA_TAG]


def _check(d: int, p: int, weights: str, graph: str = "er") -> None:
    if d < 1 or p < 1:
        raise ValueError(f"need d >= 1 and p >= 1, got d={d}, p={p}")
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {GRAPHS}, got {graph!r}")
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


def _scale_free_structure(rng: np.random.Generator, d: int, degree: float) -> np.ndarray:
    """0/1 DAG by Barabasi-Albert attachment: node t links to m = round(degree / 2) earlier
    nodes chosen with probability proportional to their degree + 1 (edge earlier -> later, so
    early nodes become parent hubs), then nodes are permuted. Mean degree ~ degree."""
    m = max(1, int(round(degree / 2)))
    dag = np.zeros((d, d), dtype=bool)
    deg = np.zeros(d)
    for t in range(1, d):
        k = min(m, t)
        w = deg[:t] + 1.0
        parents = rng.choice(t, size=k, replace=False, p=w / w.sum())
        dag[parents, t] = True
        deg[parents] += 1
        deg[t] += k
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
              weights: str = "paper", eta: float = 1.5, graph: str = "er"
              ) -> tuple[np.ndarray, np.ndarray]:
    """Draw a weighted intra-slice DAG W (d x d) and lag matrices A (pd x d).

    W: ER graph with edge probability ``degree_w / d`` on unordered pairs, oriented by the lower
    triangle of a random node order. A_l: each entry (self-lags included) is an edge with
    probability ``degree_a / d``. Weights are uniform on ``±[lo, hi]`` (``"paper"``: [0.3, 0.5];
    ``"code"``: [0.5, 2.0]), scaled by ``eta^-(l-1)`` for lag l. ``graph="sf"``: W's structure
    is scale-free instead (see the module docstring).
    """
    _check(d, p, weights, graph)
    rng = np.random.default_rng(seed)
    low, high = WEIGHT_RANGES[weights]
    structure = _intra_structure if graph == "er" else _scale_free_structure
    W = _signed_uniform(rng, structure(rng, d, degree_w), low, high)
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
                 weights: str = "paper", eta: float = 1.5, max_tries: int = 200,
                 graph: str = "er") -> tuple[np.ndarray, np.ndarray]:
    """``dbn_truth`` whose reduced-form VAR is stationary (companion spectral radius < 1).

    W is kept; while the radius is >= 1, A is redrawn from ``[*seed, REDRAW_TAG, attempt]``.
    With the paper's weights a redraw is rare; with the ``"code"`` weights at larger d it can be
    hopeless, and a ValueError is raised after ``max_tries`` redraws.
    """
    W, A = dbn_truth(seed, d, p, degree_w, degree_a, weights, eta, graph)
    for attempt in range(1, max_tries + 1):
        if companion_radius(W, A) < 1.0:
            return W, A
        rng = np.random.default_rng([*_entropy(seed), REDRAW_TAG, attempt])
        A = _lag_matrices(rng, d, p, degree_a, weights, eta)
    if companion_radius(W, A) < 1.0:
        return W, A
    raise ValueError(f"no stationary A found for seed={seed} after {max_tries} redraws "
                     f"(d={d}, weights={weights!r}); use weights='paper' or generator='code'")


NoiseScales = tuple[float, float] | None


def noise_scale_vector(d: int, seed: Seed, noise_scales: NoiseScales) -> np.ndarray:
    """Per-variable noise standard deviations: ones, or U(lo, hi) from ``[*seed, NOISE_TAG]``."""
    if noise_scales is None:
        return np.ones(d)
    lo, hi = (float(v) for v in noise_scales)
    if not 0 < lo <= hi:
        raise ValueError(f"noise_scales must be (lo, hi) with 0 < lo <= hi, got {noise_scales}")
    return np.random.default_rng([*_entropy(seed), NOISE_TAG]).uniform(lo, hi, size=d)


def _simulate_svar(W: np.ndarray, A: np.ndarray, n: int, rng: np.random.Generator,
                   burn_in: int, scales: np.ndarray | None = None) -> np.ndarray:
    d = W.shape[0]
    p = A.shape[0] // d
    Minv = np.linalg.inv(np.eye(d) - W)
    U = rng.standard_normal((burn_in + n, d))
    if scales is not None:
        U = U * scales
    X = np.zeros((p + burn_in + n, d))
    for t in range(burn_in + n):
        past = X[t:t + p][::-1].reshape(-1)  # [x_{t-1}, ..., x_{t-p}]
        X[t + p] = (past @ A + U[t]) @ Minv
    return X[p + burn_in:]


def _code_pair(W: np.ndarray, A: np.ndarray, n: int, rng: np.random.Generator,
               scales: np.ndarray | None = None) -> Pair:
    """Official-code data: X i.i.d. from the static SEM W, Y = zero-padded lags of X."""
    d = W.shape[0]
    p = A.shape[0] // d
    E = rng.standard_normal((n, d))
    if scales is not None:
        E = E * scales
    X = E @ np.linalg.inv(np.eye(d) - W)
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
               burn_in: int = 100, noise_scales: NoiseScales = None) -> np.ndarray:
    """Simulate n rows (n x d).

    ``"svar"``: ``x_t = (I - W)^{-T} (sum_i A_i' x_{t-i} + u_t)``, u ~ N(0, I), started at zero
    and run ``burn_in`` steps first. ``"code"``: the observed ``X + Y A`` of the official code;
    its rows are not an SVAR, and the lags it is fitted against are those of the latent X (use
    ``dbn_data``). ``noise_scales=(lo, hi)``: variable j's noise has sd s_j ~ U(lo, hi)
    (heterogeneous noise scales, see :func:`noise_scale_vector`); None: unit variances.
    """
    W, A = np.asarray(W, float), np.asarray(A, float)
    _check_generator(W, A, generator)
    rng = np.random.default_rng(seed)
    scales = None if noise_scales is None else noise_scale_vector(W.shape[0], seed, noise_scales)
    if generator == "code":
        return _code_pair(W, A, n, rng, scales)[0]
    return _simulate_svar(W, A, n, rng, burn_in, scales)


def dbn_data(W: np.ndarray, A: np.ndarray, n: int, seed: Seed, generator: str = "svar",
             burn_in: int = 100, noise_scales: NoiseScales = None) -> Pair:
    """What the algorithms fit: ``(Xt (n x d), Xlag (n x pd))``.

    ``"svar"``: n + p rows after burn-in, lagged with the first p rows dropped.
    ``"code"``: ``(X + Y A, Y)`` with Y the zero-padded lags of i.i.d. SEM rows X.
    ``noise_scales``: as in :func:`dbn_series`.
    """
    W, A = np.asarray(W, float), np.asarray(A, float)
    _check_generator(W, A, generator)
    rng = np.random.default_rng(seed)
    scales = None if noise_scales is None else noise_scale_vector(W.shape[0], seed, noise_scales)
    if generator == "code":
        return _code_pair(W, A, n, rng, scales)
    p = A.shape[0] // W.shape[0]
    return lagged(_simulate_svar(W, A, n + p, rng, burn_in, scales), p, pad="drop")


def truths_dbn(seed: int, K: int, d: int, p: int = 1, degree_w: float = 4.0,
               degree_a: float = 1.0, weights: str = "paper", generator: str = "code",
               heterogeneous: bool = False, graph: str = "er"
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The K clients' true (W, A): one shared pair (repeated) or one per client from [seed, k].

    With ``generator="svar"`` the truths come from ``stable_truth``. ``graph``: "er" or "sf".
    """
    if K < 1:
        raise ValueError(f"need K >= 1 clients, got {K}")
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    def draw(s: Seed) -> tuple[np.ndarray, np.ndarray]:
        if generator == "svar":
            return stable_truth(s, d, p, degree_w, degree_a, weights, graph=graph)
        return dbn_truth(s, d, p, degree_w, degree_a, weights, graph=graph)

    if not heterogeneous:
        return [draw(seed)] * K
    return [draw([seed, k]) for k in range(K)]


def federated_dbn(seed: int, K: int, n_k: int, d: int, p: int = 1, degree_w: float = 4.0,
                  degree_a: float = 1.0, weights: str = "paper", generator: str = "code",
                  heterogeneous: bool = False, graph: str = "er",
                  noise_scales: NoiseScales = None
                  ) -> tuple[list[Pair], list[tuple[np.ndarray, np.ndarray]]]:
    """K clients' ``(Xt, Xlag)`` of n_k rows each, and their true (W, A).

    Homogeneous: K n_k rows are simulated once and split into K contiguous blocks.
    Heterogeneous: client k simulates n_k rows from its own truth (seed [seed, k]).
    ``graph``: intra-slice DAG "er" or "sf"; ``noise_scales=(lo, hi)``: per-variable noise sd
    drawn in [lo, hi] from the data seed (heterogeneous clients draw their own).
    """
    if n_k < 1:
        raise ValueError(f"need n_k >= 1 rows per client, got {n_k}")
    truths = truths_dbn(seed, K, d, p, degree_w, degree_a, weights, generator, heterogeneous,
                        graph)
    if heterogeneous:
        clients = [dbn_data(*truths[k], n_k, data_seed([seed, k]), generator,
                            noise_scales=noise_scales) for k in range(K)]
        return clients, truths
    Xt, Xlag = dbn_data(*truths[0], K * n_k, data_seed(seed), generator,
                        noise_scales=noise_scales)
    blocks = [slice(k * n_k, (k + 1) * n_k) for k in range(K)]
    return [(Xt[b].copy(), Xlag[b].copy()) for b in blocks], truths


CACHE_BYTES = 256 * 2**20
"""Largest homogeneous federation (its K n_k rows of ``Xt`` and ``Xlag``) that
:func:`client_dbn` keeps per process; a larger one is simulated again at every call."""


@lru_cache(maxsize=2)
def homogeneous_rows(seed: int, K: int, n_k: int, d: int, p: int = 1, degree_w: float = 4.0,
                     degree_a: float = 1.0, weights: str = "paper", generator: str = "code"
                     ) -> Pair:
    """The K n_k rows ``(Xt, Xlag)`` of a homogeneous federation, simulated once per process
    (read-only; ``federated_dbn``'s blocks are their consecutive slices of n_k rows).

    The series is one SVAR path, so client k's block depends on every earlier row: a client
    cannot draw its own block alone. Kept (the last two federations), every client in the
    process slices its block instead of simulating the whole federation's series again,
    O(K n_k) per process rather than per call.
    """
    truth = truths_dbn(seed, 1, d, p, degree_w, degree_a, weights, generator)[0]
    pair = dbn_data(*truth, K * n_k, data_seed(seed), generator)
    for a in pair:
        a.setflags(write=False)
    return pair


def client_dbn(seed: int, k: int, K: int, n_k: int, d: int, p: int = 1,
               degree_w: float = 4.0, degree_a: float = 1.0, weights: str = "paper",
               generator: str = "code", heterogeneous: bool = False) -> Pair:
    """Client k's ``(Xt, Xlag)``, equal to ``federated_dbn(...)[0][k]``."""
    if not 0 <= k < K:
        raise ValueError(f"client index k={k} outside 0..{K - 1}")
    if n_k < 1:
        raise ValueError(f"need n_k >= 1 rows per client, got {n_k}")
    if not heterogeneous:
        if K * n_k * (p + 1) * d * 8 > CACHE_BYTES:  # too large to keep: simulate it again
            clients, _ = federated_dbn(seed, K, n_k, d, p, degree_w, degree_a, weights,
                                       generator)
            return clients[k]
        Xt, Xlag = homogeneous_rows(seed, K, n_k, d, p, degree_w, degree_a, weights, generator)
        block = slice(k * n_k, (k + 1) * n_k)
        return Xt[block].copy(), Xlag[block].copy()
    draw = stable_truth if generator == "svar" else dbn_truth
    W, A = draw([seed, k], d, p, degree_w, degree_a, weights)
    return dbn_data(W, A, n_k, data_seed([seed, k]), generator)
