"""How the two lambda conventions of FDBNL behave as the same data are split over more clients.

The FDBNL server step minimizes lambda |W|_1 + sum_k [consensus terms] (+ h terms). The K
consensus terms add up to K rho2/2 ||W - V_W||^2, so with the paper's convention
(lambda_scale="paper", lambda applied once) the effective soft threshold is lambda / (K rho2)
and a fixed lambda weakens as K grows; the official code and the paper's tables use it.
lambda_scale="pooled" multiplies lambda by K, so that lambda keeps its centralized DYNOTEARS
meaning (sum_k l_k = K x pooled loss for equal n_k): FDBNL then targets DYNOTEARS on the pooled
data with the same lambda (the App's default).

Same data for every K: d = 10, n = 512 rows (the official generator and weights, as in the
varying-K figures) split into K = 1..64 contiguous clients; lambda_W = lambda_A = 0.1 by default.
Reference: DYNOTEARS on the pooled data (Alldata) with the same lambda. Spec 6.4: at K = 1 FDBNL
is within ± 2 SHD of DYNOTEARS.
"""

from __future__ import annotations

import warnings

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from dbn_common import (
    Clock,
    client_moments,
    fmt,
    graph_scores,
    log,
    mean_sd,
    parser,
    pooled_moments,
    settings,
    table,
    verdict,
    write_results,
)
from harness import markdown, read_results

from fedcausal_flwr.dbn.model import PFDBNLSettings, dynotears, fdbnl_reference
from fedcausal_flwr.dbn.synthetic import federated_dbn

PAPER_SCALE = PFDBNLSettings(lambda_scale="paper")  # the paper's lambda convention

NAME = "fdbnl_lambda_scale"
KEYS = ("shd_w", "tpr_w", "fdr_w", "shd_a", "tpr_a", "fdr_a", "nnz_w", "rounds", "dist")


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=3)
    ap.add_argument("--K", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--weights", choices=("code", "paper"), default="code")
    args = ap.parse_args()
    if args.quick:
        args.K, args.seeds, args.d, args.n = [1, 4, 16], [0], 5, 128
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    total = Clock()
    log(f"{NAME}: d={args.d} n={args.n} lambda={args.lam} K={args.K} seeds={args.seeds}")
    per_seed: list[dict] = []
    for seed in args.seeds:
        r: dict = {}
        for K in args.K:
            clients, truths = federated_dbn(seed, K, args.n // K, args.d, p=1, degree_w=4.0,
                                            degree_a=1.0, weights=args.weights,
                                            generator="code")
            moms = client_moments(clients)
            if "Alldata" not in r:
                Wd, Ad = dynotears(pooled_moments(moms, [args.n // K] * K), args.lam, args.lam)
                g = graph_scores(Wd, Ad, truths[0])
                r["Alldata"] = {**g, "nnz_w": int((abs(Wd) >= 0.3).sum()), "rounds": 0,
                                "dist": 0.0}
                ref = np.vstack([Wd, Ad])
            for scale in ("paper", "pooled"):
                st, hist = fdbnl_reference(moms, PAPER_SCALE.replace(lambda_w=args.lam,
                                                              lambda_a=args.lam,
                                                              lambda_scale=scale), seed)
                g = graph_scores(st.W, st.A, truths[0])
                dist = np.linalg.norm(np.vstack([st.W, st.A]) - ref) / np.linalg.norm(ref)
                r[(K, scale)] = {**g, "nnz_w": int((abs(st.W) >= 0.3).sum()),
                                 "rounds": len(hist), "dist": float(dist)}
            log(f"  seed {seed} K={K}: SHD(W) paper {r[(K, 'paper')]['shd_w']} pooled "
                f"{r[(K, 'pooled')]['shd_w']} Alldata {r['Alldata']['shd_w']} "
                f"[{total():.0f}s]")
        per_seed.append(r)
    summ = {key: {k: mean_sd(r[key][k] for r in per_seed) for k in KEYS}
            for key in per_seed[0]}
    all_ = summ["Alldata"]
    rows = []
    for K in args.K:
        p, q = summ[(K, "paper")], summ[(K, "pooled")]
        rows.append([K, args.n // K, f"{args.lam / K:.4f}", fmt(*p["shd_w"], 1),
                     fmt(*q["shd_w"], 1), fmt(*p["nnz_w"], 1), fmt(*q["nnz_w"], 1),
                     fmt(*p["shd_a"], 1), fmt(*q["shd_a"], 1), fmt(*p["tpr_w"]),
                     fmt(*q["tpr_w"]), fmt(*p["dist"], 3), fmt(*q["dist"], 3),
                     f"{p['rounds'][0]:.0f}/{q['rounds'][0]:.0f}"])
    log(f"\nFDBNL, lambda = {args.lam}, mean ± sd over {len(args.seeds)} seeds; Alldata "
        f"(DYNOTEARS, pooled data, same lambda): SHD(W) {fmt(*all_['shd_w'], 1)}, edges(W) "
        f"{fmt(*all_['nnz_w'], 1)}, SHD(A) {fmt(*all_['shd_a'], 1)}, TPR(W) "
        f"{fmt(*all_['tpr_w'])}\n" + table(
            ["K", "n_k", "paper: effective λ = λ/K", "SHD(W) paper", "SHD(W) pooled",
             "edges(W) paper", "edges(W) pooled", "SHD(A) paper", "SHD(A) pooled",
             "TPR(W) paper", "TPR(W) pooled", "dist paper", "dist pooled",
             "rounds paper/pooled"], rows))
    log("dist = ||[W; A] - [W; A]_Alldata||_F / ||[W; A]_Alldata||_F, unthresholded: how far "
        "FDBNL lands from centralized DYNOTEARS with the same lambda")
    checks = {}
    if 1 in args.K:
        checks["K=1 FDBNL SHD(W) within ±2 of DYNOTEARS (spec 6.4)"] = verdict(
            summ[(1, "paper")]["shd_w"][0], all_["shd_w"][0], 2.0, True)
    for k, v in checks.items():
        log(f"  {v:6s} {k}")
    elapsed = total()
    log(f"elapsed {elapsed:.0f}s")
    out = {"settings": settings(args),
           "summary": {("Alldata" if key == "Alldata" else f"K={key[0]} {key[1]}"): v
                       for key, v in summ.items()},
           "checks": checks, "elapsed_s": elapsed,
           "per_seed": [{("Alldata" if key == "Alldata" else f"K={key[0]} {key[1]}"): v
                         for key, v in r.items()} for r in per_seed]}
    log(f"wrote {write_results(NAME, out, args.out)}")


# ----------------------------------------------------------------------------- tables
def table_fdbnl_lambda_scale() -> str:
    """SHD/TPR/FDR of W across K, ``lambda_scale`` paper vs pooled, and pooled DYNOTEARS."""
    r = read_results("fdbnl_lambda_scale")
    s = r["summary"]
    digits = {"shd_w": 1, "tpr_w": 2, "fdr_w": 2}
    rows = [[K, *(fmt(s[f"K={K} {sc}"][k][0], digits=d) for k, d in digits.items()
                  for sc in ("paper", "pooled"))] for K in r["settings"]["K"]]
    rows.append(["Alldata (pooled DYNOTEARS)",
                 *(c for k, d in digits.items() for c in (fmt(s["Alldata"][k][0], digits=d), ""))])
    return markdown(["K", "SHD(W) paper", "SHD(W) pooled", "TPR(W) paper", "TPR(W) pooled",
                     "FDR(W) paper", "FDR(W) pooled"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fdbnl_lambda_scale": table_fdbnl_lambda_scale}


if __name__ == "__main__":
    main()
