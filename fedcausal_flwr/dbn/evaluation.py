"""Scores of learned DBNs against a known truth, as the FDBNL paper's tables report them
(synthetic SHD/TPR/FDR, DREAM4 AUROC/AUPR of |W + sum A|, NetSim binarized AUROC)."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.dbn.model import threshold
from fedcausal_flwr.metrics import graph_metrics, swapped_rates


def dbn_graph_metrics(W: np.ndarray, A: np.ndarray, W_true: np.ndarray, A_true: np.ndarray,
                      tau_w: float, tau_a: float) -> dict[str, float]:
    """SHD/TPR/FDR of thresholded W and A, plus the paper tables' swapped TPR/FDR pair
    (an unidentified entry, NaN, is no edge)."""
    out: dict[str, float] = {}
    for name, est, ref, tau in (("w", W, W_true, tau_w), ("a", A, A_true, tau_a)):
        est = threshold(np.nan_to_num(np.asarray(est, dtype=float)), tau)
        g = graph_metrics(est, ref)
        out.update({f"{k}_{name}": g[k] for k in ("shd", "shd_rev1", "tpr", "fdr")})
        sw = swapped_rates(est, ref)
        out.update({f"paper_tpr_{name}": sw["tpr"], f"paper_fdr_{name}": sw["fdr"]})
    return out


def lag_scores(W: np.ndarray, A: np.ndarray) -> np.ndarray:
    """|W + sum_i A_i|: the continuous edge score of the DREAM4 and NetSim protocols."""
    d = W.shape[0]
    return W + A.reshape(-1, d, d).sum(axis=0)


def netsim_auroc(W: np.ndarray, A: np.ndarray, net: np.ndarray, tau: float) -> float:
    """The official code's NetSim score: AUROC of binarized |W+A| >= tau vs net (diagonal in)."""
    est = (np.abs(lag_scores(W, A)) >= tau).astype(int).ravel()
    ref = (np.asarray(net) != 0).astype(int).ravel()
    from sklearn.metrics import roc_auc_score  # server side: lazy

    return float(roc_auc_score(ref, est))
