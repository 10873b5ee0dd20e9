"""Edge confidence from replicas: row halves, selection frequencies, the stability bound.

A run with R replicas fits the protocol on R subsamples of every client's rows besides the
ordinary fit on all of them. Replicas ``2i - 1`` and ``2i`` are the two halves of one random
split of the rows (complementary pairs, Shah & Samworth 2013). An edge's *frequency* is the
share of replicas whose thresholded graph holds it; the *stable set* at threshold ``pi`` is the
edges with frequency >= pi. Under Meinshausen & Buhlmann's (2010) conditions (the selection
of the false edges is exchangeable and no worse than random guessing), the expected number
of false edges in the stable set is at most ``q^2 / ((2 pi - 1) p)``, with ``q`` the mean
number of edges a replica selects and ``p`` the number of candidate edges (Theorem 1 there;
Shah & Samworth show the same bound holds for complementary pairs). :func:`edge_stability`
is the one confidence result of every family (a family supplies only each replica's selected
graph), :func:`one_standard_error` the one penalty choice (from :func:`holdout_score`).

Pure numpy: no I/O, no Flower.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def complementary_halves(n: int, r: int, seed: int) -> np.ndarray:
    """Sorted row indices of replica ``r >= 1`` of ``n`` rows: replicas ``2i - 1`` and ``2i``
    are the first and second half of the permutation drawn from ``(seed, i)`` (an odd ``n``
    leaves one row out of both)."""
    if r < 1:
        raise ValueError(f"replica index must be >= 1 (0 is the fit on all rows), got {r}")
    if n < 2:
        raise ValueError(f"need at least 2 rows to halve, got {n}")
    pair = (r - 1) // 2
    perm = np.random.default_rng([int(seed), pair]).permutation(n)
    half = n // 2
    return np.sort(perm[:half] if r % 2 == 1 else perm[half:2 * half])


def selection_frequency(graphs: np.ndarray, tau: float) -> np.ndarray:
    """Share of the replicas ``graphs`` (R x ...) with ``|entry| >= tau`` (and non-zero)."""
    g = np.abs(np.asarray(graphs, dtype=float))
    if g.ndim < 1 or g.shape[0] == 0:
        raise ValueError("need at least one replica")
    return np.mean((g >= tau) & (g > 0), axis=0)


def stability_bound(q: float, p: int, pi: float) -> float:
    """Meinshausen-Buhlmann bound q^2 / ((2 pi - 1) p) on the expected false edges at
    threshold ``pi`` in (1/2, 1]."""
    if not 0.5 < pi <= 1.0:
        raise ValueError(f"stability threshold must be in (0.5, 1], got {pi}")
    if p <= 0:
        raise ValueError(f"need a positive number of candidate edges, got {p}")
    return float(q) ** 2 / ((2.0 * pi - 1.0) * p)



@dataclass(frozen=True)
class EdgeStability:
    """The confidence of a stack of replicas' selected graphs (one result for every family).

    ``frequency`` is each entry's share of replicas that select it, ``stable`` the candidate
    entries with frequency >= ``threshold`` (pi), ``mean_selected`` q the mean number of
    candidates a replica selects, ``candidates`` p their number and ``false_edge_bound`` the
    Meinshausen-Buhlmann bound q^2 / ((2 pi - 1) p) on the expected false edges in the stable
    set (:func:`stability_bound`).
    """

    frequency: np.ndarray
    stable: np.ndarray
    replicas: int
    threshold: float
    candidates: int
    mean_selected: float
    false_edge_bound: float

    def summary(self) -> dict[str, float]:
        """``replicas``, ``threshold``, ``candidates``, ``mean_selected``,
        ``false_edge_bound`` and ``stable_edges``: a run's ``metrics["stability"]``."""
        return {"replicas": self.replicas, "threshold": self.threshold,
                "candidates": self.candidates, "mean_selected": self.mean_selected,
                "false_edge_bound": self.false_edge_bound,
                "stable_edges": int(np.sum(self.stable))}


def edge_stability(selected: np.ndarray, pi: float, candidates: np.ndarray | None = None
                   ) -> EdgeStability:
    """:class:`EdgeStability` of ``selected`` (R x ...: whether replica r's graph holds each
    entry, the one thing a family supplies) at threshold ``pi``; ``candidates`` (same shape as
    one graph, default all): the entries that count as candidate edges (e.g. no self-loops)."""
    sel = np.asarray(selected, dtype=bool)
    if sel.ndim < 1 or sel.shape[0] == 0:
        raise ValueError("need at least one replica")
    cand = (np.ones(sel.shape[1:], dtype=bool) if candidates is None
            else np.asarray(candidates, dtype=bool))
    freq = np.mean(sel, axis=0)
    q = float(np.mean(np.sum(sel & cand, axis=tuple(range(1, sel.ndim)))))
    p = int(np.sum(cand))
    return EdgeStability(frequency=freq, stable=(freq >= pi) & cand, replicas=len(sel),
                         threshold=float(pi), candidates=p, mean_selected=q,
                         false_edge_bound=stability_bound(q, p, pi))


def holdout_score(losses: Mapping[int, np.ndarray], n_val: Mapping[int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Pooled held-out loss L = sum_k w_k l_k (w_k = n_k / sum n) over the clients that
    reported, and its standard error sqrt(sum_k w_k (l_k - L)^2 / (K - 1))."""
    ids = sorted(losses)
    if not ids:
        raise ValueError("no client reported held-out losses")
    w = np.array([float(n_val[k]) for k in ids])
    w = w / w.sum()
    L = np.stack([np.asarray(losses[k], dtype=float) for k in ids])
    mean = np.tensordot(w, L, axes=1)
    var = np.tensordot(w, (L - mean) ** 2, axes=1)
    return mean, np.sqrt(var / max(len(ids) - 1, 1))


def one_standard_error(mean: np.ndarray, se: np.ndarray, edges: np.ndarray
                       ) -> tuple[int, int]:
    """``(lambda, tau)`` by the one-standard-error rule: among the candidates whose score is
    within one standard error of the lowest, the one with the fewest edges (ties: the first,
    the larger lambda and the smaller tau as the paths are ordered)."""
    g, t = np.unravel_index(int(np.nanargmin(mean)), mean.shape)
    ok = mean <= mean[g, t] + se[g, t]
    i = int(np.argmin(np.where(ok, np.asarray(edges, dtype=float), np.inf)))
    return divmod(i, mean.shape[1])
