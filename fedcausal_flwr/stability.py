"""Edge confidence from replicas: row halves, selection frequencies, the stability bound.

A run with R replicas fits the protocol on R subsamples of every client's rows besides the
ordinary fit on all of them. Replicas ``2i - 1`` and ``2i`` are the two halves of one random
split of the rows (complementary pairs, Shah & Samworth 2013). An edge's *frequency* is the
share of replicas whose thresholded graph holds it; the *stable set* at threshold ``pi`` is the
edges with frequency >= pi. Under Meinshausen & Buhlmann's (2010) conditions (the selection
of the false edges is exchangeable and no worse than random guessing), the expected number
of false edges in the stable set is at most ``q^2 / ((2 pi - 1) p)``, with ``q`` the mean
number of edges a replica selects and ``p`` the number of candidate edges (Theorem 1 there;
Shah & Samworth show the same bound holds for complementary pairs).

Pure numpy: no I/O, no Flower.
"""

from __future__ import annotations

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
