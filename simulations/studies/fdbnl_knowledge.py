"""FDBNL with prior knowledge, sites that hold different variables, and missing cells (issue 22).

Data: the generators of the defaults study (``fdbnl_defaults.py``: ER or scale-free DAGs,
homogeneous or heterogeneous noise, d 10/20, K 4/16/64, 50 rows per client; paper weights).
Every fit is the in-process reference loop (``fdbnl_reference``), the core calls of the Flower
strategy in the same order, with the App's default settings; graphs thresholded at the
default tau (required edges kept). Parts:

- ``knowledge``: 20% of the true edges (W and A together) drawn as required and 20% of the
  true non-edges as forbidden (seeded per data seed); SHD(W) + SHD(A) with and without;
  forbidden edges present and required edges absent are counted (both must be 0).
- ``sites``: each site misses a random 20% of the variables (its own draw); the union graph
  (``variables="union"``) against the run where every site sees every variable, and against
  the naive alternative: only the variables every site shares (its graph has no edge at the
  others); entries that no site informs are counted (flagged unidentified, never an edge).
- ``missing``: 5% and 20% of the cells missing completely at random at every site, and one
  site's first variable dead for the middle 40% of its rows; SHD against the truth beside
  the complete-data run, and the largest share of missing cells of a site (the default
  ``max-missing`` limit 0.5 drops none of them).

    python simulations/studies/fdbnl_knowledge.py --seeds 100..103 \
        --out simulations/results/fdbnl_knowledge_dev.json                     # development
    python simulations/studies/fdbnl_knowledge.py --seeds 9700..9704           # evaluation

(what made ``results/fdbnl_knowledge_dev.json`` and ``results/fdbnl_knowledge.json``, their
``meta.argv``; ``results/knowledge.md`` reports the evaluation seeds 9700-9704.)
"""

from __future__ import annotations

import time
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from dbn_common import Clock, client_moments, fmt, log, mean_sd, parser, settings
from fdbnl_defaults import HET_NOISE, N_K, SCENARIOS
from harness import markdown, read_results, write_results

from fedcausal_flwr.data.timeseries import lagged
from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
from fedcausal_flwr.dbn.model import FDBNLSettings, fdbnl_reference, moments, threshold
from fedcausal_flwr.dbn.sites import SiteView, lag_index, shared
from fedcausal_flwr.dbn.synthetic import federated_dbn
from fedcausal_flwr.knowledge import Knowledge, Masks
from fedcausal_flwr.names import default_names

NAME = "fdbnl_knowledge"
PARTS = ("knowledge", "sites", "missing")
SHARE = 0.2  # of true edges required, of true non-edges forbidden, of variables missing


def data(scenario: str, seed: int) -> tuple[list, np.ndarray, np.ndarray]:
    graph, noise, d, K = SCENARIOS[scenario]
    clients, truths = federated_dbn(seed, K, N_K, d, p=1, weights="paper", generator="svar",
                                    graph=graph,
                                    noise_scales=HET_NOISE if noise == "het" else None)
    return clients, *truths[0]


def scores(W: np.ndarray, A: np.ndarray, W0: np.ndarray, A0: np.ndarray,
           masks: Masks | None = None) -> dict[str, float]:
    """SHD(W), SHD(A) and TPR(W) of the graphs thresholded at the default tau, required
    entries kept (NaN, an unidentified entry, is no edge)."""
    tau = FDBNLSettings().tau_w
    W, A = np.nan_to_num(W), np.nan_to_num(A)
    Wt = threshold(W, tau, None if masks is None else masks.require_W)
    At = threshold(A, tau, None if masks is None else masks.require_A)
    m = dbn_graph_metrics(Wt, At, W0, A0, 0.0, 0.0)
    return {"shd_w": m["shd_w"], "shd_a": m["shd_a"], "shd": m["shd_w"] + m["shd_a"],
            "tpr_w": m["tpr_w"]}


def drawn_knowledge(W0: np.ndarray, A0: np.ndarray, rng: np.random.Generator) -> Knowledge:
    """20% of the true edges required, 20% of the true non-edges forbidden (lag-exact)."""
    d = W0.shape[0]
    names = default_names(d)
    cells = [(i, j, 0, W0[i, j] != 0) for i in range(d) for j in range(d) if i != j]
    cells += [(r % d, j, r // d + 1, A0[r, j] != 0) for r in range(A0.shape[0]) for j in range(d)]
    edges = [c for c in cells if c[3]]
    non = [c for c in cells if not c[3]]
    pick = lambda xs: [xs[i] for i in rng.choice(len(xs), int(round(SHARE * len(xs))),  # noqa: E731
                                                 replace=False)]
    text = lambda xs: ", ".join(f"{names[i]}->{names[j]}@{lag}" for i, j, lag, _ in xs)  # noqa: E731
    return Knowledge.parse(forbid=text(pick(non)), require=text(pick(edges)))


def part_knowledge(scenario: str, seed: int) -> dict[str, Any]:
    clients, W0, A0 = data(scenario, seed)
    moms, s = client_moments(clients), FDBNLSettings()
    masks = drawn_knowledge(W0, A0, np.random.default_rng([seed, 22])).masks(
        default_names(W0.shape[0]), 1)
    t0 = time.process_time()
    plain, _ = fdbnl_reference(moms, s, seed)
    t1 = time.process_time()
    known, _ = fdbnl_reference(moms, s, seed, knowledge=masks)
    t2 = time.process_time()
    tau = s.tau_w
    Wt = threshold(known.W, tau, masks.require_W)
    At = threshold(known.A, tau, masks.require_A)
    return {"without": scores(plain.W, plain.A, W0, A0),
            "with": scores(known.W, known.A, W0, A0, masks),
            "required": int(masks.require_W.sum() + masks.require_A.sum()),
            "forbidden": int(masks.forbid_W.sum() + masks.forbid_A.sum()),
            "forbidden_present": int(np.sum(Wt[masks.forbid_W] != 0)
                                     + np.sum(At[masks.forbid_A] != 0)),
            "required_absent": int(np.sum(Wt[masks.require_W] == 0)
                                   + np.sum(At[masks.require_A] == 0)),
            "cpu_s": [t1 - t0, t2 - t1]}


def site_data(clients: list, d: int, rng: np.random.Generator
              ) -> tuple[list[list[str]], list]:
    """Each site's own variables (a random 20% left out, in a shuffled column order) and the
    moments of its own columns."""
    names = default_names(d)
    own, moms = [], []
    for Xt, Xlag in clients:
        keep = np.sort(rng.choice(d, d - int(round(SHARE * d)), replace=False))
        keep = rng.permutation(keep)
        own.append([names[i] for i in keep])
        moms.append(moments(Xt[:, keep], Xlag[:, lag_index(keep, d, 1)]))
    return own, moms


def part_sites(scenario: str, seed: int) -> dict[str, Any]:
    clients, W0, A0 = data(scenario, seed)
    d, s = W0.shape[0], FDBNLSettings()
    names = default_names(d)
    own, moms = site_data(clients, d, np.random.default_rng([seed, 23]))
    full, _ = fdbnl_reference(client_moments(clients), s, seed)
    views = [SiteView(o, names, 1) for o in own]
    union, _ = fdbnl_reference(moms, s, seed, sites=views)
    n_W = np.sum([v.informed()[0] for v in views], axis=0)
    n_A = np.sum([v.informed()[1] for v in views], axis=0)
    W_u = np.where(n_W == 0, np.nan, union.W)
    A_u = np.where(n_A == 0, np.nan, union.A)
    common = shared(own)
    out = {"full": scores(full.W, full.A, W0, A0), "union": scores(W_u, A_u, W0, A0),
           "shared_variables": len(common),
           "unidentified": int(np.sum(n_W[~np.eye(d, dtype=bool)] == 0) + np.sum(n_A == 0))}
    if len(common) >= 2:
        sv = [SiteView(o, common, 1) for o in own]
        naive, _ = fdbnl_reference(moms, s, seed, sites=sv)
        idx = np.array([names.index(n) for n in common])
        W_n, A_n = np.zeros((d, d)), np.zeros((d, d))
        W_n[np.ix_(idx, idx)] = naive.W
        A_n[np.ix_(idx, idx)] = naive.A
        out["shared"] = scores(W_n, A_n, W0, A0)
    else:
        out["shared"] = scores(np.zeros((d, d)), np.zeros((d, d)), W0, A0)
    return out


def series(Xt: np.ndarray, Xlag: np.ndarray) -> np.ndarray:
    """The series behind a p = 1 lagged design."""
    return np.vstack([Xlag[:1], Xt])


def part_missing(scenario: str, seed: int) -> dict[str, Any]:
    clients, W0, A0 = data(scenario, seed)
    s, rng = FDBNLSettings(), np.random.default_rng([seed, 24])
    full, _ = fdbnl_reference(client_moments(clients), s, seed)
    out: dict[str, Any] = {"complete": scores(full.W, full.A, W0, A0)}
    for name, rate in (("mcar_5", 0.05), ("mcar_20", 0.2), ("dead_sensor", 0.0)):
        moms, worst = [], 0.0
        for k, (Xt, Xlag) in enumerate(clients):
            x = series(Xt, Xlag)
            x[rng.random(x.shape) < rate] = np.nan
            if name == "dead_sensor" and k == 0:
                n = len(x)
                x[int(0.3 * n):int(0.7 * n), 0] = np.nan
            worst = max(worst, float(np.mean(np.isnan(x))))
            moms.append(moments(*lagged(x, 1, pad="drop", missing=True)))
        st, _ = fdbnl_reference(moms, s, seed)
        out[name] = {**scores(st.W, st.A, W0, A0), "worst_site_missing": worst}
    return out


RUN = {"knowledge": part_knowledge, "sites": part_sites, "missing": part_missing}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means ± sd per (part, scenario) of each arm's SHD and the counts."""
    out: dict[str, Any] = {}
    for part in PARTS:
        for sc in SCENARIOS:
            rs = [r for r in rows if r["part"] == part and r["scenario"] == sc]
            if not rs:
                continue
            cell: dict[str, Any] = {"seeds": [r["seed"] for r in rs]}
            for arm, v in rs[0]["result"].items():
                if isinstance(v, dict):
                    cell[arm] = {k: mean_sd(r["result"][arm][k] for r in rs) for k in v}
                elif isinstance(v, (int, float)):
                    cell[arm] = mean_sd(r["result"][arm] for r in rs)
            if part == "knowledge":
                diff = [r["result"]["without"]["shd"] - r["result"]["with"]["shd"] for r in rs]
                cell["shd_reduction"] = mean_sd(diff)
                cell["worse_runs"] = int(sum(x < 0 for x in diff))
            out.setdefault(part, {})[sc] = cell
    return out


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101, 102, 103])
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = ap.parse_args()
    if args.quick:
        args.scenarios, args.seeds = ["er-hom-d10-K4"], [100]
    clock, rows = Clock(), []
    for part in args.parts:
        for sc in args.scenarios:
            for seed in args.seeds:
                res = RUN[part](sc, seed)
                rows.append({"part": part, "scenario": sc, "seed": seed, "result": res})
                log(f"{part:9s} {sc:15s} seed {seed}: " + ", ".join(
                    f"{k} {v['shd']:.0f}" for k, v in res.items()
                    if isinstance(v, dict) and "shd" in v) + f"  ({clock():.0f} s)")
    summ = summarize(rows)
    print(tables(summ))
    write_results(NAME, {"settings": settings(args), "summary": summ, "rows": rows}, args.out)


def tables(summ: dict[str, Any]) -> str:
    """The three parts as Markdown tables (means ± sample sd over the seeds)."""
    out = []
    if k := summ.get("knowledge"):
        out.append(markdown(
            ["scenario", "seeds", "SHD without", "SHD with", "reduction", "runs worse",
             "required / forbidden", "forbidden present", "required absent"],
            [[sc, len(c["seeds"]), fmt(*c["without"]["shd"], 1), fmt(*c["with"]["shd"], 1),
              fmt(*c["shd_reduction"], 1), c["worse_runs"],
              f"{c['required'][0]:.0f} / {c['forbidden'][0]:.0f}",
              f"{c['forbidden_present'][0]:.0f}", f"{c['required_absent'][0]:.0f}"]
             for sc, c in k.items()]))
    if k := summ.get("sites"):
        out.append(markdown(
            ["scenario", "seeds", "SHD every site sees all", "SHD union", "SHD shared only",
             "shared variables", "unidentified entries"],
            [[sc, len(c["seeds"]), fmt(*c["full"]["shd"], 1), fmt(*c["union"]["shd"], 1),
              fmt(*c["shared"]["shd"], 1), fmt(*c["shared_variables"], 1),
              fmt(*c["unidentified"], 1)] for sc, c in k.items()]))
    if k := summ.get("missing"):
        out.append(markdown(
            ["scenario", "seeds", "SHD complete", "SHD 5% missing", "SHD 20% missing",
             "SHD dead sensor", "worst site's missing share"],
            [[sc, len(c["seeds"]), fmt(*c["complete"]["shd"], 1), fmt(*c["mcar_5"]["shd"], 1),
              fmt(*c["mcar_20"]["shd"], 1), fmt(*c["dead_sensor"]["shd"], 1),
              f"{c['mcar_20']['worst_site_missing'][0]:.2f}"] for sc, c in k.items()]))
    return "\n\n".join(out)


def table_fdbnl_knowledge() -> str:
    """Issue 22's FDBNL tables (fdbnl_knowledge.json, evaluation seeds)."""
    return tables(read_results(NAME)["summary"])


TABLES = {"fdbnl_knowledge": table_fdbnl_knowledge}

if __name__ == "__main__":
    main()
