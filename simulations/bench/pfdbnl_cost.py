"""PFDBNL cost (issue 23): our reference loop with the App defaults and with the local-step
options, beside the official PF_DBN on the same heterogeneous data.

Data: per (d, K), K heterogeneous clients of 200 rows each (``federated_dbn(...,
heterogeneous=True)``: client k's own truth from seed [seed, k]), p = 1, intra-slice ER mean
degree 4, inter-slice out-degree 1, the official code's generator and weights U(±[0.5, 2])
(``weights="code"``): the data its PF_DBN demo is made with, so the official code runs on the
kind of data it was written for, and the weights our Table 1 reports beside the paper's.

Runs (``--runs``):

- ``before``: our ``pfdbnl_reference`` with the App defaults before issue 23 (five chained
  L-BFGS-B calls per local step (10), each round from zero, no iteration cap:
  ``restarts=5, local_start="zero", local_maxiter=0``; FDBNL's lambda 0.05);
- ``defaults``: the App defaults now (one L-BFGS-B call started at the client's own last
  W_k, A_k, which the server sends back, at most ``local_maxiter`` iterations; PFDBNL's own
  lambdas, ``dbn.pfdbnl-lambda-w`` / ``dbn.pfdbnl-lambda-a``, chosen by
  ``../studies/pfdbnl_lambda.py``);
- ``lambda-0.05``: the defaults with FDBNL's lambda_W = lambda_A = 0.05, PFDBNL's own until
  that study (the ``defaults`` of the runs on seeds 10100-10104);
- ``uncapped``: the same start without the iteration cap (``local_maxiter=0``), at 0.05;
- ``lambda-0.1``: the defaults with the official demo's lambda_W = lambda_A = 0.1;
- ``official``: ``PF_DBN`` of ``package/PFDBNL.py`` (PeChen123/FDBN_Learning), loaded from
  ``--official`` (git directory or checkout) and run in this process on the same arrays with
  its demo's settings (mu 0.1, lambda_W = lambda_A = 0.1).

Cost is CPU seconds of this process (``time.process_time``, BLAS pinned to one thread) and
objective evaluations (``nfev`` of every L-BFGS-B call) per client and round. Accuracy is the
mean over clients of SHD(W_k) and SHD(A_k) (FP + FN) of each client's personalized graph
against its own truth, all thresholded at the official demo's 0.3.

    python simulations/bench/pfdbnl_cost.py --seeds 10400..10404   # evaluation seeds
    python simulations/bench/pfdbnl_cost.py --seeds 100..103       # development seeds

``--merge`` keeps the rows of an earlier run (other cells, runs or seeds) in the results
file, so the cells can be run one at a time; ``--merge-from`` adds the rows of runs made apart
(``--out``), and ``--cells`` alone (no cell) only merges and summarizes. Rows are summarized
per block of a hundred seeds (one evaluation set: 10100-10104 before PFDBNL had its own
lambdas, 10400-10404 after).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # CPU seconds of one thread: set before numpy loads BLAS

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import _sims  # noqa: E402, F401 - simulations/ on sys.path
import numpy as np  # noqa: E402
from fdbnl_solver_cost import OFFICIAL_DEFAULT, counting, official_source  # noqa: E402
from harness import (  # noqa: E402
    Clock,
    check,
    finish,
    fmt,
    log,
    markdown,
    mean_sd,
    parser,
    read_results,
    script_name,
    seed_range,
    table,
)

from fedcausal_flwr.dbn import model as dbn  # noqa: E402
from fedcausal_flwr.dbn import objective  # noqa: E402 - calls scipy.optimize as sopt
from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics  # noqa: E402
from fedcausal_flwr.dbn.synthetic import federated_dbn  # noqa: E402

NAME = script_name(__file__)
N_K, TAU, OFFICIAL_MU, OFFICIAL_LAMBDA = 200, 0.3, 0.1, 0.1
OFFICIAL_FILES = ("package/FDBNL.py", "package/PFDBNL.py")  # opt_boundary, PF_DBN
#: FDBNL's lambdas, PFDBNL's until it had its own (``../studies/pfdbnl_lambda.py``)
LAMBDA_0_05 = {"lambda_w": 0.05, "lambda_a": 0.05}
#: our settings of each run (App defaults plus these)
OURS: dict[str, dict[str, Any]] = {
    "before": {"restarts": 5, "local_start": "zero", "local_maxiter": 0, **LAMBDA_0_05},
    "defaults": {},
    "lambda-0.05": LAMBDA_0_05,
    "uncapped": {"local_maxiter": 0, **LAMBDA_0_05},
    "lambda-0.1": {"lambda_w": OFFICIAL_LAMBDA, "lambda_a": OFFICIAL_LAMBDA},
}
KEYS = ("cpu_s", "rounds", "nfev_per_client_round", "shd_w", "shd_a")


def load_official(where: Path | None) -> types.ModuleType | None:
    """The official PF_DBN (with FDBNL.py's ``opt_boundary``) as one module; None if absent."""
    if where is None or not where.exists():
        return None
    mod = types.ModuleType("pf_dbn_official")
    mod.__file__ = str(where)
    for path in OFFICIAL_FILES:  # PFDBNL.py imports matplotlib only to plot: not needed
        source = official_source(where, path).replace("import matplotlib.pyplot as plt", "")
        exec(compile(source, f"{where}:{path}", "exec"), mod.__dict__)  # noqa: S102
    return mod


def client_scores(W_k: list[np.ndarray], A_k: list[np.ndarray],
                  truths: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Mean over clients of SHD(W_k) and SHD(A_k) against each client's truth at TAU."""
    m = [dbn_graph_metrics(W, A, Wt, At, TAU, TAU)
         for W, A, (Wt, At) in zip(W_k, A_k, truths, strict=True)]
    return {"shd_w": float(np.mean([x["shd_w"] for x in m])),
            "shd_a": float(np.mean([x["shd_a"] for x in m]))}


class PerCall:
    """Records each L-BFGS-B call's ``nfev`` of a :class:`fdbnl_solver_cost.Counter`."""

    def __init__(self, counter: Any) -> None:
        self.nfev: list[int] = []
        inner = counter.minimize

        def minimize(*args: Any, **kw: Any) -> Any:
            before = counter.nfev
            res = inner(*args, **kw)
            self.nfev.append(counter.nfev - before)
            return res

        counter.minimize = minimize


def run_ours(moms: list[dbn.Moments], truths, run: str) -> dict[str, float]:
    """Our reference loop with the settings of ``run``: cost and per-client accuracy."""
    s = dbn.PFDBNLSettings(**OURS[run])
    with counting(objective) as c:
        calls = PerCall(c)
        t0 = time.process_time()
        state, hist = dbn.pfdbnl_reference(moms, s)
        cpu = time.process_time() - t0
    K, r = len(moms), len(hist)
    per_round = np.reshape(calls.nfev, (r, -1)).sum(axis=1)  # every client calls alike
    return {"cpu_s": cpu, "rounds": r, "nfev_per_client_round": c.nfev / (r * K),
            "nfev_by_round": [int(v) for v in per_round],
            **client_scores([state.W_local[k] for k in range(K)],
                            [state.A_local[k] for k in range(K)], truths)}


def run_official(mod: types.ModuleType, clients, truths) -> dict[str, float]:
    """The official PF_DBN on the same arrays: cost and per-client accuracy."""
    X = np.stack([c[0] for c in clients])
    Y = np.stack([c[1] for c in clients])
    bounds = mod.opt_boundary(X[0], Y[0], X.shape[2])
    with counting(mod) as c, contextlib.redirect_stdout(io.StringIO()):
        t0 = time.process_time()
        _, _, W_k, A_k = mod.PF_DBN(X, Y, bounds, OFFICIAL_MU, OFFICIAL_LAMBDA, OFFICIAL_LAMBDA,
                                    w_threshold=TAU, a_threshold=TAU)
        cpu = time.process_time() - t0
    K = len(clients)
    r = c.calls // (K + 1)  # one L-BFGS-B call per client and one global call per round
    return {"cpu_s": cpu, "rounds": r, "nfev_per_client_round": c.nfev / (r * K),
            **client_scores(W_k, A_k, truths)}


def merged(per_seed: list[dict], more: Sequence[Path] = ()) -> list[dict]:
    """The earlier results' rows (other cells, runs or seeds), then those of the results files
    ``more`` (runs made apart with ``--out``), followed by this run's."""
    try:
        old = read_results(NAME)["per_seed"]
    except FileNotFoundError:
        old = []
    for path in more:
        rows = json.loads(Path(path).read_text())["per_seed"]
        keys = {(r["d"], r["K"], r["seed"], r["run"]) for r in rows}
        old = [r for r in old if (r["d"], r["K"], r["seed"], r["run"]) not in keys] + rows
    new = {(r["d"], r["K"], r["seed"], r["run"]) for r in per_seed}
    return [r for r in old if (r["d"], r["K"], r["seed"], r["run"]) not in new] + per_seed


def summarize(per_seed: list[dict]) -> dict[str, dict]:
    """Mean ± sd per (seed block, d, K, run), and ours / official per seed where both ran."""
    groups: dict[tuple, list[dict]] = {}
    for row in sorted(per_seed, key=lambda r: (r["seed"] // 100, r["d"], r["K"], r["seed"])):
        groups.setdefault((row["seed"] // 100, row["d"], row["K"], row["run"]), []).append(row)
    out = {}
    for (block, d, K, run), rows in groups.items():
        s: dict[str, Any] = {"d": d, "K": K, "run": run, "seeds": [r["seed"] for r in rows]}
        s.update({k: mean_sd(r[k] for r in rows) for k in KEYS})
        off = {r["seed"]: r for r in groups.get((block, d, K, "official"), [])}
        paired = [r for r in rows if r["seed"] in off]
        if run != "official" and paired:
            s["cpu_ratio_official"] = mean_sd(r["cpu_s"] / off[r["seed"]]["cpu_s"]
                                              for r in paired)
            for k in ("shd_w", "shd_a"):
                s[f"{k}_minus_official"] = mean_sd(r[k] - off[r["seed"]][k] for r in paired)
        out[f"seeds={seed_range(s['seeds'])} d={d} K={K} {run}"] = s
    return out


def rows_of(summary: dict[str, dict]) -> list[list[str]]:
    """One table row per (d, K, run)."""
    rows = []
    for v in summary.values():
        paired = [v.get(k) for k in ("cpu_ratio_official", "shd_w_minus_official",
                                     "shd_a_minus_official")]
        rows.append([v["d"], v["K"], v["run"], seed_range(v["seeds"]), fmt(*v["cpu_s"], 1),
                     fmt(v["rounds"][0], digits=1), fmt(v["nfev_per_client_round"][0], digits=0),
                     fmt(*v["shd_w"], 2), fmt(*v["shd_a"], 2),
                     *("-" if x is None else fmt(*x, 3 if i == 0 else 2)
                       for i, x in enumerate(paired))])
    return rows


HEADERS = ["d", "K", "run", "seeds", "CPU s", "rounds", "evals / client / round",
           "SHD(W_k)", "SHD(A_k)", "CPU / official (per seed)", "SHD(W_k) - official",
           "SHD(A_k) - official"]


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[10400, 10401, 10402, 10403, 10404])
    ap.add_argument("--cells", nargs="*", default=["10x6", "10x32", "20x6", "20x32"],
                    help="d x K cells, e.g. 10x6 (none: only merge and summarize)")
    ap.add_argument("--runs", nargs="+", choices=(*OURS, "official"),
                    default=[*OURS, "official"])
    ap.add_argument("--seeds-big", type=int, default=1,
                    help="seeds (the first of --seeds) of the cells other than the first")
    ap.add_argument("--before-seeds", type=int, default=5,
                    help="seeds (the first of those of a cell) at which 'before' runs (it "
                         "costs ~6x the official code)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the earlier results' rows of other cells, runs or seeds")
    ap.add_argument("--merge-from", type=Path, nargs="+", default=[],
                    help="with --merge: also the rows of these results files (runs made apart "
                         "with --out)")
    ap.add_argument("--official", type=Path, default=OFFICIAL_DEFAULT,
                    help="the official FDBN_Learning repository: git dir or checkout")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.cells, args.runs = args.seeds[:1], ["10x6"], ["defaults"]
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # expm overflow at trial points
    official = load_official(args.official) if "official" in args.runs else None
    total = Clock()
    log(f"{NAME}: n_k={N_K} cells={args.cells} runs={args.runs} seeds={args.seeds} "
        f"official={'loaded from ' + str(args.official) if official else 'NOT RUN'}")
    per_seed: list[dict] = []
    for i, cell in enumerate(args.cells):
        d, K = (int(v) for v in cell.split("x"))
        seeds = args.seeds if i == 0 else args.seeds[:args.seeds_big]
        for seed in seeds:
            clients, truths = federated_dbn(seed, K, N_K, d, p=1, degree_w=4.0, degree_a=1.0,
                                            weights="code", generator="code",
                                            heterogeneous=True)
            moms = [dbn.moments(*c) for c in clients]
            for run in args.runs:
                if run == "before" and seed not in seeds[:args.before_seeds]:
                    continue
                if run == "official":
                    if official is None:
                        continue
                    r = run_official(official, clients, truths)
                else:
                    r = run_ours(moms, truths, run)
                per_seed.append({"d": d, "K": K, "seed": seed, "run": run, **r})
                log(f"  d={d} K={K} seed={seed} {run}: {r['cpu_s']:.1f} CPU s, "
                    f"{r['rounds']} rounds, {r['nfev_per_client_round']:.0f} evals/client/round"
                    f", SHD W_k/A_k {r['shd_w']:.2f}/{r['shd_a']:.2f}")
    if args.merge:
        per_seed = merged(per_seed, args.merge_from)
    summary = summarize(per_seed)
    log("\n" + table(HEADERS, rows_of(summary)))
    checks: dict[str, str] = {}
    for v in summary.values():
        if v["run"] != "official" and "cpu_ratio_official" in v:
            cell = f"seeds {seed_range(v['seeds'])} d={v['d']} K={v['K']} {v['run']}"
            checks[f"{cell}: CPU <= 0.3 x official (mean of per-seed ratios)"] = check(
                v["cpu_ratio_official"][0] <= 0.3)
            for k, name in (("shd_w", "SHD(W_k)"), ("shd_a", "SHD(A_k)")):
                checks[f"{cell}: {name} <= official (mean)"] = check(
                    v[f"{k}_minus_official"][0] <= 1e-9)
    finish(NAME, args, total, checks, "acceptance (issue 23):",
           {"data": {"n_k": N_K, "p": 1, "degree_w": 4.0, "degree_a": 1.0, "weights": "code",
                     "generator": "code", "heterogeneous": True, "tau": TAU},
            "ours": OURS, "official_settings": {"mu": OFFICIAL_MU, "lambda": OFFICIAL_LAMBDA},
            "summary": summary, "per_seed": per_seed})


# ----------------------------------------------------------------------------- tables
def table_pfdbnl_cost() -> str:
    """PFDBNL: App defaults and local-step options beside the official PF_DBN (issue 23)."""
    return markdown(HEADERS, rows_of(read_results(NAME)["summary"]))


#: this script's tables in RESULTS.md (``<!-- table:NAME -->``), rendered by tables.py
TABLES = {"pfdbnl_cost": table_pfdbnl_cost}


if __name__ == "__main__":
    main()
