"""FedGC / FedCF: calibration and power of the per-entry "no Granger effect" test (issue 21.4).

The server's standard errors (``statespace.model.granger_test``: the sandwich of its own
least-squares loss over the last pass, Newey-West HAC, t reference) turn every learned entry
of ``A_hat`` (``B_hat``) into a p-value for H0: entry = 0. This script measures, on the App's
synthetic data (``statespace.data``; the settings classes' defaults unless a scenario says
otherwise), how often the test rejects at 5% where the true entry is 0 (false-positive rate,
nominal 5%) and where it is not (power, by the size of ``A_21``):

``gc-null``      FedGC App defaults with ``ss-coupling = 0`` (A_12 = A_21 = 0: 8 null entries)
``gc-default``   FedGC App defaults (A_21 = 0.25: power; A_12 = 0: 4 null entries)
``gc-c<value>``  FedGC with ``ss-coupling = value``: power by effect size (A_12 null too)
``gc-dp-null``   FedGC with ``ss-dp = true`` (epsilon 0.5 per release), ``ss-coupling = 0``
``cf-null``      FedCF App defaults with ``ss-coupling = 0`` (A null; every B_mn is not)
``cf-default``   FedCF App defaults (A_21 = 0.25, A_12 = 0; B power)
``cf-innovation`` FedCF, ``ss-target = "innovation"`` (the README's run)
``cf-innovation-b-null`` the same with every off-diagonal ``B_mn = 0`` (B's null)

Each run is the in-process reference loop (:func:`statespace.loop.reference`, proven equal to
the Flower path). The false-positive rate pools every null entry of every seed; beside it the
binomial standard error at the nominal 5% (``sqrt(0.05 * 0.95 / N)``, entries independent)
and the standard error from the seeds (sample sd of each seed's rejection fraction over
sqrt(seeds): entries of one run share its data).

    python simulations/studies/granger_test.py --seeds 100..119 --lags -1 0 \
        --name granger_test_dev \
        --scenarios gc-null gc-default gc-dp-null cf-default cf-innovation-b-null
    python simulations/studies/granger_test.py --seeds 100..119 --name granger_test_dev_power \
        --scenarios gc-c0.01 gc-c0.02 gc-c0.04 cf-null cf-innovation
    python simulations/studies/granger_test.py --seeds 9100..9149

What was run: design on development seeds 100-119: Newey-West against White's standard errors
(``--lags -1 0``) on the null scenarios -> ``results/granger_test_dev.json`` (HAC kept: FedGC's
FPR 0.056 against White's 0.075 at 5%, 160 null entries), and the effect sizes of the power
curve (couplings 0.01-0.04, about 1-5 standard errors) -> ``results/granger_test_dev_power.json``;
then once, on evaluation seeds 9100-9149 (50 seeds, every scenario, the defaults) ->
``results/granger_test.json`` (694 s beside two other jobs on two cores).
The reverse block's rate under a strong coupling grows with T; the numbers in
``docs/algorithms/fedgc.md`` came from exploratory runs of this data on development seeds
(``--scenarios gc-default --t 2500 --seeds 100..129``, ``--t 40000 --seeds 100..114``),
not committed as results.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, log, mean_sd, parser, write_results

from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import (
    merged_config,
    synthetic_clients,
    synthetic_series,
    synthetic_system,
)

SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "gc-null": ("fedgc", {"ss-coupling": 0.0}),
    "gc-default": ("fedgc", {}),
    "gc-c0.01": ("fedgc", {"ss-coupling": 0.01}),
    "gc-c0.02": ("fedgc", {"ss-coupling": 0.02}),
    "gc-c0.04": ("fedgc", {"ss-coupling": 0.04}),
    "gc-dp-null": ("fedgc", {"ss-coupling": 0.0, "ss-dp": True}),
    "cf-null": ("fedcf", {"ss-coupling": 0.0}),
    "cf-default": ("fedcf", {}),
    "cf-innovation": ("fedcf", {"ss-target": "innovation"}),
    "cf-innovation-b-null": ("fedcf", {"ss-target": "innovation"}),
}
#: scenarios whose system keeps only the diagonal blocks of B (every B_mn = 0, m != n)
B_NULL = ("cf-innovation-b-null",)
LEVELS = (0.01, 0.05, 0.10)
NOMINAL = 0.05


def one_run(scenario: str, seed: int, lags: int, T: int | None = None) -> dict[str, Any]:
    """p-values of the null and non-null learned entries of one run (``T``: ``ss-t``)."""
    model, keys = SCENARIOS[scenario]
    length = {} if T is None else {"ss-t": T}
    rc = merged_config({"seed": seed, **keys, "ss-granger-lags": lags, **length}, model)
    sys = synthetic_system(rc)
    if scenario in B_NULL:
        sys = replace(sys, B=sys.B - ss.off_diagonal(sys.A, sys.B, sys.P, sys.U)[1])
    sys, _, y, u = synthetic_series(rc, sys)
    clients = synthetic_clients(rc, sys, y, u)
    s = (ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings).from_run_config(rc)
    t0 = time.process_time()
    res = loop.reference(clients, s)
    cpu = time.process_time() - t0
    g = res.granger
    learned, lb = (x > 0 for x in ss.off_diagonal(np.ones_like(sys.A), np.ones_like(sys.B),
                                                   sys.P, sys.U))
    out = {"scenario": scenario, "seed": seed, "lags": lags, "cpu_s": cpu,
           "null_A": g.pvalue_A[learned & (sys.A == 0)].tolist(),
           "alt_A": g.pvalue_A[learned & (sys.A != 0)].tolist(),
           "alt_A_true": sys.A[learned & (sys.A != 0)].tolist(),
           "alt_A_se": g.se_A[learned & (sys.A != 0)].tolist(),
           "null_A_se": g.se_A[learned & (sys.A == 0)].tolist()}
    if model == "fedcf":
        out.update({"null_B": g.pvalue_B[lb & (sys.B == 0)].tolist(),
                    "alt_B": g.pvalue_B[lb & (sys.B != 0)].tolist()})
    return out


def rates(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """Rejection rates of ``key``'s p-values pooled over seeds, with their standard errors."""
    per_seed = [np.asarray(r[key], dtype=float) for r in rows if r.get(key)]
    if not per_seed:
        return None
    p = np.concatenate(per_seed)
    out: dict[str, Any] = {"entries": int(p.size), "seeds": len(per_seed),
                           "mean_p": float(p.mean())}
    for a in LEVELS:
        f = [float(np.mean(x < a)) for x in per_seed]
        m, sd = mean_sd(f)
        out[f"reject_{a:g}"] = float(np.mean(p < a))
        out[f"seed_se_{a:g}"] = sd / np.sqrt(len(f))
        out[f"binomial_se_{a:g}"] = float(np.sqrt(a * (1 - a) / p.size))
    return out


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (scenario, lags): null rejection rates (FPR) and power."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["lags"]), []).append(r)
    out = []
    for (sc, lags), rs in groups.items():
        row: dict[str, Any] = {"scenario": sc, "lags": lags,
                               "seeds": sorted(r["seed"] for r in rs),
                               "cpu_s": mean_sd([r["cpu_s"] for r in rs])[0]}
        for key in ("null_A", "alt_A", "null_B", "alt_B"):
            v = rates(rs, key)
            if v is not None:
                row[key] = v
        if any(r["alt_A_true"] for r in rs):
            row["alt_A_effect"] = float(np.mean(np.abs(np.concatenate(
                [r["alt_A_true"] for r in rs]))))
            row["alt_A_mean_se"] = float(np.mean(np.concatenate([r["alt_A_se"] for r in rs])))
        row["null_A_mean_se"] = float(np.mean(np.concatenate([r["null_A_se"] for r in rs])))
        out.append(row)
    return out


def show(table: list[dict[str, Any]]) -> None:
    """Measured FPR beside the nominal 5%, and power."""
    log(f"{'scenario':12s} {'lags':>4s} {'seeds':>5s} {'null N':>6s}  "
        f"{'FPR@5% (nominal 0.05)':>30s}  {'FPR@1%':>7s} {'FPR@10%':>7s}  power@5%")
    for r in table:
        n = r.get("null_A")
        a = r.get("alt_A")
        fpr = (f"{n['reject_0.05']:.3f} ± {n['binomial_se_0.05']:.3f} (seeds ± "
               f"{n['seed_se_0.05']:.3f})") if n else "-"
        extra = (f"{n['reject_0.01']:7.3f} {n['reject_0.1']:7.3f}" if n else " " * 15)
        pw = (f"A {a['reject_0.05']:.3f} (|A_21| {r['alt_A_effect']:.3g}, se "
              f"{r['alt_A_mean_se']:.2g})") if a else ""
        if "alt_B" in r:
            pw += f"  B {r['alt_B']['reject_0.05']:.3f}"
        if "null_B" in r:
            nb = r["null_B"]
            pw += (f"  B null ({nb['entries']}): FPR {nb['reject_0.05']:.3f} ± "
                   f"{nb['binomial_se_0.05']:.3f} (seeds ± {nb['seed_se_0.05']:.3f})")
        log(f"{r['scenario']:12s} {r['lags']:>4d} {len(r['seeds']):>5d} "
            f"{n['entries'] if n else 0:>6d}  {fpr:>30s}  {extra}  {pw}")


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=list(range(100, 120)))
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--lags", nargs="*", type=int, default=[-1],
                    help="ss-granger-lags values (-1: Newey-West's automatic lag, 0: White)")
    ap.add_argument("--t", type=int, default=None, help="ss-t of every run (default: the "
                    "data defaults' 10000)")
    ap.add_argument("--name", default="granger_test", help="results/<name>.json")
    args = ap.parse_args()
    clock = Clock()
    rows = []
    seeds = args.seeds[:3] if args.quick else args.seeds
    for sc in args.scenarios:
        for lags in args.lags:
            rows += [one_run(sc, seed, lags, args.t) for seed in seeds]
            log(f"{sc} lags {lags}: {len(seeds)} seeds, {clock():.0f}s")
    table = summarize(rows)
    show(table)
    write_results(args.name, {"settings": {**vars(args), "out": None},
                              "nominal": NOMINAL, "summary": table, "rows": rows,
                              "elapsed_s": clock()}, args.out)


if __name__ == "__main__":
    main()
