"""FedTrees' equations: dynGENIE3's importances (Huynh-Thu & Geurts 2018, Eq. 5-6) of a
site's lagged regressions, and their federated average.

For each target j, an ensemble of extremely randomised trees (Geurts et al. 2006) predicts
x_j(t) from the window x(t-1), ..., x(t-p); the importance of input i is the share of the
target's variance its splits remove, summed over the lags (Breiman's mean decrease of
impurity, normalised per target). Importances are unchanged by an affine rescaling of an input
(the random cut points scale with it) and, up to rounding in the choice of a split, of the
target: sites need no common standardisation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def forest_importance(X: np.ndarray, Y: np.ndarray, trees: int, max_features: str,
                      seed: int, min_leaf: int = 1,
                      ids: Sequence[int] | None = None) -> np.ndarray:
    """(m x d): column j the normalised impurity importances of the m inputs ``X`` in an
    extra-trees forest of ``Y[:, j]`` (a constant target: zeros), seeded ``seed + ids[j]``
    (``ids``: the targets' places among the federation's variables; default ``j``)."""
    from sklearn.ensemble import ExtraTreesRegressor

    m, d = X.shape[1], Y.shape[1]
    out = np.zeros((m, d))
    for j in range(d):
        if np.ptp(Y[:, j]) == 0:
            continue
        forest = ExtraTreesRegressor(n_estimators=trees, max_features=_features(max_features),
                                     min_samples_leaf=min_leaf,
                                     random_state=seed + (j if ids is None else int(ids[j])),
                                     n_jobs=1)
        out[:, j] = forest.fit(X, Y[:, j]).feature_importances_
    return out


def _features(name: str) -> str | float | None:
    return None if name == "all" else name


def window_regression(Z: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Y)`` of window rows ``[x_t, x_{t-1}, ..., x_{t-p}]``: the lags and x_t, rows with
    a missing cell dropped."""
    keep = ~np.isnan(Z).any(axis=1)
    return Z[keep, d:], Z[keep, :d]


def summary(importance: np.ndarray, d: int) -> np.ndarray:
    """(d x d) score of i -> j: the importance of i summed over its lags."""
    p = importance.shape[0] // d
    return sum(importance[k * d:(k + 1) * d] for k in range(p))


def placed(importance: np.ndarray, at: Sequence[int], D: int) -> np.ndarray:
    """A site's (d' p x d') importances over its variables at places ``at`` among the
    federation's ``D``, as a (D p x D) array (zero where the site holds no variable), on the
    federation's scale: times d' / D, so that an input of the uniform share 1 / (d' p) of
    the site's inputs has the federation's uniform share 1 / (D p)."""
    at = np.asarray(at, int)
    p = importance.shape[0] // len(at)
    rows = np.concatenate([k * D + at for k in range(p)])
    out = np.zeros((D * p, D))
    out[np.ix_(rows, at)] = importance * (len(at) / D)
    return out


def informed(holds: np.ndarray, p: int) -> np.ndarray:
    """(D p x D) mask of the importances a site holding variables ``holds`` (boolean D)
    informs: its inputs (every lag) into its targets."""
    holds = np.asarray(holds, bool)
    return np.outer(np.tile(holds, p), holds)


def pooled(importances: Sequence[np.ndarray], rows: Sequence[float],
           combine: Callable[[Sequence[np.ndarray]], np.ndarray] | None = None,
           masks: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The sites' importances averaged with their row counts as weights, or by a robust
    centre ``combine`` (unweighted, as robust rules are); each entry over the sites whose
    ``masks`` say they inform it (default: all; an entry no site informs is 0)."""
    if combine is not None:
        if masks is None:
            return combine(list(importances))
        return combine([np.where(m, i, np.nan) for i, m in zip(importances, masks,
                                                               strict=True)])
    w = np.asarray(rows, float)
    if masks is None:
        return np.tensordot(w / w.sum(), np.stack(importances), axes=1)
    M = np.stack(masks).astype(float) * w[:, None, None]
    total = M.sum(axis=0)
    return np.where(total > 0, (M * np.stack(importances)).sum(axis=0)
                    / np.where(total > 0, total, 1.0), 0.0)


def graph(score: np.ndarray, factor: float, inputs: int) -> np.ndarray:
    """0/1 edges whose importance is at least ``factor`` times an input's uniform share
    1 / ``inputs``; no self-loops."""
    G = (score >= factor / inputs).astype(int)
    np.fill_diagonal(G, 0)
    return G


def estimates(importances: Sequence[np.ndarray], rows: Sequence[float], d: int,
              edge_factor: float,
              combine: Callable[[Sequence[np.ndarray]], np.ndarray] | None = None,
              masks: Sequence[np.ndarray] | None = None
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``({"score", "graph", "graph_frequency"}, sites)`` of the sites' importances: the
    pooled ranking, its graph, and each edge's share of the sites informing it whose own
    importances keep it (``sites``: K x d x d, site k's own graph; ``masks``: what each
    site informs, :func:`informed`)."""
    inputs = importances[0].shape[0]
    score = summary(pooled(importances, rows, combine, masks), d)
    sites = np.stack([graph(summary(i, d), edge_factor, inputs) for i in importances])
    if masks is None:
        freq = sites.mean(axis=0)
    else:
        seen = np.stack([summary(m.astype(float), d) > 0 for m in masks])
        k = seen.sum(axis=0)
        freq = np.where(k > 0, (sites * seen).sum(axis=0) / np.maximum(k, 1), 0.0)
    return {"score": score, "graph": graph(score, edge_factor, inputs),
            "graph_frequency": freq}, sites


def reference(windows: Sequence[np.ndarray], d: int, trees: int, max_features: str,
              seed: int, min_leaf: int, edge_factor: float) -> dict[str, np.ndarray]:
    """What a federated run of the sites' window rows ``windows`` returns, without Flower."""
    regs = [window_regression(Z, d) for Z in windows]
    imps = [forest_importance(X, Y, trees, max_features, seed, min_leaf) for X, Y in regs]
    return estimates(imps, [len(X) for X, _ in regs], d, edge_factor)[0]
