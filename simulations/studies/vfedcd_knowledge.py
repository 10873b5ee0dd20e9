"""VFedCD prior knowledge and missing values (issue 22): what they cost or buy in SHD / F1.

Per seed: synthetic data of ``fedcausal_flwr.vertical.data`` (SDCD's nonlinear ANM on an ER
DAG, data seed = seed; 80/20 split, each party's own Yeo-Johnson transform fitted on its
observed training cells), K = 3 contiguous parties, the App's defaults in mode "vfedcd"
(``loop.train_reference``, which equals the secure protocol bit for bit; the tests show the
Flower path equals it with knowledge and with missing cells too).

**Knowledge.** 20% of the true edges (rounded, at least 1) given as required and 20% of the
true non-edges (ordered pairs i != j without i -> j) as forbidden, drawn at random from the
seed, written by name (``vertical.require`` / ``vertical.forbid``). Against the same run
without knowledge: SHD (a reversal counts once, as the App's evaluator) and F1 of the DAG at
``tau``, F1 over the entries no knowledge names ("free"), and the checks that no forbidden
edge appears and every required one does.

**Missing values.** Each party's cells missing completely at random with probability 5% and
20% (drawn before the transform). Against the complete data of the same seed: SHD / F1; each
party's share of missing cells stays below ``max-missing`` (0.5), so no run stops. Two rules
were compared on development seeds 100-103 before the evaluation seeds ran:

``observed``  (the rule kept) a missing cell is 0 as the encoders' input (its column's
              observed mean after the transform) and adds nothing to the loss
``impute``    mean imputation alone: the cell is 0 as input and as the decoder's target

    python simulations/studies/vfedcd_knowledge.py --seeds 100..103 \\
        --out simulations/results/vfedcd_knowledge_dev.json
    python simulations/studies/vfedcd_knowledge.py --seeds 9500..9504 --rules observed
"""

from __future__ import annotations

from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, check, finish, fmt, log, markdown, mean_sd, parser, script_name

from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import VerticalData, party_blocks, pooled_data, split_standardised

CONFIGS = {"d15-E60": {"vertical.d": 15, "vertical.edges": 60, "vertical.n": 1000},
           "d10-E20": {"vertical.d": 10, "vertical.edges": 20, "vertical.n": 1000}}
K = 3
SHARE = 0.2
MISSING = (0.05, 0.2)
RULES = ("observed", "impute")


def parties(rc: dict[str, Any], seed: int, missing: float = 0.0
            ) -> tuple[list[np.ndarray], np.ndarray]:
    """Each party's training block (NaN where missing, MCAR) and the true DAG."""
    X, A = pooled_data(rc)
    if missing:
        X = X.copy()
        X[V.rng_for(seed, "mcar").random(X.shape) < missing] = np.nan
    c = VerticalData.from_run_config(rc)
    return [split_standardised(X[:, S], c.test_fraction, c.transform)[0]
            for S in party_blocks(rc, X.shape[1], K)], A


def knowledge(A: np.ndarray, seed: int) -> tuple[str, str]:
    """(forbid, require) strings: 20% of the true non-edges and 20% of the true edges."""
    rng = V.rng_for(seed, "knowledge")
    d = len(A)
    edges = [(i, j) for i in range(d) for j in range(d) if A[i, j]]
    non = [(i, j) for i in range(d) for j in range(d) if i != j and not A[i, j]]
    req = [edges[k] for k in rng.choice(len(edges), max(1, round(SHARE * len(edges))), False)]
    fb = [non[k] for k in rng.choice(len(non), max(1, round(SHARE * len(non))), False)]
    text = lambda pairs: ", ".join(f"x{i}->x{j}" for i, j in pairs)  # noqa: E731
    return text(fb), text(req)


def scores(dag: np.ndarray, A: np.ndarray, free: np.ndarray | None = None) -> dict[str, float]:
    """SHD (reversal once) and F1 of the DAG; F1 over the ``free`` entries when given."""
    m = graph_metrics(dag, A)
    p, r = m["precision"], m["tpr"]
    out = {"shd": m["shd_rev1"], "f1": 2 * p * r / (p + r) if p + r else 0.0}
    if free is not None:
        tp = float(((dag != 0) & (A != 0) & free).sum())
        out["f1_free"] = 2 * tp / max(float(((dag != 0) & free).sum() + ((A != 0) & free).sum()),
                                      1.0)
    return out


def fit(xs: list[np.ndarray], s: V.VFedCDSettings, prior=None) -> np.ndarray:
    """The run's DAG at ``tau`` (the reference loop: the secure protocol's arithmetic)."""
    B = V.validated(V.graph(loop.train_reference(xs, s, prior=prior).F,
                            [x.shape[1] for x in xs]), prior)
    return V.dag_at_threshold(B, s.tau, prior)


def knowledge_row(config: str, seed: int) -> dict[str, Any]:
    """One seed: the run without and with knowledge."""
    rc = {**CONFIGS[config], "vertical.data-seed": seed}
    xs, A = parties(rc, seed)
    forbid, require = knowledge(A, seed)
    base = V.VFedCDSettings(he_backend="mock", seed=seed)
    s = base.replace(forbid=forbid, require=require)
    prior = V.prior_masks(s, [f"x{i}" for i in range(len(A))])
    free = ~(prior.forbid_W | prior.require_W)
    np.fill_diagonal(free, False)
    plain, known = fit(xs, base), fit(xs, s, prior)
    return {"config": config, "seed": seed, "forbidden": int(prior.forbid_W.sum()),
            "required": int(prior.require_W.sum()),
            **{f"{k}_plain": v for k, v in scores(plain, A, free).items()},
            **{f"{k}_known": v for k, v in scores(known, A, free).items()},
            "forbidden_in_dag": int(known[prior.forbid_W].sum()),
            "required_missing": int((known[prior.require_W] == 0).sum()),
            "forbidden_in_plain": int(plain[prior.forbid_W].sum()),
            "required_missing_plain": int((plain[prior.require_W] == 0).sum())}


def missing_rows(config: str, seed: int, rules: list[str]) -> list[dict[str, Any]]:
    """One seed: complete data, then each missing share under each rule."""
    rc = {**CONFIGS[config], "vertical.data-seed": seed}
    s = V.VFedCDSettings(he_backend="mock", seed=seed)
    xs, A = parties(rc, seed)
    full = scores(fit(xs, s), A)
    out = []
    for share in MISSING:
        gappy, _ = parties(rc, seed, share)
        shares = [V.missing_share(x) for x in gappy]
        for rule in rules:
            data = gappy if rule == "observed" else [V.inputs(x) for x in gappy]
            got = scores(fit(data, s), A)
            out.append({"config": config, "seed": seed, "missing": share, "rule": rule,
                        "party_share_max": max(shares), "party_share_mean": float(np.mean(shares)),
                        "stops": any(v > s.max_missing for v in shares),
                        "shd_full": full["shd"], "f1_full": full["f1"],
                        "shd": got["shd"], "f1": got["f1"]})
    return out


def main() -> None:
    ap = parser(__doc__, seeds=[100, 101, 102, 103])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    args = ap.parse_args()
    clock = Clock()
    if args.quick:
        args.seeds, args.configs = args.seeds[:1], args.configs[:1]
    krows, mrows = [], []
    for config in args.configs:
        for seed in args.seeds:
            krows.append(r := knowledge_row(config, seed))
            log(f"{config} seed {seed}: SHD {r['shd_plain']} -> {r['shd_known']}, F1 "
                f"{r['f1_plain']:.3f} -> {r['f1_known']:.3f} (free {r['f1_free_plain']:.3f} "
                f"-> {r['f1_free_known']:.3f}); forbidden in DAG {r['forbidden_in_dag']} "
                f"(plain {r['forbidden_in_plain']}), required absent {r['required_missing']} "
                f"(plain {r['required_missing_plain']})")
            mrows += missing_rows(config, seed, args.rules)
    ksum = {}
    for c in args.configs:
        rows = [r for r in krows if r["config"] == c]
        ksum[c] = {k: mean_sd(r[k] for r in rows) for k in rows[0] if k not in ("config", "seed")}
        ksum[c]["shd_diff"] = mean_sd(r["shd_known"] - r["shd_plain"] for r in rows)
        ksum[c]["f1_diff"] = mean_sd(r["f1_known"] - r["f1_plain"] for r in rows)
        ksum[c]["seeds"] = len(rows)
    log("\nKnowledge (20% of true edges required, 20% of non-edges forbidden), mean ± sd:\n"
        + markdown(["data", "forbidden / required", "SHD without", "SHD with", "F1 without",
                    "F1 with", "F1 free without", "F1 free with", "forbidden in DAG",
                    "required absent"],
                   [[c, f"{m['forbidden'][0]:.1f} / {m['required'][0]:.1f}",
                     fmt(*m["shd_plain"], 1), fmt(*m["shd_known"], 1), fmt(*m["f1_plain"], 3),
                     fmt(*m["f1_known"], 3), fmt(*m["f1_free_plain"], 3),
                     fmt(*m["f1_free_known"], 3),
                     f"{m['forbidden_in_dag'][0]:g} (without {m['forbidden_in_plain'][0]:.1f})",
                     f"{m['required_missing'][0]:g} (without "
                     f"{m['required_missing_plain'][0]:.1f})"] for c, m in ksum.items()]))
    msum = {}
    for c in args.configs:
        for share in MISSING:
            for rule in args.rules:
                rows = [r for r in mrows if (r["config"], r["missing"], r["rule"]) ==
                        (c, share, rule)]
                msum[f"{c} {share:g} {rule}"] = {
                    "config": c, "missing": share, "rule": rule, "seeds": len(rows),
                    **{k: mean_sd(r[k] for r in rows) for k in
                       ("shd_full", "f1_full", "shd", "f1", "party_share_max")},
                    "shd_diff": mean_sd(r["shd"] - r["shd_full"] for r in rows),
                    "f1_diff": mean_sd(r["f1"] - r["f1_full"] for r in rows),
                    "stops": sum(r["stops"] for r in rows)}
    log("\nMissing cells (MCAR), mean ± sd; differences paired over the seeds:\n" + markdown(
        ["data", "missing", "rule", "largest party share", "SHD complete", "SHD", "F1 complete",
         "F1", "F1 - complete", "runs stopped"],
        [[m["config"], f"{m['missing']:.0%}", m["rule"], fmt(*m["party_share_max"], 3),
          fmt(*m["shd_full"], 1), fmt(*m["shd"], 1), fmt(*m["f1_full"], 3), fmt(*m["f1"], 3),
          fmt(*m["f1_diff"], 3), m["stops"]] for m in msum.values()]))
    checks = {}
    for c, m in ksum.items():
        checks[f"{c}: knowledge lowers mean SHD {m['shd_plain'][0]:.1f} -> "
               f"{m['shd_known'][0]:.1f}"] = check(m["shd_known"][0] < m["shd_plain"][0])
        checks[f"{c}: knowledge raises mean F1 {m['f1_plain'][0]:.3f} -> "
               f"{m['f1_known'][0]:.3f}"] = check(m["f1_known"][0] > m["f1_plain"][0])
    checks["no forbidden edge in any DAG, every required edge in every DAG"] = check(
        all(r["forbidden_in_dag"] == 0 and r["required_missing"] == 0 for r in krows))
    checks["no run stopped: every party's share below max-missing"] = check(
        not any(r["stops"] for r in mrows))
    finish(script_name(__file__), args, clock, checks, "VFedCD knowledge and missing values",
           {"knowledge": ksum, "missing": msum, "per_seed": {"knowledge": krows,
                                                             "missing": mrows}})


if __name__ == "__main__":
    main()
