"""FedPC's server computations on pooled moments: the lagged window and its time tiers, the
search, the orientation, and the summary graph with its ranking scores and p-values.

Columns of the window are the variables at lag 0, then at lag 1, ..., lag p (``x``, ``x@1``,
...). Edges point into lag 0 only (time tiers: the past causes the present); lagged pairs are
never tested (a stationary process repeats the present's structure there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.constraint import model, search
from fedcausal_flwr.constraint.settings import FedPCSettings
from fedcausal_flwr.knowledge import Masks


def window_names(names: list[str], p: int) -> list[str]:
    """Names of the window's columns: ``names``, then ``name@1`` ... ``name@p``."""
    return [*names, *(f"{n}@{k}" for k in range(1, p + 1) for n in names)]


def allowed(d: int, p: int, masks: Masks | None = None) -> np.ndarray:
    """``A[a, b]``: whether window column a may cause column b (b at lag 0, a not forbidden)."""
    m = d * (p + 1)
    A = np.zeros((m, m), bool)
    A[:, :d] = True
    np.fill_diagonal(A, False)
    if masks is not None:
        A[:d, :d] &= ~masks.forbid_W
        if p:
            A[d:, :d] &= ~masks.forbid_A
    return A


def required(d: int, p: int, masks: Masks | None = None) -> np.ndarray:
    """``Q[a, b]``: the edges knowledge requires, on the window."""
    m = d * (p + 1)
    Q = np.zeros((m, m), bool)
    if masks is not None:
        Q[:d, :d] = masks.require_W
        if p:
            Q[d:, :d] = masks.require_A
    return Q


@dataclass
class Structure:
    """What the search found on the window: the skeleton, the graph (endpoint matrix) and the
    contemporaneous edges still to orient by the likelihood ratio."""

    skeleton: search.Skeleton
    graph: np.ndarray
    to_orient: np.ndarray
    d: int
    p: int


def structure(m: model.Moments, s: FedPCSettings, d: int, masks: Masks | None = None
              ) -> Structure:
    """The PC search on the pooled moments ``m`` of the window (``d`` variables, ``s.lags``)."""
    p = s.lags
    R = model.correlation(m)
    A, Q = allowed(d, p, masks), required(d, p, masks)

    def test(i: int, j: int, S: tuple[int, ...]) -> tuple[float, float]:
        if Q[i, j] or Q[j, i]:
            return 1.0, 0.0  # a required edge is never removed
        return model.ci_test(R, m.n, i, j, S, s.test)

    sk = search.skeleton(len(R), test, s.alpha, allowed=A | A.T,
                         max_depth=None if s.max_depth < 0 else s.max_depth)
    F = ~A & ~np.eye(len(R), dtype=bool)
    G = search.pc_graph(sk, F, Q) if s.orientation != "likelihood-ratio" else \
        _time_oriented(sk.adjacent.astype(int), d)
    G = _time_oriented(G, d)
    und = (G[:d, :d] == 1) & (G[:d, :d].T == 1)
    if s.orientation == "likelihood-ratio":
        und = (sk.adjacent[:d, :d]) & ~Q[:d, :d] & ~Q[:d, :d].T
    if s.orientation == "pc":
        und = np.zeros_like(und)
    return Structure(sk, G, und, d, p)


def _time_oriented(G: np.ndarray, d: int) -> np.ndarray:
    """Every edge between a lag and lag 0 pointing into lag 0."""
    G = np.array(G, int)
    adj = (G + G.T) > 0
    G[:, d:] = 0
    G[d:, :d] = adj[d:, :d].astype(int)
    return G


def ratio_inputs(m: model.Moments, d: int, p: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B, intercept, sd)`` of the regression of lag 0 on the lags (none when p = 0), from
    the pooled moments: what the clients need to standardise their residuals."""
    return model.regression(m, np.arange(d), np.arange(d, d * (p + 1)))


def oriented(st: Structure, R: np.ndarray, forbidden: np.ndarray | None = None) -> np.ndarray:
    """The graph with each edge of ``st.to_orient`` oriented by the sign of the likelihood
    ratio ``R`` (i -> j when R_ij > 0), unless knowledge forbids that direction."""
    G = np.array(st.graph, int)
    d = st.d
    F = np.zeros((d, d), bool) if forbidden is None else np.asarray(forbidden, bool)[:d, :d]
    for i, j in zip(*np.nonzero(np.triu(st.to_orient)), strict=True):
        a, b = (i, j) if R[i, j] > 0 else (j, i)
        if F[a, b] and not F[b, a]:
            a, b = b, a
        if F[a, b]:
            continue
        G[a, b], G[b, a] = 1, 0
    return G


def summary(st: Structure, G: np.ndarray, reverse_weight: float,
            R: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The summary graph over the d variables and its ranking scores.

    ``graph[i, j]`` = 1 when i -> j at some lag (an undirected contemporaneous edge counts
    both ways); ``lagged[k-1, i, j]`` for i -> j at lag k; ``score[i, j]``: the largest
    |partial correlation| at the test that came closest to separating i and j, over lags,
    the direction an oriented contemporaneous edge does not take scaled by
    ``reverse_weight`` (a pair without an edge: the direction the likelihood ratio ``R``
    does not favour, when given); ``p_value[i, j]``: the edge's p-value (largest of its tests; the
    smallest over lags), 1 where never tested.
    """
    d, p, sk = st.d, st.p, st.skeleton
    strength = np.abs(sk.stat)
    directed = (G[:d, :d] == 1) & (G[:d, :d].T == 0)
    und = (G[:d, :d] == 1) & (G[:d, :d].T == 1)
    s0 = strength[:d, :d].copy()
    s0[directed.T] *= reverse_weight
    if R is not None:
        s0[~(directed | directed.T | und) & (R < 0)] *= reverse_weight
    score, pv = s0, sk.p_max[:d, :d].copy()
    graph = (directed | und).astype(int)
    lagged = np.zeros((p, d, d), int)
    for k in range(1, p + 1):
        rows = slice(k * d, (k + 1) * d)
        score = np.maximum(score, strength[rows, :d])
        pv = np.minimum(pv, sk.p_max[rows, :d])
        lagged[k - 1] = (G[rows, :d] == 1).astype(int)
        graph |= lagged[k - 1]
    np.fill_diagonal(score, 0.0)
    return {"graph": graph, "contemporaneous": G[:d, :d].copy(), "lagged": lagged,
            "score": score, "p_value": pv}


def replica_selected(st: Structure, G: np.ndarray, R: np.ndarray | None) -> np.ndarray:
    """Replica ``st``'s summary edges (d x d): a lag-0 adjacency counts in the direction the
    main run took (its graph; a pair it left out: the likelihood ratio's, or both without
    one), a lagged adjacency into lag 0 as it points."""
    d, p = st.d, st.p
    adj = st.skeleton.adjacent
    main = (G[:d, :d] == 1)
    both = main | main.T
    direction = np.where(both, main, True if R is None else R > 0)
    sel = adj[:d, :d] & direction
    for k in range(1, p + 1):
        sel |= adj[k * d:(k + 1) * d, :d]
    return sel & ~np.eye(d, dtype=bool)


def reference(windows: list[np.ndarray], s: FedPCSettings, d: int,
              masks: Masks | None = None) -> dict[str, np.ndarray]:
    """The loop the federation reproduces, on each client's window rows (NaN: missing)."""
    from fedcausal_flwr.stability import complementary_halves

    pooled = model.pooled([model.moments(Z) for Z in windows])
    st = structure(pooled, s, d, masks)
    halves = [structure(model.pooled([
        model.moments(Z[complementary_halves(len(Z), r, s.replica_seed)]) for Z in windows]),
        s, d, masks) for r in range(1, s.replicas + 1)]
    G, R = st.graph, None
    if st.to_orient.any():
        B, c, sd = ratio_inputs(pooled, d, s.lags)
        parts = [model.tanh_moments(model.residuals(Z, B, c, sd, np.arange(d),
                                                    np.arange(d, Z.shape[1])))
                 for Z in windows]
        n = sum(q[0] for q in parts)
        R = model.likelihood_ratio(n, sum(q[1] for q in parts), sum(q[2] for q in parts))
        G = oriented(st, R, None if masks is None else ~allowed(d, s.lags, masks))
    out = summary(st, G, s.reverse_weight, R)
    if halves:
        out["graph_frequency"] = np.mean([replica_selected(h, G, R) for h in halves], axis=0)
    return out
