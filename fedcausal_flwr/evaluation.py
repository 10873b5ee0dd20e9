"""Server-side evaluation of learned DBNs against a known truth (synthetic, DREAM4, NetSim).

The truth is rebuilt from the run config on the server for scoring only; no client data is
involved. Metrics follow the FDBNL paper's protocols (spec sections 4.2, 4.6, 4.7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from fedcausal_flwr.core.dbn import threshold
from fedcausal_flwr.metrics import graph_metrics, mean_metrics, score_auc, swapped_rates


def dbn_graph_metrics(W: np.ndarray, A: np.ndarray, W_true: np.ndarray, A_true: np.ndarray,
                      tau_w: float, tau_a: float) -> dict[str, float]:
    """SHD/TPR/FDR of thresholded W and A, plus the paper tables' swapped TPR/FDR pair."""
    out: dict[str, float] = {}
    for name, est, ref, tau in (("w", W, W_true, tau_w), ("a", A, A_true, tau_a)):
        est = threshold(est, tau)
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
    return float(roc_auc_score(ref, est))


def client_estimates(est: Mapping[str, np.ndarray], i: int) -> tuple[np.ndarray, np.ndarray]:
    """Client i's personalized (W, A) when the run has them, else the global ones."""
    if "W_local" in est:
        return np.asarray(est["W_local"])[i], np.asarray(est["A_local"])[i]
    return np.asarray(est["W"]), np.asarray(est["A"])


def dbn_evaluator(rc: Mapping[str, Any], tau_w: float, tau_a: float
                  ) -> Callable[[Mapping[str, np.ndarray], Sequence[int]], dict[str, Any]]:
    """``evaluate(estimates, client_ids) -> metrics`` for the run config's data set."""
    from fedcausal_flwr.data.dbn import ground_truth

    kind = str(rc.get("data", "synthetic"))
    cache: dict[int, Any] = {}

    def evaluate(est: Mapping[str, np.ndarray], cids: Sequence[int]) -> dict[str, Any]:
        k = max(cids) + 1
        if k not in cache:
            cache[k] = ground_truth(rc, k)
        truths = cache[k]
        if truths is None:
            return {}
        if kind == "dream4":
            per = [score_auc(lag_scores(*client_estimates(est, i)),
                             truths[min(c, len(truths) - 1)]) for i, c in enumerate(cids)]
        elif kind == "netsim":
            per = [{"auroc": netsim_auroc(*client_estimates(est, i),
                                          truths[min(c, len(truths) - 1)], tau_w)}
                   for i, c in enumerate(cids)]
        else:
            per = [dbn_graph_metrics(*client_estimates(est, i), *truths[c], tau_w, tau_a)
                   for i, c in enumerate(cids)]
        if "W_local" not in est:
            per = per[:1] if kind != "synthetic" else per
        return mean_metrics(per)

    return evaluate
