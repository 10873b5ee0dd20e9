"""Shared helpers of the FDBNL / PFDBNL reproduction scripts (``simulations/fdbnl_*.py``).

Tables print the paper's value beside ours (mean ± sd over seeds or data sets) with a marker:

- ``PASS``: inside the spec's acceptance tolerance (spec section 6, or the brief's check);
- ``WORSE``: outside it, on the unfavourable side;
- ``BETTER``: outside it, on the favourable side (e.g. an SHD lower than the paper's by more
  than the tolerance);
- ``info``: no acceptance check is attached to that cell.

Every script writes its numbers to ``simulations/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.core.dbn import Moments, dynotears, moments, threshold
from fedcausal_flwr.evaluation import dbn_graph_metrics

SIM_DIR = Path(__file__).resolve().parent
RESULTS_DIR = SIM_DIR / "results"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TAU = 0.3  # spec 5 #10: FDBNL / PFDBNL simulation thresholds tau_w = tau_a = 0.3
BASELINE_LAMBDA = 0.1  # spec 5 #15: DYNOTEARS lambda of the baselines (causalnex default)


# ----------------------------------------------------------------------------- CLI / timing
def parser(description: str, seeds: int, data: bool = False) -> argparse.ArgumentParser:
    """Common flags: ``--seeds N``, ``--quick`` and, for real data, ``--data DIR``."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--seeds", type=int, default=seeds, help="simulated data sets (seeds 0..N-1)")
    ap.add_argument("--quick", action="store_true", help="a much smaller smoke-test run")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON output (default simulations/results/<script>.json)")
    if data:
        ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA,
                        help="data directory holding dream4/ and netsim/")
    return ap


class Clock:
    """Wall-clock since construction, for the elapsed-time lines."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


def log(msg: str) -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- statistics
def mean_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample sd (ddof=1; 0 for a single value), NaN-free input expected."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def fmt(m: float, s: float | None = None, digits: int = 2) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    if s is None:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def verdict(ours: float, paper: float, tol: float, lower_is_better: bool) -> str:
    """PASS within ``paper ± tol``, else BETTER or WORSE by the side it falls on."""
    if abs(ours - paper) <= tol + 1e-12:
        return "PASS"
    better = ours < paper if lower_is_better else ours > paper
    return "BETTER" if better else "WORSE"


def check(ok: bool) -> str:
    return "PASS" if ok else "WORSE"


# ----------------------------------------------------------------------------- tables / JSON
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A fixed-width text table (also valid Markdown when pasted into RESULTS.md)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, width, strict=True)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in width) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        return None if math.isnan(float(x)) else float(x)
    return x


def write_json(name: str, payload: dict, out: Path | None = None) -> Path:
    path = out or RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"script": f"simulations/{name}.py", "argv": sys.argv[1:],
            "python": platform.python_version(), "numpy": np.__version__,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    path.write_text(json.dumps(_jsonable({"meta": meta, **payload}), indent=1) + "\n")
    return path


def finish(name: str, args: argparse.Namespace, clock: Callable[[], float],
           checks: dict[str, str], heading: str, payload: dict) -> Path:
    """Print the acceptance checks and elapsed time, then write the run's JSON; return its path."""
    log(f"\n{heading}")
    for k, v in checks.items():
        log(f"  {v:6s} {k}")
    elapsed = clock()
    log(f"elapsed {elapsed:.0f}s")
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                if k != "out"}
    path = write_json(name, {"settings": settings, **payload, "checks": checks,
                             "elapsed_s": elapsed}, args.out)
    log(f"wrote {path}")
    return path


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
