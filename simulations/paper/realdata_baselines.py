"""Pooled baselines on the rows of the project's real-data protocols (issue 34).

The same rows as the federated runs, pooled in one place (what a scientist who could pool the
data would run), scored with the project's metrics:

- NetSim (Smith et al. 2011), each protocol subject on its own 200 steps: sim3 subjects 1, 3,
  5, 7, 9; sim1 3, 6, 9, 12, 15; sim2 2, 4, 6, 8, 10 (FDBNL's subjects in
  ``fdbnl_netsim.py``); truth ``net != 0`` off the diagonal.
- DREAM4 in-silico size 100, networks 1-5: the 10 replicates of 21 points, lags within each
  replicate; truth the gold standard.
- Sachs, the 853 observational rows (``vertical.data.sachs``), 18-edge truth.

Methods (optional imports: a method whose package is absent is skipped with a message; none is
a runtime dependency of the library):

- ``pcmci+``: tigramite's PCMCI+ with ParCorr, tau_max 1, pc_alpha 0.05 (time series; all
  replicates as one multiple-dataset frame). Ranking score: max over lags 0, 1 of |MCI
  partial correlation|; orientation of that score with the lag-0 part kept only in the
  direction PCMCI+ oriented (``-->``; both ways for ``o-o``/``x-x``); graph: ``-->`` at lag 1
  or 0, an undirected lag-0 link counted as below.
- ``extratrees``: dynGENIE3-style lag-1 ranking: per target j, ExtraTrees (300 trees,
  max_features sqrt, seed 0) regressing x_j(t) on x(t-1) (z-scored), impurity importances as
  the score of i -> j. No graph.
- ``ridge-var``: ridge VAR(1) on z-scored data (alpha 1), |coefficient| as score. No graph.
- ``directlingam``: lingam's DirectLiNGAM on the rows as i.i.d. samples (time ignored), |B| as
  score, its pruned B as graph.
- ``pc``: causal-learn's PC, Fisher z, alpha 0.05, on the rows as i.i.d. samples; graph only
  (the score is the graph: 1 for i -> j, 1/2 both ways for an undirected edge).
- ``dagma``: DAGMA linear (``pip install dagma``), lambda1 0.02, |W| > 0.3 (as
  ``vfedcd_baselines.py``); Sachs only.

Metrics per unit (a subject, a network, Sachs): ranking AUROC and AUPR of the score on the
off-diagonal ordered pairs (``metrics.score_auc``); orientation share (``metrics.
orientation_share``: of the one-way true edges, the share whose direction outscores its
reverse; a symmetric score 0.5), for time series also of the lag-1 score alone; and where a
graph is output SHD (reversed edge 1, ``shd_rev1``) and F1 (``metrics.edge_f1``). A CPDAG's
undirected edges are scored twice: oriented the best way (toward the truth's direction) and the
worst; the table shows the best case. Means ± sample sd over units.

    nice -n 10 python simulations/paper/realdata_baselines.py                 # everything
    python simulations/paper/realdata_baselines.py --data-sets netsim --methods pcmci+ pc
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    Clock,
    fmt,
    log,
    markdown,
    mean_sd,
    parser,
    read_results,
    seed_range,
    settings,
    write_results,
)

from fedcausal_flwr.data.dream4 import load_dream4
from fedcausal_flwr.data.netsim import load_netsim
from fedcausal_flwr.metrics import edge_f1, graph_metrics, orientation_share, score_auc
from fedcausal_flwr.vertical.data import sachs

NAME = "realdata_baselines"
NETSIM_SUBJECTS = {3: [1, 3, 5, 7, 9], 1: [3, 6, 9, 12, 15], 2: [2, 4, 6, 8, 10]}
DREAM4_NETWORKS = [1, 2, 3, 4, 5]
#: method -> the package it needs (skipped with a message when absent)
NEEDS = {"pcmci+": "tigramite", "extratrees": "sklearn", "ridge-var": "sklearn",
         "directlingam": "lingam", "pc": "causallearn", "dagma": "dagma"}
TIME_SERIES = ("pcmci+", "extratrees", "ridge-var", "directlingam", "pc")
IID = ("pc", "directlingam", "dagma")
#: (data set, method) left out unless ``--slow``: PCMCI+ at d = 100 did not finish one DREAM4
#: network in 8 minutes of one contended core
SLOW = {("dream4", "pcmci+")}
ALPHA = 0.05


# ----------------------------------------------------------------------------- data
def units(data_set: str, root: Any) -> list[tuple[str, list[np.ndarray], np.ndarray]]:
    """``(unit, series, truth)``: each unit's series (a list of time x d arrays; Sachs one
    array of i.i.d. rows) and its d x d truth (i -> j, diagonal 0)."""
    out = []
    if data_set.startswith("netsim"):
        sim = int(data_set[-1])
        ts, net = load_netsim(root / "netsim" / f"sim{sim}.mat")
        for s in NETSIM_SUBJECTS[sim]:
            truth = (net[s - 1] != 0).astype(float)
            np.fill_diagonal(truth, 0)
            out.append((f"subject {s}", [np.asarray(ts[s - 1], float)], truth))
    elif data_set == "dream4":
        for i in DREAM4_NETWORKS:
            series, _, truth = load_dream4(root / "dream4" / f"insilico_size100_{i}_timeseries.tsv")
            out.append((f"network {i}", [np.asarray(x, float) for x in series],
                        np.asarray(truth, float)))
    elif data_set == "sachs":
        X, A, _ = sachs(root / "sachs")
        out.append(("sachs", [np.asarray(X, float)], np.asarray(A, float)))
    else:
        raise ValueError(f"unknown data set {data_set!r}")
    return out


def zscored(series: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every series z-scored with the pooled mean and sd of its columns."""
    X = np.vstack(series)
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    return [(x - mu) / sd for x in series]


def lag_pairs(series: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(x(t-1), x(t)) stacked over series, lags within each."""
    return (np.vstack([x[:-1] for x in series]), np.vstack([x[1:] for x in series]))


# ----------------------------------------------------------------------------- methods
# Each returns {"score": d x d, "score_lag1": d x d or None, "score_oriented": d x d or None,
# "graph": d x d 0/1 directed edges or None, "undirected": d x d symmetric bool or None}.
def pcmci_plus(series: Sequence[np.ndarray]) -> dict[str, Any]:
    from tigramite import data_processing as pp
    from tigramite.independence_tests.parcorr import ParCorr
    from tigramite.pcmci import PCMCI

    frame = (pp.DataFrame(series[0]) if len(series) == 1 else
             pp.DataFrame({k: x for k, x in enumerate(series)}, analysis_mode="multiple"))
    res = PCMCI(dataframe=frame, cond_ind_test=ParCorr(), verbosity=0).run_pcmciplus(
        tau_min=0, tau_max=1, pc_alpha=ALPHA)
    val, g = np.abs(res["val_matrix"]), res["graph"]  # [i, j, tau]: i(t - tau) -> j(t)
    d = val.shape[0]
    kept0 = np.isin(g[:, :, 0], ["-->", "o-o", "x-x"])  # lag 0 not pointing into i
    lag1 = val[:, :, 1]
    directed = (g[:, :, 1] == "-->") | (g[:, :, 0] == "-->")
    undirected = np.isin(g[:, :, 0], ["o-o", "x-x"])
    off = ~np.eye(d, dtype=bool)
    return {"score": np.maximum(val[:, :, 0], lag1), "score_lag1": lag1,
            "score_oriented": np.maximum(np.where(kept0, val[:, :, 0], 0.0), lag1),
            "graph": (directed & off & ~undirected).astype(float),
            "undirected": undirected & off}


def extratrees(series: Sequence[np.ndarray]) -> dict[str, Any]:
    from sklearn.ensemble import ExtraTreesRegressor

    X, Y = lag_pairs(zscored(series))
    d = X.shape[1]
    S = np.zeros((d, d))
    for j in range(d):
        et = ExtraTreesRegressor(n_estimators=300, max_features="sqrt", random_state=0,
                                 n_jobs=1).fit(X, Y[:, j])
        S[:, j] = et.feature_importances_
    return {"score": S, "score_lag1": S}


def ridge_var(series: Sequence[np.ndarray]) -> dict[str, Any]:
    from sklearn.linear_model import Ridge

    X, Y = lag_pairs(zscored(series))
    S = np.abs(Ridge(alpha=1.0).fit(X, Y).coef_.T)  # coef_[j, i]: i(t-1) -> j(t)
    return {"score": S, "score_lag1": S}


def directlingam(series: Sequence[np.ndarray]) -> dict[str, Any]:
    import lingam

    X = np.vstack(zscored(series))
    B = lingam.DirectLiNGAM(random_state=0).fit(X).adjacency_matrix_  # B[i, j]: j -> i
    S = np.abs(B).T
    return {"score": S, "graph": (S != 0).astype(float)}


def pc(series: Sequence[np.ndarray]) -> dict[str, Any]:
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    X = np.vstack(zscored(series))
    G = cl_pc(X, alpha=ALPHA, indep_test="fisherz", show_progress=False).G.graph
    # causal-learn: G[i, j] = -1 and G[j, i] = 1 is i -> j; -1/-1 undirected; 1/1 bidirected
    directed = (G == -1) & (G.T == 1)
    undirected = (G == -1) & (G.T == -1)
    score = directed + 0.5 * undirected
    return {"score": score.astype(float), "graph": directed.astype(float),
            "undirected": undirected}


def dagma(series: Sequence[np.ndarray]) -> dict[str, Any]:
    from dagma.linear import DagmaLinear

    W = DagmaLinear(loss_type="l2").fit(np.vstack(zscored(series)), lambda1=0.02)
    return {"score": np.abs(W), "graph": (np.abs(W) > 0.3).astype(float)}


METHODS: dict[str, Callable[[Sequence[np.ndarray]], dict[str, Any]]] = {
    "pcmci+": pcmci_plus, "extratrees": extratrees, "ridge-var": ridge_var,
    "directlingam": directlingam, "pc": pc, "dagma": dagma}


# ----------------------------------------------------------------------------- scoring
def oriented(graph: np.ndarray, undirected: np.ndarray | None, truth: np.ndarray,
             best: bool) -> np.ndarray:
    """``graph`` with each undirected edge oriented the best way (toward a one-way true edge,
    else i < j) or the worst (against it)."""
    G = np.asarray(graph, float).copy()
    if undirected is None:
        return G
    T = truth != 0
    for i, j in zip(*np.nonzero(np.triu(undirected, 1)), strict=True):
        forward = T[i, j] or not T[j, i]
        if not best:
            forward = not forward if T[i, j] != T[j, i] else forward
        G[i, j], G[j, i] = (1.0, 0.0) if forward else (0.0, 1.0)
    return G


def scores(out: dict[str, Any], truth: np.ndarray) -> dict[str, Any]:
    """Ranking AUROC/AUPR, orientation shares and, with a graph, SHD/F1 (best/worst case)."""
    row: dict[str, Any] = dict(score_auc(out["score"], truth))
    row["orientation"] = orientation_share(out.get("score_oriented", out["score"])
                                           if out.get("score_oriented") is not None
                                           else out["score"], truth)
    if out.get("score_lag1") is not None:
        row["orientation_lag1"] = orientation_share(out["score_lag1"], truth)
    if out.get("graph") is not None:
        und = out.get("undirected")
        for case in ("best", "worst"):
            G = oriented(out["graph"], und, truth, case == "best")
            m = graph_metrics(G, truth, ignore_diagonal=True)
            row[f"shd_{case}"] = m["shd_rev1"]
            row[f"f1_{case}"] = edge_f1(G, truth)
            row["nnz"] = m["nnz"]
        row["undirected"] = 0 if und is None else int(np.triu(und, 1).sum())
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and sample sd of every numeric metric over the units."""
    keys = [k for k in rows[0] if k != "unit" and isinstance(rows[0][k], int | float)]
    return {k: mean_sd(r[k] for r in rows if r.get(k) is not None
                       and np.isfinite(r[k])) for k in keys}


def main() -> None:
    ap = parser(__doc__, data=True)
    ap.add_argument("--data-sets", nargs="+", default=["netsim3", "netsim1", "netsim2",
                                                       "sachs", "dream4"],
                    choices=["netsim1", "netsim2", "netsim3", "dream4", "sachs"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--slow", action="store_true",
                    help=f"also {', '.join(f'{m} on {d}' for d, m in sorted(SLOW))}")
    args = ap.parse_args()
    if args.quick:
        args.data_sets = ["netsim1"]
    warnings.filterwarnings("ignore")
    clock = Clock()
    missing = {m for m in args.methods if importlib.util.find_spec(NEEDS[m]) is None}
    pip = {"causallearn": "causal-learn", "sklearn": "scikit-learn"}
    for m in sorted(missing):
        log(f"{m}: skipped, {NEEDS[m]} is not installed "
            f"(pip install {pip.get(NEEDS[m], NEEDS[m])})")
    results: dict[str, dict[str, Any]] = {}
    for ds in args.data_sets:
        methods = [m for m in args.methods if m not in missing
                   and m in (IID if ds == "sachs" else TIME_SERIES)
                   and (args.slow or (ds, m) not in SLOW)]
        for m in args.methods:
            if (ds, m) in SLOW and not args.slow:
                log(f"{ds} {m}: left out (slow; --slow runs it)")
        data = units(ds, args.data)
        results[ds] = {}
        for m in methods:
            rows = []
            for unit, series, truth in data:
                t = Clock()
                rows.append({"unit": unit, **scores(METHODS[m](series), truth),
                             "seconds": t()})
                log(f"  {ds} {m} {unit}: " + " ".join(
                    f"{k} {v:.3f}" for k, v in rows[-1].items()
                    if k != "unit" and isinstance(v, float)))
            results[ds][m] = {"per_unit": rows, "mean_sd": summarize(rows)}
    log("\n" + baseline_table(results))
    path = write_results(NAME, {"settings": settings(args), "alpha": ALPHA,
                                "subjects": NETSIM_SUBJECTS, "networks": DREAM4_NETWORKS,
                                "skipped": sorted(missing), "results": results,
                                "elapsed_s": clock()}, args.out)
    log(f"wrote {path} ({clock():.0f}s)")


# ----------------------------------------------------------------------------- tables
DATA_LABEL = {"netsim3": "NetSim sim3 (d 15)", "netsim1": "NetSim sim1 (d 5)",
              "netsim2": "NetSim sim2 (d 10)", "dream4": "DREAM4 size 100",
              "sachs": "Sachs (853 obs. rows)"}
HEADERS = ["data", "method", "where", "ranking AUROC", "AUPR", "orientation",
           "orientation, lag 1", "SHD", "F1"]


def _cells(ms: dict[str, Any]) -> list[str]:
    def c(key: str, digits: int = 3) -> str:
        v = ms.get(key)
        return fmt(*v, digits) if v is not None and v[0] == v[0] else "-"
    return [c("auroc"), c("aupr"), c("orientation"), c("orientation_lag1"),
            c("shd_best", 1), c("f1_best")]


def baseline_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per (data set, pooled method)."""
    rows = []
    for ds, per in results.items():
        for m, r in per.items():
            rows.append([DATA_LABEL[ds], m, "pooled", *_cells(r["mean_sd"])])
    return rows


def _fdbnl_rows() -> list[list[str]]:
    """FDBNL / PFDBNL from today's ``fdbnl_netsim.py`` and ``fdbnl_dream4.py`` JSON."""
    rows = []
    try:
        ns = read_results("fdbnl_netsim")
    except FileNotFoundError:
        ns = None
    for sim in (3, 1, 2):
        for m in ("FDBNL", "PFDBNL"):
            per = (ns or {}).get("per_subject", {}).get(str(sim), {}).get(m)
            if not per or "orientation" not in per[0]:
                continue
            ms = {k: mean_sd(r[src] for r in per) for k, src in
                  (("auroc", "auroc_continuous"), ("aupr", "aupr_continuous"),
                   ("orientation", "orientation"), ("orientation_lag1", "orientation_lag1"),
                   ("shd_best", "shd"), ("f1_best", "f1")) if src in per[0]}
            rows.append([DATA_LABEL[f"netsim{sim}"], m, "federated K 5", *_cells(ms)])
    try:
        d4 = read_results("fdbnl_dream4")["per_network"]["FDBNL"]
    except (FileNotFoundError, KeyError):
        d4 = None
    if d4 and "orientation" in next(iter(d4.values())):
        ms = {k: mean_sd(r[k] for r in d4.values())
              for k in ("auroc", "aupr", "orientation", "orientation_lag1")}
        rows.append([DATA_LABEL["dream4"], "FDBNL", "federated K 5", *_cells(ms)])
    return rows


def _vfedcd_rows() -> list[list[str]]:
    """VFedCD on Sachs with the App's defaults (``vfedcd_table1.py --d sachs --preset fast
    --transform yeo-johnson --summary results/vfedcd_sachs_realdata.json``), when present."""
    try:
        r = read_results("vfedcd_sachs_realdata")
    except FileNotFoundError:
        return []
    runs = r["summary"][0]["runs"]
    ms = {k: mean_sd(x[src] for x in runs) for k, src in
          (("auroc", "auroc"), ("aupr", "aupr"), ("orientation", "orientation"),
           ("shd_best", "shd"), ("f1_best", "f1"))}
    seeds = seed_range(r["settings"]["seeds"])
    return [[DATA_LABEL["sachs"], f"VFedCD (App defaults, seeds {seeds})", "federated K 3",
             *_cells(ms)]]


#: the federated rows of the real-data table: each a function returning table rows from its
#: script's JSON (none when not yet run). A new federated algorithm (e.g. ``fedpc``,
#: ``fedpcmci``, a tree method) adds one function here that reads its script's results.
FEDERATED_ROWS: list[Callable[[], list[list[str]]]] = [_fdbnl_rows, _vfedcd_rows]


def baseline_table(results: dict[str, Any] | None = None) -> str:
    """The real-data table: federated rows (today's code) and pooled baselines, same rows."""
    if results is None:
        results = read_results(NAME)["results"]
    fed = [row for f in FEDERATED_ROWS for row in f()]
    order = list(DATA_LABEL.values())
    rows = sorted(fed + baseline_rows(results),
                  key=lambda r: (order.index(r[0]), r[2] == "pooled"))
    return markdown(HEADERS, rows)


TABLES = {"realdata_baselines": baseline_table}


if __name__ == "__main__":
    main()
