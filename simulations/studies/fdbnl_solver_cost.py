"""FDBNL server-step cost (issue 12): our reference loop, old vs new solver, vs the official code.

Data: d = 15, p = 1, 50 rows per client, K clients (contiguous blocks of one K x 50-row series),
intra-slice ER mean degree 4, inter-slice out-degree 1, the official code's generator and
weights U(±[0.5, 2]); lambda_W = lambda_A = 0.1, thresholds 0.3 / 0.3.

Solvers of the server step (3) (``FDBNLSettings.server_*``):

- ``old``: W and A together by L-BFGS-B from zero, 5 chained calls (the official code's solver
  and ours before issue 12);
- ``closed-form A``: A = soft_threshold(V_A, lambda_A / (K rho2)), L-BFGS-B on W only, still
  from zero with 5 calls;
- ``+ warm start``: the same from the previous round's W;
- ``new``: the defaults (closed-form A, warm start, 1 call).

Settings profiles: ``official`` runs our loop with the official code's choices (lambda applied
once in the server step, phi1 = 1.65, the dual update with W^(t)) so that both solve the same
problem on the same data; ``app`` is the App's defaults (pooled lambda, Eq. (4); phi1 1.6 when
results/fdbnl_solver_cost.json was written, 2.5 since issue 12).
The official ``package/FDBNL.py`` (PeChen123/FDBN_Learning) is loaded from ``--official`` (its
git directory, its checkout or the file) and run in this process on the same arrays; it needs
numpy and scipy only. Cost is CPU seconds of this process (``time.process_time``, BLAS pinned to
one thread) and objective evaluations (``nfev`` of every L-BFGS-B call); SHD = FP + FN.

    python simulations/studies/fdbnl_solver_cost.py                   # evaluation seeds 3000-3004
    python simulations/studies/fdbnl_solver_cost.py --seeds 100..104  # development seeds
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # CPU seconds of one thread: set before numpy loads BLAS

import contextlib  # noqa: E402
import io  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import _sims  # noqa: E402, F401 - simulations/ on sys.path
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402
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
    table,
)

from fedcausal_flwr.dbn import model as dbn  # noqa: E402
from fedcausal_flwr.dbn import objective  # noqa: E402 - calls scipy.optimize as sopt
from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics  # noqa: E402
from fedcausal_flwr.dbn.synthetic import federated_dbn  # noqa: E402

NAME = script_name(__file__)
D, N_K, LAM, TAU = 15, 50, 0.1, 0.3
OFFICIAL_DEFAULT = Path("/work/.mirror/PeChen123+FDBN_Learning/repo")
OFFICIAL_FILE = "package/FDBNL.py"
SOLVERS: dict[str, dict[str, Any]] = {
    "old": {"server_a_step": "lbfgs", "server_warm_start": False, "server_restarts": 5},
    "closed-form A": {"server_a_step": "closed-form", "server_warm_start": False,
                      "server_restarts": 5},
    "+ warm start": {"server_a_step": "closed-form", "server_warm_start": True,
                     "server_restarts": 5},
    "new": {},
}
PROFILES: dict[str, dict[str, Any]] = {
    "official": {"lambda_scale": "paper", "phi1": 1.65, "dual_update": "code"},
    "app": {},
}
KEYS = ("cpu_s", "cpu_s_per_round", "nfev_per_round", "rounds", "shd_w", "shd_a", "tpr_w")


class Counter:
    """``scipy.optimize`` whose ``minimize`` adds up ``nfev``; installed as a module's ``sopt``."""

    def __init__(self) -> None:
        self.nfev = 0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(scipy.optimize, name)

    def minimize(self, *args: Any, **kw: Any) -> Any:
        res = scipy.optimize.minimize(*args, **kw)
        self.nfev += int(res.nfev)
        self.calls += 1
        return res


@contextlib.contextmanager
def counting(*modules: Any):
    """Count the L-BFGS-B evaluations of ``modules`` (each imports scipy.optimize as sopt)."""
    counter, saved = Counter(), [m.sopt for m in modules]
    for m in modules:
        m.sopt = counter
    try:
        yield counter
    finally:
        for m, s in zip(modules, saved, strict=True):
            m.sopt = s


def official_source(where: Path, path: str) -> str:
    """The text of ``path`` in the official repository: ``where`` is a checkout, its bare git
    directory (the fetch tool's mirror) or the file itself."""
    if where.is_file():
        return where.read_text()
    if (where / path).is_file():
        return (where / path).read_text()
    return subprocess.run(["git", f"--git-dir={where}", "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def load_official(where: Path | None) -> types.ModuleType | None:
    """The official FDBNL module from a git directory, a checkout or the file; None if absent."""
    if where is None or not where.exists():
        return None
    source = official_source(where, OFFICIAL_FILE)
    mod = types.ModuleType("fdbn_learning_official")
    mod.__file__ = str(where)
    exec(compile(source, f"{where}:{OFFICIAL_FILE}", "exec"), mod.__dict__)  # noqa: S102
    return mod


def scores(W: np.ndarray, A: np.ndarray, truth: tuple[np.ndarray, np.ndarray]) -> dict:
    m = dbn_graph_metrics(W, A, truth[0], truth[1], TAU, TAU)
    return {k: float(m[k]) for k in ("shd_w", "shd_a", "tpr_w", "fdr_w", "tpr_a")}


def run_ours(moms: list[dbn.Moments], truth, profile: str, solver: str) -> dict:
    s = dbn.FDBNLSettings(lambda_w=LAM, lambda_a=LAM, tau_w=TAU, tau_a=TAU,
                          **PROFILES[profile], **SOLVERS[solver])
    with counting(objective) as c:
        t0 = time.process_time()
        state, hist = dbn.fdbnl_reference(moms, s)
        cpu = time.process_time() - t0
    r = len(hist)
    return {"cpu_s": cpu, "rounds": r, "cpu_s_per_round": cpu / r, "nfev": c.nfev,
            "nfev_per_round": c.nfev / r, "h": state.h, **scores(state.W, state.A, truth)}


def run_official(mod: types.ModuleType, clients, truth) -> dict:
    X = np.stack([c[0] for c in clients])
    Y = np.stack([c[1] for c in clients])
    bounds = mod.opt_boundary(X[0], Y[0], D)
    with counting(mod) as c, contextlib.redirect_stdout(io.StringIO()):
        t0 = time.process_time()
        W, A = mod.FDBNL(X, Y, bounds, LAM, LAM, w_threshold=TAU, a_threshold=TAU)
        cpu = time.process_time() - t0
    r = c.calls // 5  # its server step is 5 chained L-BFGS-B calls per round
    return {"cpu_s": cpu, "rounds": r, "cpu_s_per_round": cpu / r, "nfev": c.nfev,
            "nfev_per_round": c.nfev / r, **scores(W, A, truth)}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[3000, 3001, 3002, 3003, 3004])
    ap.add_argument("--K", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--official-K", type=int, nargs="*", default=[8],
                    help="K values at which the official code runs (its objective is O(K))")
    ap.add_argument("--official", type=Path, default=OFFICIAL_DEFAULT,
                    help="the official FDBN_Learning repository: git dir, checkout or FDBNL.py")
    ap.add_argument("--profiles", nargs="+", choices=tuple(PROFILES), default=list(PROFILES))
    ap.add_argument("--solvers", nargs="+", choices=tuple(SOLVERS), default=list(SOLVERS))
    ap.add_argument("--ablation-K", type=int, nargs="*", default=[8],
                    help="K values at which the intermediate solvers run (old and new: every K)")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.K, args.official_K = args.seeds[:1], [8], [8]
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # expm overflow at trial points
    official = load_official(args.official)
    total = Clock()
    log(f"{NAME}: d={D} n_k={N_K} K={args.K} lambda={LAM} seeds={args.seeds} "
        f"official={'loaded from ' + str(args.official) if official else 'NOT FOUND'}")
    per_seed: list[dict] = []
    for K in args.K:
        for seed in args.seeds:
            clients, truths = federated_dbn(seed, K, N_K, D, p=1, degree_w=4.0, degree_a=1.0,
                                            weights="code", generator="code")
            moms = [dbn.moments(*c) for c in clients]
            for profile in args.profiles:
                for solver in args.solvers:
                    if solver not in ("old", "new") and K not in args.ablation_K:
                        continue
                    r = run_ours(moms, truths[0], profile, solver)
                    per_seed.append({"K": K, "seed": seed, "who": f"{profile}/{solver}", **r})
                    log(f"  K={K} seed={seed} {profile}/{solver}: {r['cpu_s']:.2f} CPU s, "
                        f"{r['rounds']} rounds, {r['nfev_per_round']:.0f} evals/round, "
                        f"SHD W/A {r['shd_w']:.0f}/{r['shd_a']:.0f}")
            if official is not None and K in args.official_K:
                r = run_official(official, clients, truths[0])
                per_seed.append({"K": K, "seed": seed, "who": "official code", **r})
                log(f"  K={K} seed={seed} official code: {r['cpu_s']:.2f} CPU s, "
                    f"{r['rounds']} rounds, {r['nfev_per_round']:.0f} evals/round, "
                    f"SHD W/A {r['shd_w']:.0f}/{r['shd_a']:.0f}")

    groups: dict[str, dict] = {}
    for row in per_seed:
        groups.setdefault(f"K={row['K']} {row['who']}", {"K": row["K"], "who": row["who"],
                                                          "rows": []})["rows"].append(row)
    summary = {}
    for key, g in groups.items():
        off = {r["seed"]: r for r in per_seed
               if r["K"] == g["K"] and r["who"] == "official code"}
        s = {k: mean_sd(r[k] for r in g["rows"]) for k in KEYS}
        if off and g["who"] != "official code":
            s["cpu_ratio_official"] = mean_sd(r["cpu_s"] / off[r["seed"]]["cpu_s"]
                                              for r in g["rows"])
            s["shd_w_minus_official"] = mean_sd(r["shd_w"] - off[r["seed"]]["shd_w"]
                                                for r in g["rows"])
        summary[key] = {"K": g["K"], "who": g["who"], "seeds": len(g["rows"]), **s}

    rows = [[v["K"], v["who"], fmt(*v["cpu_s"]), fmt(v["cpu_s_per_round"][0], digits=4),
             fmt(v["nfev_per_round"][0], digits=0), fmt(v["rounds"][0], digits=1),
             fmt(*v["shd_w"], 1), fmt(*v["shd_a"], 1),
             fmt(*v["cpu_ratio_official"]) if "cpu_ratio_official" in v else "-"]
            for v in summary.values()]
    log("\n" + table(["K", "solver", "CPU s", "CPU s/round", "evals/round", "rounds",
                      "SHD(W)", "SHD(A)", "CPU / official"], rows))
    checks: dict[str, str] = {}
    new, off = summary.get("K=8 official/new"), summary.get("K=8 official code")
    if new and off:
        checks["K=8: new CPU <= 0.3 x official (mean of per-seed ratios)"] = check(
            new["cpu_ratio_official"][0] <= 0.3)
        checks["K=8: new SHD(W) <= official SHD(W) (mean)"] = check(
            new["shd_w"][0] <= off["shd_w"][0] + 1e-9)
    for profile in args.profiles:
        per_round = {K: summary[f"K={K} {profile}/new"]["cpu_s_per_round"][0]
                     for K in args.K if f"K={K} {profile}/new" in summary}
        if len(per_round) > 1:
            lo = per_round[min(per_round)]
            checks[f"{profile}/new: CPU s/round at every K <= 1.5 x K={min(per_round)}'s"] = \
                check(all(v <= 1.5 * lo for v in per_round.values()))
    finish(NAME, args, total, checks, "acceptance (issue 12):",
           {"data": {"d": D, "n_k": N_K, "lambda": LAM, "tau": TAU,
                     "weights": "code", "generator": "code"},
            "solvers": SOLVERS, "profiles": PROFILES, "summary": summary,
            "per_seed": per_seed})


# ----------------------------------------------------------------------------- tables
def table_fdbnl_solver_cost() -> str:
    """FDBNL server-step solvers (issue 12): CPU s, evaluations, SHD per K, vs the official code."""
    r = read_results("fdbnl_solver_cost")
    rows = []
    for v in r["summary"].values():
        profile, _, solver = v["who"].rpartition("/")
        ratio = v.get("cpu_ratio_official")
        rows.append([v["K"], profile or "-", solver, v["seeds"], fmt(*v["cpu_s"]),
                     fmt(v["cpu_s_per_round"][0], digits=4), fmt(v["nfev_per_round"][0], digits=0),
                     fmt(v["rounds"][0], digits=1), fmt(*v["shd_w"], 1), fmt(*v["shd_a"], 1),
                     "-" if ratio is None else fmt(*ratio)])
    return markdown(["K", "settings", "solver", "seeds", "CPU s", "CPU s/round", "evals/round",
                     "rounds", "SHD(W)", "SHD(A)", "CPU / official (per seed)"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fdbnl_solver_cost": table_fdbnl_solver_cost}


if __name__ == "__main__":
    main()
