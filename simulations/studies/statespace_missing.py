"""FedGC/FedCF with missing observations and known-zero coupling blocks (issue 22).

Every run is the in-process reference loop (:func:`statespace.loop.reference`, equal to the
Flower path by the tests) on the App's data defaults (2 clients, T = 10000, chain coupling
``A_21 = 0.25``, ``A_12 = 0``), with the App's learning defaults, for

``fedgc``            FedGC's App defaults (unknown mean shifts, innovation target, differenced);
``fedcf-innovation`` FedCF with ``ss-target="innovation"`` (the README's run).

Scenarios, each against the complete data of the same seed (paired):

``complete``  no cell missing (the reference);
``mcar5``     5% of the cells of every client's ``y`` (FedCF: and ``u``) missing at random;
``mcar20``    20% of them;
``dead1``     client 1's sensor dead (all of its ``y``) for t in [0.45 T, 0.55 T): the client
              whose row block holds ``A_21``, the adverse case (client 0's measured state
              carries no cross-client effect);
``dead0``     the same stretch on client 0 (the source of ``A_21``);
``known``     complete data with ``ss-known-zero = "A:0<-1"`` (the true zero ``A_12``; it lies
              in client 0's row block, which the server fits apart from client 1's, so
              ``A_21`` cannot change);
``complete3`` three clients (``ss-clients = 3``, chain ``A_21``, ``A_32``), complete data;
``known3``    the same with every true zero block known, ``"A:0<-*, A:1<-2, A:2<-0"``: the
              zero ``A_31`` shares its row block with the learned ``A_32``.

Recorded: ``err_A21 = ||A21_hat - A21||_F``, ``norm_A12 = ||A12_hat||_F`` (``max_abs_A12``: 0
exactly when known), ``err_coupled`` (the error over every nonzero block) and
``max_abs_zero`` (the largest entry of the zero off-diagonal blocks), the off-diagonal
support recovery at ``ss-granger-alpha`` (share of ``A_21`` entries with p < 0.05, share of
``A_12`` entries with p >= 0.05; NaN p-values of known-zero entries count as "not an
edge"), FedCF's ``cf_error_21``, and every client's share of missing cells beside
``ss-max-missing`` (0.5): no client is dropped below it.

    python simulations/studies/statespace_missing.py --seeds 100..103 \\
        --jsonl simulations/results/statespace_missing_dev.jsonl        # development
    python simulations/studies/statespace_missing.py --seeds 9600..9604 \\
        --jsonl simulations/results/statespace_missing_eval.jsonl       # evaluation, once
    python simulations/studies/statespace_missing.py --summary \\
        simulations/results/statespace_missing_eval.jsonl                # results/<name>.json

Development seeds 100-103 chose two rules (``--design`` reruns the alternatives):

- the filter's update where cells are missing: the standard partial-observation update at
  every step (the issue's first rule) left FedGC's ``A_hat_21`` about half its value at 20%
  of cells missing (err_A21 0.126 ± 0.089 against 0.041 ± 0.019 complete); through the
  state the observed components measure, when they determine it, 0.046 ± 0.029
  (:func:`fedcausal_flwr.statespace.kalman.kalman_filter_missing`);
- missing inputs (FedCF, 20% of ``u``'s cells): holding the last observed input gave
  cf_error_21 0.215 ± 0.101 against 0.013 ± 0.008 complete; the column's observed mean
  0.017 ± 0.004
  (:func:`fedcausal_flwr.statespace.kalman.filled_inputs`).

``--design`` writes ``results/statespace_missing_design.json``. Evaluation seeds 9600-9604
(new to every study) were run once, after both choices: ``results/statespace_missing.json``
(tables in ``docs/algorithms/fedgc.md`` and ``fedcf.md``, "Known-zero blocks and missing
observations"). A run already in ``--jsonl`` is skipped (resume).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
import scipy.linalg as slin
from harness import (
    RESULTS_DIR,
    append_jsonl,
    mean_sd,
    parser,
    read_jsonl,
    write_results,
)

from fedcausal_flwr.statespace import kalman, loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import merged_config, synthetic_clients, synthetic_series

RUNS = {"fedgc": ("fedgc", {}), "fedcf-innovation": ("fedcf", {"ss-target": "innovation"})}
SCENARIOS = ("complete", "mcar5", "mcar20", "dead1", "dead0", "known", "complete3",
             "known3")
DEAD = (0.45, 0.55)
KNOWN = {"known": "A:0<-1", "known3": "A:0<-*, A:1<-2, A:2<-0"}
METRICS = ("err_A21", "norm_A12", "max_abs_A12", "power_A21", "keep_A12", "cf_error_21",
           "err_coupled", "max_abs_zero", "max_missing_share")


def with_gaps(c: kalman.ClientData, scenario: str, m: int, rng: np.random.Generator,
              inputs: bool) -> kalman.ClientData:
    """Client m's data with the scenario's cells set to NaN (the filter then skips them)."""
    y, u = c.y.copy(), c.u.copy()
    T = y.shape[0]
    if scenario in ("mcar5", "mcar20"):
        share = 0.05 if scenario == "mcar5" else 0.20
        y[rng.random(y.shape) < share] = np.nan
        if inputs and u.size:
            u[rng.random(u.shape) < share] = np.nan
    elif scenario == f"dead{m}":
        y[int(DEAD[0] * T):int(DEAD[1] * T)] = np.nan
    if not (np.isnan(y).any() or np.isnan(u).any()):
        return c
    return kalman.ClientData(c.A, c.B, c.C, c.K, y, u, c.Q, c.R)


def one_run(run: str, seed: int, scenario: str) -> dict[str, Any]:
    """One (run, seed, scenario): the reference loop's estimates against the truth."""
    model, keys = RUNS[run]
    extra = {"ss-known-zero": KNOWN[scenario]} if scenario in KNOWN else {}
    if scenario.endswith("3"):
        extra["ss-clients"] = 3
    rc = merged_config({"seed": seed, **keys, **extra}, model)
    sys, _, y, u = synthetic_series(rc)
    rng = np.random.default_rng([seed, 22])  # the gaps: their own stream
    clients = [with_gaps(c, scenario, m, rng, model == "fedcf")
               for m, c in enumerate(synthetic_clients(rc, sys, y, u))]
    s = (ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings).from_run_config(rc)
    res = loop.reference(clients, s)
    A = res.server.A_hat
    pa = ss.offsets(sys.P)
    p = res.granger.pvalue_A
    p21 = p[pa[1]:pa[2], pa[0]:pa[1]]
    p12 = p[pa[0]:pa[1], pa[1]:pa[2]]
    A12 = A[pa[0]:pa[1], pa[1]:pa[2]]
    shares = [c.missing for c in clients]
    out = {"run": run, "seed": seed, "scenario": scenario,
           "err_A21": ss.block_error(A, sys.A, sys.P, sys.P, 1, 0),
           "norm_A12": float(np.linalg.norm(A12)), "max_abs_A12": float(np.abs(A12).max()),
           "power_A21": float(np.mean(p21 < s.granger_alpha)),
           "keep_A12": float(np.mean(~(p12 < s.granger_alpha))),
           "missing_shares": shares, "max_missing_share": max(shares),
           "dropped": [m for m, x in enumerate(shares) if x > s.max_missing]}
    truth = ss.off_diagonal(sys.A, sys.B, sys.P, sys.U)[0]
    coupled = truth != 0  # the chain's blocks (every entry ss-coupling); diagonal blocks out
    off = ~(ss.off_diagonal(np.ones_like(A), sys.B, sys.P, sys.U)[0] == 0)
    out["err_coupled"] = float(np.linalg.norm((A - truth)[coupled]))  # the nonzero blocks
    out["max_abs_zero"] = float(np.abs(A[off & ~coupled]).max())  # the zero blocks
    if model == "fedcf":
        C22 = ss.block(sys.C, sys.D, sys.P, 1, 1)
        out["cf_error_21"] = ss.counterfactual_error(
            C22, ss.block(res.server.B_hat, sys.P, sys.U, 1, 0),
            ss.block(sys.B, sys.P, sys.U, 1, 0))
    return out


# ---- the alternatives development seeds rejected ---------------------------------------------
def partial_every_step(c: kalman.ClientData, y: np.ndarray) -> kalman.ClientData:
    """Client data whose filter takes the standard partial-observation update at every step
    with missing cells (``kalman_update``; a missing cell then reads as ``C`` times the state
    the observed components measure, else as ``C hhat``): the rule not chosen."""
    T, p = y.shape[0], c.A.shape[0]
    S_ss = slin.solve_discrete_are(c.A.T, c.C.T, c.Q, c.R)
    hc, filled, prev, S = np.zeros((T, p)), y.copy(), np.zeros(p), S_ss
    for t in range(T):
        prior = c.A @ prev + (c.B @ c.u[t - 1] if c.B.size and t else 0.0)
        S = S_ss if t == 0 else c.A @ S @ c.A.T + c.Q
        obs = ~np.isnan(y[t])
        prev, S = kalman.kalman_update(prior, S, c.C, c.R, y[t], obs)
        hc[t] = prev
        x = kalman.observed_state(c.C, y[t], obs, prev)
        filled[t, ~obs] = (c.C @ x)[~obs]
    out = kalman.ClientData(c.A, c.B, c.C, c.K, filled, c.u)
    out.hc, out.observed = hc, ~np.isnan(y)
    return out


def held(u: np.ndarray) -> np.ndarray:
    """Each missing input cell at its column's last observed value (0 before the first)."""
    out = u.copy()
    for t in range(out.shape[0]):
        gap = np.isnan(out[t])
        out[t, gap] = out[t - 1, gap] if t else 0.0
    return out


def design_run(seed: int, variant: str) -> dict[str, Any]:
    """One development comparison: ``filter-chosen`` / ``filter-partial`` (FedGC defaults, 20%
    of ``y`` missing) or ``inputs-mean`` / ``inputs-held`` (FedCF innovation, 20% of ``u``)."""
    model, keys = RUNS["fedgc" if variant.startswith("filter") else "fedcf-innovation"]
    rc = merged_config({"seed": seed, **keys}, model)
    sys, _, y, u = synthetic_series(rc)
    rng = np.random.default_rng([seed, 22])
    clients = []
    for c in synthetic_clients(rc, sys, y, u):
        yy, uu = c.y.copy(), c.u.copy()
        if model == "fedgc":
            yy[rng.random(yy.shape) < 0.2] = np.nan
        else:
            uu[rng.random(uu.shape) < 0.2] = np.nan
        if variant == "filter-partial":
            clients.append(partial_every_step(c, yy))
        elif variant == "inputs-held":
            clients.append(kalman.ClientData(c.A, c.B, c.C, c.K, yy, held(uu)))
        else:
            clients.append(kalman.ClientData(c.A, c.B, c.C, c.K, yy, uu, c.Q, c.R))
    s = (ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings).from_run_config(rc)
    A = loop.reference(clients, s).server
    out = {"design": variant, "seed": seed,
           "err_A21": ss.block_error(A.A_hat, sys.A, sys.P, sys.P, 1, 0)}
    if model == "fedcf":
        out["cf_error_21"] = ss.counterfactual_error(
            ss.block(sys.C, sys.D, sys.P, 1, 1), ss.block(A.B_hat, sys.P, sys.U, 1, 0),
            ss.block(sys.B, sys.P, sys.U, 1, 0))
    return out


DESIGNS = ("filter-chosen", "filter-partial", "inputs-mean", "inputs-held")


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (run, scenario): mean and sample sd (ddof 1) of every metric, and of the paired
    difference of ``err_A21`` to the complete data of the same seed."""
    base = {(r["run"], r["seed"], r["scenario"]): r for r in rows
            if r["scenario"] in ("complete", "complete3")}
    out = []
    for run in RUNS:
        for sc in SCENARIOS:
            rs = sorted((r for r in rows if r["run"] == run and r["scenario"] == sc),
                        key=lambda r: r["seed"])
            ref = "complete3" if sc.endswith("3") else "complete"
            if not rs:
                continue
            row: dict[str, Any] = {"run": run, "scenario": sc,
                                   "seeds": [r["seed"] for r in rs],
                                   "dropped": sum(len(r["dropped"]) for r in rs)}
            for k in METRICS:
                if k in rs[0]:
                    m, sd = mean_sd([r[k] for r in rs])
                    row[k] = {"mean": m, "sd": sd}
            for k in ("err_A21", "err_coupled", "cf_error_21"):
                paired = [r[k] - base[(run, r["seed"], ref)][k] for r in rs
                          if (run, r["seed"], ref) in base and k in r]
                if paired:
                    m, sd = mean_sd(paired)
                    row[f"d_{k}"] = {"mean": m, "sd": sd}
            out.append(row)
    return out


def show(table: list[dict[str, Any]]) -> None:
    """Our numbers, with the complete-data run of the same seeds as the nominal beside them."""
    for r in table:
        cells = " ".join(f"{k} {r[k]['mean']:.4g}±{r[k]['sd']:.2g}"
                         for k in (*METRICS, "d_err_A21", "d_err_coupled", "d_cf_error_21")
                         if k in r)
        print(f"{r['run']:17s} {r['scenario']:8s} dropped {r['dropped']} {cells}")


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101, 102, 103])
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--jsonl", type=Path, default=RESULTS_DIR / "statespace_missing_dev.jsonl")
    ap.add_argument("--summary", type=Path, help="summarize this JSON-lines file and exit")
    ap.add_argument("--name", default="statespace_missing", help="results/<name>.json")
    ap.add_argument("--design", action="store_true",
                    help="rerun the development comparisons of the two rules and exit")
    args = ap.parse_args()
    if args.design:
        rows = [design_run(seed, v) for v in DESIGNS for seed in args.seeds]
        table = []
        for v in DESIGNS:
            rs = [r for r in rows if r["design"] == v]
            row = {"design": v, "seeds": [r["seed"] for r in rs]}
            for k in ("err_A21", "cf_error_21"):
                if k in rs[0]:
                    m, sd = mean_sd([r[k] for r in rs])
                    row[k] = {"mean": m, "sd": sd, "values": [r[k] for r in rs]}
            table.append(row)
            print(v, {k: round(row[k]["mean"], 4) for k in ("err_A21", "cf_error_21")
                      if k in row}, {k: round(row[k]["sd"], 4) for k in ("err_A21",
                                                                         "cf_error_21")
                                     if k in row}, flush=True)
        write_results(f"{args.name}_design", {"settings": {"seeds": args.seeds},
                                              "summary": table}, args.out)
        return
    if args.summary:
        table = summarize(read_jsonl(args.summary))
        show(table)
        write_results(args.name, {"settings": {"summary": args.summary.name, "dead": DEAD,
                                               "known_zero": KNOWN},
                                  "summary": table}, args.out)
        return
    done = {(r["run"], r["seed"], r["scenario"]) for r in read_jsonl(args.jsonl)} \
        if args.jsonl.exists() else set()
    for run in args.runs:
        for seed in args.seeds:
            for sc in args.scenarios:
                if (run, seed, sc) in done:
                    continue
                r = one_run(run, seed, sc)
                append_jsonl(args.jsonl, r)
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                  for k, v in r.items()}), flush=True)


if __name__ == "__main__":
    main()
