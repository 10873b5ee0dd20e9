"""FDBNL defaults chosen on development data from several generators (issue 13, item 3).

One default for the Python API and the App: the lambda convention (``lambda_scale`` "pooled":
lambda x K, or "paper": once in the server step), lambda (= lambda_W = lambda_A), the
thresholds tau (= tau_W = tau_A) and the dual step (``dual_update`` "paper": Eq. (4) with
W^(t+1); "code": the official code's W^(t)). phi1 (2.5) and primal_tol stay as chosen in
issue 12 (``fdbnl_rounds.py``). The threshold does not change a run, so every run is scored at
every tau in --taus.

Scenarios (stationary SVAR data, p = 1, paper weights |w| in [0.3, 0.5], 50 rows per
client): ``graph`` ER or scale-free (Barabasi-Albert) intra-slice DAG of mean degree 4;
``noise`` "hom" unit noise or "het" per-variable noise sd in U(0.5, 2); d in {10, 20};
K in {4, 16, 64}. A covering set, not the full product (see SCENARIOS).

Variants: every candidate ``pooled|paper / lambda / dual`` and the official code's settings
profile (``official``: lambda once in the server step, phi1 1.65, dual step with W^(t),
lambda 0.1) on the same data. ``app-data`` (evaluation only, not in the ranks): the App's
default data of ``scripts/main.sh`` (ER, d 10, K 5, 100 rows per client). Scores: SHD(W),
SHD(A) of the thresholded graphs (FP + FN), TPR(W), rounds. The choice: the lowest mean over
scenarios of the per-scenario rank of the mean SHD(W) + SHD(A) (ties: the lowest mean SHD);
a paper-faithful setting (the dual step of Eq. (4)) gives way only to a paired difference in
SHD(W) + SHD(A) over the (scenario, seed) pairs of more than two standard errors.

    python simulations/studies/fdbnl_defaults.py --seeds 100..104 --runs dev.jsonl \\
        --out ..._dev.json
    python simulations/studies/fdbnl_defaults.py --seeds 6000..6009 --variants ...  # evaluation
"""

from __future__ import annotations

import itertools
import time
import warnings
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from dbn_common import Clock, client_moments, fmt, log, mean_sd, parser, settings, table
from harness import append_jsonl, markdown, read_jsonl, read_results, short, write_results

from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
from fedcausal_flwr.dbn.model import FDBNLSettings, fdbnl_reference
from fedcausal_flwr.dbn.synthetic import federated_dbn

NAME = "fdbnl_defaults"
HET_NOISE = (0.5, 2.0)
#: name -> (graph, noise, d, K); 50 rows per client
SCENARIOS: dict[str, tuple[str, str, int, int]] = {
    "er-hom-d10-K4": ("er", "hom", 10, 4),
    "sf-het-d10-K16": ("sf", "het", 10, 16),
    "er-het-d10-K64": ("er", "het", 10, 64),
    "sf-hom-d20-K4": ("sf", "hom", 20, 4),
    "er-hom-d20-K16": ("er", "hom", 20, 16),
    "sf-het-d20-K64": ("sf", "het", 20, 64),
}
N_K = 50
#: the App's default data (scripts/main.sh: d 10, 5 nodes, 100 rows each); not in the choice
APP = "app-data"
APP_SCENARIO, APP_N_K = ("er", "hom", 10, 5), 100
OFFICIAL = {"lambda_scale": "paper", "lambda_w": 0.1, "lambda_a": 0.1, "phi1": 1.65,
            "dual_update": "code"}


def candidates(scales: list[str], lams: list[float], duals: list[str]
               ) -> dict[str, dict[str, Any]]:
    out = {f"{sc}/{lam:g}/{du}": {"lambda_scale": sc, "lambda_w": lam, "lambda_a": lam,
                                  "dual_update": du}
           for sc, lam, du in itertools.product(scales, lams, duals)}
    out["official"] = OFFICIAL
    return out


def run(scenario: str, seed: int, change: dict[str, Any], taus: list[float]) -> dict[str, Any]:
    """One run: rounds, CPU s and the scores at every threshold."""
    graph, noise, d, K = APP_SCENARIO if scenario == APP else SCENARIOS[scenario]
    n_k = APP_N_K if scenario == APP else N_K
    clients, truths = federated_dbn(seed, K, n_k, d, p=1, weights="paper", generator="svar",
                                    graph=graph,
                                    noise_scales=HET_NOISE if noise == "het" else None)
    s = FDBNLSettings().replace(**change)
    t0 = time.process_time()
    st, hist = fdbnl_reference(client_moments(clients), s, seed)
    out: dict[str, Any] = {"rounds": len(hist), "cpu_s": time.process_time() - t0}
    for tau in taus:
        m = dbn_graph_metrics(st.W, st.A, *truths[0], tau, tau)
        out[f"tau {tau:g}"] = {k: float(m[k]) for k in ("shd_w", "shd_a", "tpr_w", "fdr_w")}
    return out


def summarize(done: dict, scenarios: list[str], variants: list[str], seeds: list[int],
              taus: list[float]) -> dict[str, Any]:
    """Per (scenario, variant, tau) means ± sd, and per (variant, tau) the mean rank."""
    cells: dict[str, dict[str, Any]] = {}
    for sc, v, tau in itertools.product(scenarios, variants, taus):
        rs = [done[(sc, s, v)] for s in seeds]
        t = f"tau {tau:g}"
        cells[f"{sc} | {v} | {t}"] = {
            "scenario": sc, "variant": v, "tau": tau,
            **{k: mean_sd(r[t][k] for r in rs) for k in ("shd_w", "shd_a", "tpr_w")},
            "shd": mean_sd(r[t]["shd_w"] + r[t]["shd_a"] for r in rs),
            "rounds": mean_sd(r["rounds"] for r in rs)}
    ranks: dict[str, list[float]] = {}
    for sc in scenarios:
        keys = [k for k, c in cells.items() if c["scenario"] == sc]
        vals = np.array([cells[k]["shd"][0] for k in keys])
        order = vals.argsort().argsort().astype(float)
        for v in np.unique(vals):  # average ranks of ties
            order[vals == v] = order[vals == v].mean()
        for k, r in zip(keys, order, strict=True):
            ranks.setdefault(k.split(" | ", 1)[1], []).append(float(r) + 1)
    overall = {}
    for vt, rk in ranks.items():
        v, t = vt.split(" | ")
        mine = [c for c in cells.values() if c["variant"] == v and f"tau {c['tau']:g}" == t]
        overall[vt] = {"variant": v, "tau": mine[0]["tau"], "mean_rank": float(np.mean(rk)),
                       "mean_shd": float(np.mean([c["shd"][0] for c in mine])),
                       "mean_shd_w": float(np.mean([c["shd_w"][0] for c in mine])),
                       "mean_shd_a": float(np.mean([c["shd_a"][0] for c in mine])),
                       "mean_rounds": float(np.mean([c["rounds"][0] for c in mine]))}
    return {"cells": cells, "overall": dict(sorted(
        overall.items(), key=lambda kv: (kv[1]["mean_rank"], kv[1]["mean_shd"])))}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101, 102, 103, 104])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS),
                    choices=[*SCENARIOS, APP])
    ap.add_argument("--scales", nargs="+", default=["pooled", "paper"])
    ap.add_argument("--lambdas", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    ap.add_argument("--duals", nargs="+", default=["paper", "code"])
    ap.add_argument("--taus", type=float, nargs="+", default=[0.2, 0.3])
    ap.add_argument("--variants", nargs="*", default=None,
                    help="only these variants (names as 'pooled/0.1/paper', 'official')")
    ap.add_argument("--report", nargs="*", default=[],
                    help="LABEL=VARIANT@TAU: the profiles the RESULTS.md table shows")
    ap.add_argument("--runs", default=None, help="JSON-lines file of finished runs (resume)")
    args = ap.parse_args()
    if args.quick:
        args.scenarios, args.seeds, args.lambdas = ["er-hom-d10-K4"], [100], [0.1]
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    clock = Clock()
    vs = candidates(args.scales, args.lambdas, args.duals)
    if args.variants:
        vs = {k: vs[k] for k in args.variants}
    runs_path = Path(args.runs) if args.runs else None
    done = {(r["scenario"], r["seed"], r["variant"]): r for r in read_jsonl(runs_path)} \
        if runs_path and runs_path.exists() else {}
    for sc in args.scenarios:
        for seed in args.seeds:
            for name, change in vs.items():
                key = (sc, seed, name)
                if key not in done:
                    done[key] = {"scenario": sc, "seed": seed, "variant": name,
                                 **run(sc, seed, change, args.taus)}
                    if runs_path:
                        append_jsonl(runs_path, done[key])
            log(f"  {sc} seed {seed} done [{clock():.0f}s]")
    summ = summarize(done, [s for s in args.scenarios if s != APP], list(vs), args.seeds,
                     args.taus)
    if APP in args.scenarios:
        summ["app"] = summarize(done, [APP], list(vs), args.seeds, args.taus)["cells"]
    rows = [[o["variant"], o["tau"], f"{o['mean_rank']:.2f}", f"{o['mean_shd']:.1f}",
             f"{o['mean_shd_w']:.1f}", f"{o['mean_shd_a']:.1f}", f"{o['mean_rounds']:.1f}"]
            for o in summ["overall"].values()]
    log("\n" + table(["variant", "tau", "mean rank", "SHD W+A", "SHD(W)", "SHD(A)", "rounds"],
                     rows))
    for sc in args.scenarios:
        best = min((c for c in {**summ["cells"], **summ.get("app", {})}.values()
                    if c["scenario"] == sc),
                   key=lambda c: c["shd"][0])
        log(f"  best in {sc}: {best['variant']} tau {best['tau']:g} SHD(W) "
            f"{fmt(*best['shd_w'], 1)} SHD(A) {fmt(*best['shd_a'], 1)}")
    out = {"settings": settings(args, drop=("out", "runs")), "variants": vs,
           "scenarios": {k: dict(zip(("graph", "noise", "d", "K"), v, strict=True))
                         for k, v in {**SCENARIOS, APP: APP_SCENARIO}.items()
                         if k in args.scenarios},
           "n_k": N_K, "het_noise": HET_NOISE, **summ,
           "report": dict(r.split("=", 1) for r in args.report),
           "runs": [done[(sc, s, v)] for sc in args.scenarios for s in args.seeds for v in vs],
           "elapsed_s": clock()}
    log(f"wrote {write_results(NAME, out, args.out)}")


# ----------------------------------------------------------------------------- tables
def table_fdbnl_defaults_dev() -> str:
    """FDBNL default candidates on development seeds (issue 13): mean rank over scenarios of
    the mean SHD(W) + SHD(A), best first (``fdbnl_defaults.py``, results/fdbnl_defaults_dev)."""
    r = read_results("fdbnl_defaults_dev")
    rows = [[o["variant"], short(o["tau"]), f"{o['mean_rank']:.2f}", f"{o['mean_shd']:.1f}",
             f"{o['mean_shd_w']:.1f}", f"{o['mean_shd_a']:.1f}", f"{o['mean_rounds']:.0f}"]
            for o in r["overall"].values()]
    return markdown(["lambda scale / lambda / dual step", "tau", "mean rank", "SHD W + A",
                     "SHD(W)", "SHD(A)", "rounds"], rows)


def table_fdbnl_defaults() -> str:
    """FDBNL defaults on the evaluation seeds (issue 13): per scenario SHD(W) / SHD(A) (mean ±
    sd) and rounds of each reported profile (``fdbnl_defaults.py``, results/fdbnl_defaults)."""
    r = read_results("fdbnl_defaults")
    cells = {**r["cells"], **r.get("app", {})}
    scenarios = [*r["scenarios"]]
    rows = []
    for sc in scenarios:
        for label, vt in r["report"].items():
            v, tau = vt.split("@")
            c = cells[f"{sc} | {v} | tau {float(tau):g}"]
            rows.append([sc, label, fmt(*c["shd_w"], 1), fmt(*c["shd_a"], 1), fmt(*c["tpr_w"]),
                         fmt(c["rounds"][0], digits=0)])
    for label, vt in r["report"].items():
        v, tau = vt.split("@")
        o = r["overall"][f"{v} | tau {float(tau):g}"]
        rows.append(["**mean of the 6 scenarios**", label, f"{o['mean_shd_w']:.1f}",
                     f"{o['mean_shd_a']:.1f}", "", f"{o['mean_rounds']:.0f}"])
    return markdown(["scenario", "profile", "SHD(W)", "SHD(A)", "TPR(W)", "rounds"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fdbnl_defaults_dev": table_fdbnl_defaults_dev, "fdbnl_defaults": table_fdbnl_defaults}


if __name__ == "__main__":
    main()
