"""Graph-recovery metrics (FDBNL / PFDBNL, and the real-data tables of every family).

Estimates are binarized with ``est != 0`` (threshold first), truths with ``truth != 0``;
``M[i, j] != 0`` means i -> j. W (d x d) and A (pd x d) are scored separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _ratio(num: int, den: int) -> float:
    return float(num) / den if den else 0.0


def _binary_pair(est: np.ndarray, truth: np.ndarray, ignore_diagonal: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    E, T = np.asarray(est) != 0, np.asarray(truth) != 0
    if E.shape != T.shape or E.ndim != 2:
        raise ValueError(f"est {E.shape} and truth {T.shape} must be 2-D of the same shape")
    if ignore_diagonal:
        off = ~np.eye(*E.shape, dtype=bool)
        E, T = E & off, T & off
    return E, T


def graph_metrics(est: np.ndarray, truth: np.ndarray, *, ignore_diagonal: bool = False
                  ) -> dict[str, float]:
    """Edge-recovery metrics of a binarized estimate against the truth.

    Returns
    -------
    dict with ``shd`` (FP + FN, the official code: a reversed edge counts 2), ``shd_rev1``
    (missing + extra + reversed, the paper: a reversed edge counts 1; equal to ``shd`` for
    rectangular matrices such as A), ``tpr`` = TP / (TP + FN), ``fdr`` = FP / (TP + FP),
    ``precision`` = TP / (TP + FP) (each 0 when its denominator is 0) and ``nnz`` (estimated
    edges). ``ignore_diagonal`` drops self-loops from both matrices.
    """
    E, T = _binary_pair(est, truth, ignore_diagonal)
    tp, fp, fn = int(np.sum(E & T)), int(np.sum(E & ~T)), int(np.sum(~E & T))
    shd = fp + fn
    reversed_ = 0
    if E.shape[0] == E.shape[1]:
        # i -> j estimated, j -> i true, and neither reverse edge present: one error, not two.
        reversed_ = int(np.sum(E & ~E.T & T.T & ~T))
    return {"shd": shd, "shd_rev1": shd - reversed_, "tpr": _ratio(tp, tp + fn),
            "fdr": _ratio(fp, tp + fp), "precision": _ratio(tp, tp + fp), "nnz": int(E.sum())}


def swapped_rates(est: np.ndarray, truth: np.ndarray, *, ignore_diagonal: bool = False
                  ) -> dict[str, float]:
    """The "TPR"/"FDR" that the paper's PFDBNL tables print (not the true TPR/FDR).

    The official demos call ``mea_acc(est, truth)`` with the arguments swapped, so their
    "TPR" is precision and their "FDR" is 1 - recall (0 when the estimate, respectively the
    truth, has no edges). Report these beside the true ``tpr``/``fdr`` of ``graph_metrics``.
    """
    m = graph_metrics(truth, est, ignore_diagonal=ignore_diagonal)
    return {"tpr": m["tpr"], "fdr": m["fdr"]}


def score_auc(scores: np.ndarray, truth: np.ndarray, *, mask: np.ndarray | None = None
              ) -> dict[str, float]:
    """AUROC and AUPR of continuous scores ``|scores|`` against the 0/1 truth.

    ``mask`` selects the entries scored; by default the off-diagonal ones of a square matrix
    (DREAM4 protocol) and all of a rectangular one. Pass ``np.ones_like(truth, bool)`` and a
    binarized estimate for the official fMRI score. Both values are NaN when the selected
    truth has a single class.
    """
    S, T = np.abs(np.asarray(scores, dtype=float)), np.asarray(truth) != 0
    if S.shape != T.shape:
        raise ValueError(f"scores {S.shape} and truth {T.shape} must have the same shape")
    if mask is None:
        mask = ~np.eye(*T.shape, dtype=bool) if T.ndim == 2 and T.shape[0] == T.shape[1] \
            else np.ones(T.shape, dtype=bool)
    mask = np.asarray(mask, dtype=bool)
    y, s = T[mask], S[mask]
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN/inf")
    if y.all() or not y.any():
        return {"auroc": float("nan"), "aupr": float("nan")}
    from sklearn.metrics import average_precision_score, roc_auc_score  # server side: lazy

    return {"auroc": float(roc_auc_score(y, s)), "aupr": float(average_precision_score(y, s))}


def orientation_share(scores: np.ndarray, truth: np.ndarray) -> float:
    """Of the true edges i -> j, the share whose score outscores its reverse: ``|s[i, j]| >
    |s[j, i]|`` counts 1, a tie 1/2 (so a symmetric score gives 0.5 and ranks nothing).

    Measures direction apart from the skeleton, which the ordered-pair AUROC of
    :func:`score_auc` barely charges for on sparse graphs. Pairs true in both directions and
    the diagonal are left out (neither direction is wrong). ``M[i, j]`` is i -> j in both
    matrices; for a lag-1 score (source at t-1, target at t) pass the lag's d x d block.

    Returns
    -------
    float
        The share, NaN when the truth has no edge in one direction only.
    """
    S, T = np.abs(np.asarray(scores, dtype=float)), np.asarray(truth) != 0
    if S.shape != T.shape or S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"scores {S.shape} and truth {T.shape} must be square, same shape")
    if not np.isfinite(S).all():
        raise ValueError("scores contain NaN/inf")
    one_way = T & ~T.T & ~np.eye(*T.shape, dtype=bool)
    if not one_way.any():
        return float("nan")
    fwd, rev = S[one_way], S.T[one_way]
    return float(np.mean((fwd > rev) + 0.5 * (fwd == rev)))


def edge_f1(est: np.ndarray, truth: np.ndarray, *, ignore_diagonal: bool = True) -> float:
    """F1 of the directed edges of a binarized estimate (``est != 0``) against the truth:
    2 TP / (2 TP + FP + FN), a reversed edge one FP and one FN (0 when both are empty)."""
    E, T = _binary_pair(est, truth, ignore_diagonal)
    tp, fp, fn = int(np.sum(E & T)), int(np.sum(E & ~T)), int(np.sum(~E & T))
    return _ratio(2 * tp, 2 * tp + fp + fn)


def is_dag(W: np.ndarray) -> bool:
    """True when the graph ``W != 0`` (square) has no directed cycle, self-loops included."""
    B = np.asarray(W) != 0
    if B.ndim != 2 or B.shape[0] != B.shape[1]:
        raise ValueError(f"W must be square, got shape {B.shape}")
    alive = np.ones(B.shape[0], dtype=bool)
    while alive.any():
        sources = alive & ~B[alive].any(axis=0)  # no incoming edge from a live node
        if not sources.any():
            return False
        alive &= ~sources
    return True


def mean_metrics(metrics: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Key-wise mean of metric dicts (e.g. mSHD/mTPR/mFDR over clients or seeds)."""
    if not metrics:
        raise ValueError("no metrics to average")
    keys = list(metrics[0])
    if any(set(m) != set(keys) for m in metrics):
        raise ValueError("metric dicts have different keys")
    return {k: float(np.mean([m[k] for m in metrics])) for k in keys}


def summary_scores(est: Mapping[str, Any], T: np.ndarray) -> dict[str, float]:
    """A summary graph's scores against the 0/1 truth ``T``: ranking AUROC/AUPR of
    ``est["score"]`` (off-diagonal ordered pairs), orientation share, SHD/TPR/FDR/F1 of
    ``est["graph"]``; variables after the truth's (context variables) are not scored."""
    T = np.asarray(T) != 0
    d0 = len(T)  # variables with a truth (context variables after them are not scored)
    S = np.asarray(est["score"], float)[:d0, :d0]
    G = np.asarray(est["graph"], int)[:d0, :d0]
    T = T & ~np.eye(len(T), dtype=bool)
    out = dict(score_auc(S, T))
    out["orientation"] = orientation_share(S, T)
    Gd = G & ~np.eye(len(G), dtype=bool)
    m = graph_metrics(Gd, T, ignore_diagonal=True)
    out.update({"shd": m["shd_rev1"], "tpr": m["tpr"], "fdr": m["fdr"], "f1": edge_f1(Gd, T)})
    return out
