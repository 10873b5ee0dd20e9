"""Figs. 3 and 8 of the FDBNL paper: FDBNL vs Ave / Best / Alldata for varying d (spec 4.4).

d = 5, 10, 15, 20 with K = 10 clients and n = 6d, 5d, 6d, 5d rows (n_k = 3, 5, 9, 10), p = 1,
intra-slice ER mean degree 4, inter-slice out-degree 1. FDBNL: lambda_W = lambda_A = 0.5
(Table 9; paper lambda convention), phi1 = 1.6, phi2 = 1.1, thresholds 0.3 / 0.3. Baselines:
DYNOTEARS with lambda 0.1 / 0.1 (spec 5 #15: the paper gives no numbers): Ave = mean of the
per-client weighted W and A, then threshold; Best = oracle client with the lowest SHD (chosen
separately for W and A); Alldata = DYNOTEARS on the pooled data.

Data: the official code's generator (X i.i.d. from the static SEM, observed X + YA, contiguous
client blocks) and its weights U(±[0.5, 2]). The paper (§7.2) states U(±[0.3, 0.5]), but with
those weights the Table 9 lambda of 0.5 and the 0.3 threshold leave no edge to find, so the
figures can only come from the code's weights (spec 4.1).

The paper gives these results only as plots; the checks are its stated claims (spec 6.6 and the
brief: FDBNL's mean SHD(W) <= Ave's, and <= Best's, at every d).

The per-client DYNOTEARS fits of Ave/Best dominate the run time (d = 20: ~30 s per client on a
loaded 2-core machine; ~8 min per seed over the four d), so the default is 1 seed;
``--n-seeds 10`` (seeds 0-9) is the paper's protocol (what simulations/RESULTS.md reports).
"""

from __future__ import annotations

import warnings

import _sims  # noqa: F401 - simulations/ on sys.path
from dbn_common import (
    Clock,
    baselines,
    check,
    client_moments,
    finish,
    fmt,
    graph_scores,
    log,
    mean_sd,
    parser,
    table,
)
from harness import markdown, read_results

from fedcausal_flwr.dbn.model import PFDBNLSettings, fdbnl_reference
from fedcausal_flwr.dbn.synthetic import federated_dbn

PAPER_SCALE = PFDBNLSettings(lambda_scale="paper")  # the paper's lambda convention

NAME = "fdbnl_varying_d"
SETTINGS = {5: 3, 10: 5, 15: 9, 20: 10}  # d -> n_k (n = 6d, 5d, 6d, 5d over K = 10)
METHODS = ("FDBNL", "Ave", "Best", "Alldata")
KEYS = ("shd_w", "tpr_w", "fdr_w", "shd_a", "tpr_a", "fdr_a", "seconds")


def run(seed: int, d: int, n_k: int, args) -> dict:
    clients, truths = federated_dbn(seed, args.K, n_k, d, p=1, degree_w=4.0, degree_a=1.0,
                                    weights=args.weights, generator="code")
    moms = client_moments(clients)
    clock = Clock()
    st, hist = fdbnl_reference(moms, PAPER_SCALE.replace(lambda_w=args.lam, lambda_a=args.lam,
                                                  lambda_scale="paper"), seed)
    out = {"FDBNL": {**graph_scores(st.W, st.A, truths[0]), "seconds": clock(),
                     "rounds": len(hist), "h": hist[-1]["h"]}}
    out.update(baselines(moms, [n_k] * args.K, truths[0]))
    out["n_edges_w"] = int((truths[0][0] != 0).sum())
    out["n_edges_a"] = int((truths[0][1] != 0).sum())
    return out


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=1)
    ap.add_argument("--d", type=int, nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--weights", choices=("code", "paper"), default="code")
    args = ap.parse_args()
    args.K, args.lam = 10, 0.5
    if args.quick:
        args.seeds, args.d = [0], [5, 10]
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # expm overflow at trial points
    total = Clock()
    log(f"{NAME}: K={args.K} lambda={args.lam} (paper scale) weights={args.weights} "
        f"generator=code seeds={args.seeds} d={args.d}")
    results: dict[int, list[dict]] = {}
    for d in args.d:
        results[d] = []
        for seed in args.seeds:
            r = run(seed, d, SETTINGS[d], args)
            results[d].append(r)
            log(f"  d={d} seed={seed}: SHD(W) " + " ".join(
                f"{m} {r[m]['shd_w']}" for m in METHODS) + "; seconds " + " ".join(
                f"{m} {r[m]['seconds']:.0f}" for m in METHODS if m != "Best")
                + f"; FDBNL rounds {r['FDBNL']['rounds']}")
    summ = {d: {m: {k: mean_sd(r[m][k] for r in rs) for k in KEYS} for m in METHODS}
            for d, rs in results.items()}

    for part in ("w", "a"):
        rows = []
        for d in args.d:
            for m in METHODS:
                s = summ[d][m]
                rows.append([d, m, fmt(*s[f"shd_{part}"], 1), fmt(*s[f"tpr_{part}"]),
                             fmt(*s[f"fdr_{part}"])])
        log(f"\n{part.upper()} (mean ± sd over {len(args.seeds)} seeds; paper: plots only)\n"
            + table(["d", "method", f"SHD({part.upper()})", f"TPR({part.upper()})",
                     f"FDR({part.upper()})"], rows))

    checks, claims = {}, []
    for d in args.d:
        s = summ[d]
        f, a, b, al = (s[m]["shd_w"][0] for m in METHODS)
        checks[f"d={d}: FDBNL SHD(W) <= Ave"] = check(f <= a)
        checks[f"d={d}: FDBNL SHD(W) <= Best"] = check(f <= b)
        claims.append([d, "FDBNL lowest SHD(W) vs Ave/Best", "yes", f"{f:.1f} vs {a:.1f}/{b:.1f}",
                       check(f <= min(a, b))])
        if d in (5, 15):
            claims.append([d, "FDBNL SHD(W) < Alldata", "yes", f"{f:.1f} vs {al:.1f}",
                           check(f < al)])
        ft, bt, alt = s["FDBNL"]["tpr_w"][0], s["Best"]["tpr_w"][0], s["Alldata"]["tpr_w"][0]
        claims.append([d, "FDBNL TPR(W) > Best, close to Alldata", "yes",
                       f"{ft:.2f} vs {bt:.2f} / {alt:.2f}", check(ft > bt)])
        ff, af, bf = (s[m]["fdr_w"][0] for m in ("FDBNL", "Ave", "Best"))
        claims.append([d, "FDBNL FDR(W) < Ave and Best", "yes", f"{ff:.2f} vs {af:.2f}/{bf:.2f}",
                       check(ff < min(af, bf))])
    log("\npaper's claims (§4.1.1)\n" + table(["d", "claim", "paper", "ours", "mark"], claims))
    finish(NAME, args, total, checks,
           "acceptance (brief: FDBNL <= Ave; spec 6.6: <= Ave and Best, every d):",
           {"summary": summ, "claims": claims, "per_seed": results})


# ----------------------------------------------------------------------------- tables
def table_fdbnl_varying_d() -> str:
    """Fig. 3: SHD(W) of FDBNL, Ave, Best, Alldata per d, and whether FDBNL <= Ave."""
    r = read_results("fdbnl_varying_d")
    rows = []
    for d, ms in r["summary"].items():
        shd = {m: ms[m]["shd_w"] for m in ("FDBNL", "Ave", "Best", "Alldata")}
        rows.append([d, len(r["per_seed"][d]), *(fmt(*v, 1) for v in shd.values()),
                     "yes" if shd["FDBNL"][0] <= shd["Ave"][0] else "no"])
    return markdown(["d", "seeds", "FDBNL", "Ave", "Best", "Alldata", "FDBNL <= Ave"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fdbnl_varying_d": table_fdbnl_varying_d}


if __name__ == "__main__":
    main()
