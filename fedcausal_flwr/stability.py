"""Edge confidence over replicas: selection frequencies and stability selection.

A run carries R replicas of its protocol besides the ordinary run; replica r >= 1 fits the
rows of one half of a random split of the n (aligned) rows, replicas 2i-1 and 2i being the two
halves of split i (complementary pairs, Shah & Samworth 2013, J. R. Stat. Soc. B 75(1)). An
edge's selection frequency is the share of replicas whose thresholded graph holds it; the
stable set keeps the edges selected at least ``pi`` of the time. With q the mean number of
edges a replica selects and p the number of candidate edges, the expected number of false
edges in the stable set is at most ``q^2 / ((2 pi - 1) p)`` for ``pi`` in (1/2, 1]
(Meinshausen & Buhlmann 2010, J. R. Stat. Soc. B 72(4), Thm. 1; Shah & Samworth 2013,
Sec. 3), assuming the false edges' selections are exchangeable and the procedure is not worse
than random guessing. Pure numpy: no Flower, no I/O.
"""

from __future__ import annotations

import numpy as np


def selection_frequency(graphs: np.ndarray, tau: float) -> np.ndarray:
    """Share of the replicas (axis 0 of ``graphs``) whose ``|weight| >= tau`` at each entry.

    Parameters
    ----------
    graphs : array (R, ...)
        One weighted (or binary) graph per replica.
    tau : float
        The selection threshold (a binary graph: any value in (0, 1]).
    """
    g = np.abs(np.asarray(graphs, dtype=float))
    if g.ndim < 1 or len(g) == 0:
        raise ValueError("selection_frequency: need at least one replica (axis 0)")
    return (g >= tau).mean(axis=0)


def stability_bound(q: float, p: int, pi: float) -> float:
    """``q^2 / ((2 pi - 1) p)``: the bound on the expected number of false edges selected
    with frequency >= ``pi`` (Meinshausen & Buhlmann 2010, Thm. 1), ``pi`` in (1/2, 1]."""
    if not 0.5 < pi <= 1.0:
        raise ValueError(f"stability_bound: pi = {pi!r}, need 1/2 < pi <= 1")
    if p < 1:
        raise ValueError(f"stability_bound: p = {p!r} candidate edges, need p >= 1")
    return float(q) ** 2 / ((2.0 * pi - 1.0) * p)


def complementary_halves(n: int, r: int, seed: int) -> np.ndarray:
    """Sorted row indices (of ``0..n-1``) of replica ``r >= 1``: replicas ``2i-1`` and ``2i``
    are the two disjoint halves (``n // 2`` rows each) of the i-th random split, drawn from
    ``seed`` alone, so every party holding the same aligned rows derives the same rows."""
    if r < 1:
        raise ValueError(f"complementary_halves: replica r = {r!r}, need r >= 1 (0 is the "
                         "ordinary run on all rows)")
    if n < 2:
        raise ValueError(f"complementary_halves: n = {n!r} rows, need n >= 2")
    pair = (r + 1) // 2
    tag = int.from_bytes(b"halves", "little")
    perm = np.random.default_rng([int(seed), tag, pair]).permutation(n)
    m = n // 2
    return np.sort(perm[:m] if r % 2 else perm[m:2 * m])
