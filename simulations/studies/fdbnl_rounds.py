"""FDBNL/PFDBNL rounds to convergence: the rho1 growth phi1 and the stop rule (issue 12).

In a real deployment every FDBNL round is one exchange of several seconds, so the rounds are
the cost. The run stops once h(W) <= h_tol (1e-8); rho1 (the acyclicity penalty) grows by
phi1 per round, so phi1 sets how fast h falls. Before issue 12 the stop rule was h alone, which
can fire in round 1 (W is still near zero, hence acyclic) before the clients agree; the
defaults now also require the primal residual max_k ||B_k - W||_F / max(||W||_F, 1) <=
primal_tol (1e-2). This script compares, per data scenario, the old rule ("h only", phi1 1.6:
the defaults before issue 12) with the guarded rule for phi1 in --phi1: rounds, SHD(W), SHD(A)
and TPR(W) of the thresholded graphs (PFDBNL: the clients' personalized graphs against their
own truths, mean over clients).

Scenarios (lambda 0.1 pooled, the App's thresholds unless said): ``app`` the App's default
data (d 10, K 5, 100 rows per client, stationary SVAR, paper weights |w| in [0.3, 0.5]);
``hetero`` the same with a truth per client (PFDBNL's setting, also run with PFDBNL);
``code15`` d 15, K 8, 50 rows per client, the official generator and weights U(±[0.5, 2]),
thresholds 0.3; ``svar20`` d 20, K 16, 50 rows; ``k32`` d 10, K 32, 50 rows.

    python simulations/studies/fdbnl_rounds.py --seeds 100..109                # development seeds
    python simulations/studies/fdbnl_rounds.py --seeds 5000..5009 --out ...    # evaluation seeds
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from dbn_common import Clock, client_moments, fmt, log, mean_sd, parser, settings, table
from harness import append_jsonl, markdown, read_jsonl, read_results, write_results

from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
from fedcausal_flwr.dbn.model import (
    FDBNLSettings,
    PFDBNLSettings,
    fdbnl_reference,
    pfdbnl_reference,
)
from fedcausal_flwr.dbn.synthetic import federated_dbn

NAME = "fdbnl_rounds"
#: name -> (algorithm, d, K, rows per client, generator, weights, heterogeneous, threshold)
SCENARIOS: dict[str, tuple[str, int, int, int, str, str, bool, float]] = {
    "app": ("fdbnl", 10, 5, 100, "svar", "paper", False, 0.2),
    "hetero": ("fdbnl", 10, 5, 100, "svar", "paper", True, 0.2),
    "hetero-pfdbnl": ("pfdbnl", 10, 5, 100, "svar", "paper", True, 0.2),
    "code15": ("fdbnl", 15, 8, 50, "code", "code", False, 0.3),
    "svar20": ("fdbnl", 20, 16, 50, "svar", "paper", False, 0.2),
    "k32": ("fdbnl", 10, 32, 50, "svar", "paper", False, 0.2),
}
BEFORE = "h only, phi1 1.6"


def variants(phis: list[float]) -> dict[str, dict[str, Any]]:
    """The old rule (the defaults before issue 12) and the guarded rule for every phi1."""
    out = {BEFORE: {"phi1": 1.6, "primal_tol": float("inf")}}
    out.update({f"guarded, phi1 {p:g}": {"phi1": p} for p in phis})
    return out


def run(scenario: str, seed: int, change: dict[str, Any]) -> dict[str, float]:
    """One run's rounds and graph scores."""
    alg, d, K, n_k, gen, weights, het, tau = SCENARIOS[scenario]
    clients, truths = federated_dbn(seed, K, n_k, d, p=1, weights=weights, generator=gen,
                                    heterogeneous=het)
    moms = client_moments(clients)
    cls = PFDBNLSettings if alg == "pfdbnl" else FDBNLSettings
    # lambda 0.1 pooled: the App default when this ran (0.05 since fdbnl_defaults.py)
    s = cls().replace(tau_w=tau, tau_a=tau, **{"lambda_w": 0.1, "lambda_a": 0.1, **change})
    if alg == "pfdbnl":
        st, hist = pfdbnl_reference(moms, s, seed)
        ms = [dbn_graph_metrics(st.W_local[k], st.A_local[k], *truths[k], tau, tau)
              for k in range(K)]
    else:
        st, hist = fdbnl_reference(moms, s, seed)
        ms = [dbn_graph_metrics(st.W, st.A, *truths[0], tau, tau)]
    out = {k: float(np.mean([m[k] for m in ms])) for k in ("shd_w", "shd_a", "tpr_w")}
    return {**out, "rounds": len(hist), "h": float(st.h), "residual": float(st.residual)}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101, 102])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--phi1", type=float, nargs="+", default=[1.6, 2.0, 2.5, 3.0, 4.0])
    ap.add_argument("--runs", default=None, help="JSON-lines file of finished runs (resume)")
    args = ap.parse_args()
    if args.quick:
        args.scenarios, args.seeds, args.phi1 = ["app"], [100], [1.6, 3.0]
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    clock = Clock()
    runs_path = Path(args.runs) if args.runs else None
    done = {(r["scenario"], r["seed"], r["variant"]): r for r in read_jsonl(runs_path)} \
        if runs_path and runs_path.exists() else {}
    vs = variants(args.phi1)
    rows, summary = [], {}
    for sc in args.scenarios:
        for name, change in vs.items():
            res = []
            for seed in args.seeds:
                key = (sc, seed, name)
                if key not in done:
                    done[key] = {"scenario": sc, "seed": seed, "variant": name,
                                 **run(sc, seed, change)}
                    if runs_path:
                        append_jsonl(runs_path, done[key])
                res.append(done[key])
            m = {k: mean_sd(r[k] for r in res) for k in ("rounds", "shd_w", "shd_a", "tpr_w")}
            summary[f"{sc} | {name}"] = m
            rows.append([sc, name, fmt(*m["rounds"], 1), f"{max(r['rounds'] for r in res)}",
                         fmt(*m["shd_w"], 1), fmt(*m["shd_a"], 1), fmt(*m["tpr_w"])])
            log(f"  {sc:14s} {name:20s} rounds {fmt(*m['rounds'], 1)} SHD(W) "
                f"{fmt(*m['shd_w'], 1)} SHD(A) {fmt(*m['shd_a'], 1)} [{clock():.0f}s]")
    log("\n" + table(["scenario", "variant", "rounds", "max rounds", "SHD(W)", "SHD(A)",
                      "TPR(W)"], rows))
    out = {"settings": settings(args, drop=("out", "runs")), "summary": summary,
           "runs": [done[(sc, s, v)] for sc in args.scenarios for v in vs for s in args.seeds],
           "elapsed_s": clock()}
    log(f"wrote {write_results(NAME, out, args.out)}")


# ----------------------------------------------------------------------------- tables
def table_fdbnl_rounds() -> str:
    """FDBNL/PFDBNL rounds and graph scores per stop rule and phi1, development seeds then
    evaluation seeds (issue 12): ``fdbnl_rounds.py``'s two JSONs."""
    rows = []
    for name, seeds in (("fdbnl_rounds_dev", "dev"), ("fdbnl_rounds", "eval")):
        r = read_results(name)
        label = f"{seeds} {r['settings']['seeds'][0]}-{r['settings']['seeds'][-1]}"
        for key, m in r["summary"].items():
            scenario, variant = key.split(" | ")
            rows.append([label, scenario, variant, fmt(*m["rounds"], 1), fmt(*m["shd_w"], 1),
                         fmt(*m["shd_a"], 1), fmt(*m["tpr_w"])])
    return markdown(["seeds", "scenario", "stop rule, rho1 growth", "rounds", "SHD(W)",
                     "SHD(A)", "TPR(W)"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fdbnl_rounds": table_fdbnl_rounds}


if __name__ == "__main__":
    main()
