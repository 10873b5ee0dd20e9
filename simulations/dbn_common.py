"""Shared helpers of the FDBNL / PFDBNL scripts (``simulations/paper|studies/fdbnl_*.py``).

Tables print the paper's value beside ours (mean ± sd over seeds or data sets) with a marker:

- ``PASS``: inside the spec's acceptance tolerance (spec section 6, or the brief's check);
- ``WORSE``: outside it, on the unfavourable side;
- ``BETTER``: outside it, on the favourable side (e.g. an SHD lower than the paper's by more
  than the tolerance);
- ``info``: no acceptance check is attached to that cell.

Every script writes its numbers to ``simulations/results/<name>.json``; the command line,
the JSON and the table printing are ``harness.py``'s, shared with every script here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from harness import (  # noqa: F401 - the fdbnl_* scripts import these from here
    DEFAULT_DATA,
    RESULTS_DIR,
    SIM_DIR,
    Clock,
    check,
    finish,
    fmt,
    log,
    mean_sd,
    parser,
    settings,
    table,
    verdict,
    write_results,
)

from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
from fedcausal_flwr.dbn.model import Moments, dynotears, moments, threshold

TAU = 0.3  # spec 5 #10: FDBNL / PFDBNL simulation thresholds tau_w = tau_a = 0.3
BASELINE_LAMBDA = 0.1  # spec 5 #15: DYNOTEARS lambda of the baselines (causalnex default)


# ----------------------------------------------------------------------------- DBN helpers
def client_moments(clients: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Moments]:
    return [moments(Xt, Xlag) for Xt, Xlag in clients]


def pooled_moments(moms: Sequence[Moments], sizes: Sequence[int]) -> Moments:
    """Moments of the stacked data: the clients' (S, M, N) weighted by n_k / n."""
    w = np.asarray(sizes, dtype=float) / float(np.sum(sizes))
    return tuple(sum(wk * m[i] for wk, m in zip(w, moms, strict=True))  # type: ignore[return-value]
                 for i in range(3))


def graph_scores(W: np.ndarray, A: np.ndarray, truth: tuple[np.ndarray, np.ndarray],
                 tau_w: float = TAU, tau_a: float = TAU) -> dict[str, float]:
    """SHD/TPR/FDR (+ the paper's swapped pair) of thresholded W and A against one truth."""
    return dbn_graph_metrics(W, A, truth[0], truth[1], tau_w, tau_a)


def client_mean(metrics: Sequence[dict[str, float]]) -> dict[str, float]:
    """Key-wise mean over clients (mSHD, mTPR, mFDR)."""
    return {k: float(np.mean([m[k] for m in metrics])) for k in metrics[0]}


def dynotears_fits(moms: Sequence[Moments], lam: float = BASELINE_LAMBDA
                   ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-client DYNOTEARS fits (unthresholded), the input of Ave and Best."""
    return [dynotears(m, lam, lam) for m in moms]


def ave_from_fits(fits: Sequence[tuple[np.ndarray, np.ndarray]]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's Ave: mean of the clients' weighted W and A (what ``ave_baseline`` returns)."""
    return np.mean([W for W, _ in fits], axis=0), np.mean([A for _, A in fits], axis=0)


def best_from_fits(fits: Sequence[tuple[np.ndarray, np.ndarray]],
                   truth: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """Oracle Best: the W metrics of the client with the lowest SHD(W), the A metrics of the
    client with the lowest SHD(A) (ties: first client)."""
    scores = [graph_scores(W, A, truth) for W, A in fits]
    bw = min(scores, key=lambda m: m["shd_w"])
    ba = min(scores, key=lambda m: m["shd_a"])
    return {k: (bw if k.endswith("_w") else ba)[k] for k in bw}


def baselines(moms: Sequence[Moments], sizes: Sequence[int],
              truth: tuple[np.ndarray, np.ndarray], ave_clients: int | None = None,
              lam: float = BASELINE_LAMBDA) -> dict[str, dict[str, float]]:
    """Ave, Best (oracle) and Alldata metrics of one homogeneous data set (spec 4.3).

    ``ave_clients``: fit Ave/Best on the first m clients only (a time saver, reported as such);
    None uses all K. Each entry carries its wall time in ``seconds``.
    """
    m = len(moms) if ave_clients is None else min(ave_clients, len(moms))
    clock = Clock()
    fits = dynotears_fits(moms[:m], lam)
    t_fits = clock()
    bad = sum(not (np.isfinite(W).all() and np.isfinite(A).all()) for W, A in fits)
    out = {"Ave": {**graph_scores(*ave_from_fits(fits), truth), "seconds": t_fits,
                   "nonfinite_fits": bad},
           "Best": {**best_from_fits(fits, truth), "seconds": t_fits}}
    clock = Clock()
    Wp, Ap = dynotears(pooled_moments(moms, sizes), lam, lam)
    out["Alldata"] = {**graph_scores(Wp, Ap, truth), "seconds": clock()}
    return out


def nnz(M: np.ndarray, tau: float = TAU) -> int:
    return int(np.count_nonzero(threshold(M, tau)))


def summarize(per_seed: Sequence[dict[str, float]], keys: Sequence[str]
              ) -> dict[str, tuple[float, float]]:
    return {k: mean_sd(m[k] for m in per_seed) for k in keys}


def timed(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0
