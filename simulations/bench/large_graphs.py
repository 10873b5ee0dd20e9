"""Where FDBNL's time goes as the graph grows (issue 23, goal 4).

The reference loop (``fdbnl_reference``'s core calls in its order, App defaults) on stationary
SVAR data (ER, mean degree 4, p = 1, paper weights), K clients of ``--rows`` rows each, one
thread (BLAS pinned), CPU seconds (``time.process_time``) split by component:

- ``client``: the clients' closed-form local steps (2), all K per round (by Woodbury's
  identity when a client has fewer rows than (p + 1) d, as here from d = 150);
- ``expm``: the matrix exponentials of h inside the server step (3) (one per objective
  evaluation, one per call for the solver's scaling; h of the new W, and the next round's
  scaling where the support holds, reuse the latest one);
- ``bounds``: scipy's conversion of the L-BFGS-B bounds (``Bounds`` -> old list -> arrays);
- ``lbfgsb``: the rest of the server step (L-BFGS-B's own iterations, the objective without
  h, the duals).

``--solvers``: ``screened`` (the default server step: L-BFGS-B on the entries that can be
nonzero, curvature-scaled) and/or ``split`` (before: all 2 d^2 split variables). Also the
rounds, matrix exponentials per round, nonzero entries of W, SHD(W)/SHD(A) at the default tau,
the server state's size (W, A and 2K duals), a client's moments, the peak memory of the
process (server and clients together) and the exponent of CPU per round ~ d^b fitted over
the sizes. ``--max-rounds`` caps a large d (then the per-round numbers are measured, the
total is not). ``--flwr``: each (d, K) also under ``flwr run`` (Ray).

    python simulations/bench/large_graphs.py --sizes 50 100 200 400 --solvers split screened
    python simulations/bench/large_graphs.py --sizes 1000 --clients 8 32 --flwr \
        --out simulations/results/large_graphs_d1000.json      # development seed 100
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # CPU seconds of one thread: set before numpy loads BLAS

import itertools  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import _sims  # noqa: E402, F401 - simulations/ on sys.path
import numpy as np  # noqa: E402
import scipy.optimize._lbfgsb_py as slb  # noqa: E402
import scipy.optimize._minimize as smin  # noqa: E402
from harness import fmt, log, markdown, parser, read_results, settings, write_results  # noqa: E402

from fedcausal_flwr.dbn import model as dbn  # noqa: E402
from fedcausal_flwr.dbn import objective  # noqa: E402
from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics  # noqa: E402
from fedcausal_flwr.dbn.synthetic import federated_dbn  # noqa: E402

NAME = "large_graphs"


class Meter:
    """CPU seconds and calls per component, by wrapping the functions that do the work."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    @contextmanager
    def part(self, name: str):
        t0 = time.process_time()
        try:
            yield
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - t0
            self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        fn = getattr(owner, attr)

        def timed(*a, **k):
            with self.part(name):
                return fn(*a, **k)

        setattr(owner, attr, timed)


METER = Meter()
METER.wrap(objective, "_expm", "expm")  # h(W)'s matrix exponentials (not the kept ones)
METER.wrap(smin, "new_bounds_to_old", "bounds")  # minimize: Bounds -> old list
METER.wrap(slb, "old_bound_to_new", "bounds")  # L-BFGS-B: old list -> arrays


def run(d: int, K: int, rows: int, seed: int, max_rounds: int, screened: bool = True
        ) -> dict[str, Any]:
    clients, truths = federated_dbn(seed, K, rows, d, p=1, weights="paper", generator="svar")
    m = METER
    m.cpu.clear()
    m.calls.clear()
    t0 = time.process_time()
    moms = [dbn.moments(*c) for c in clients]
    moments_s = time.process_time() - t0
    s = dbn.FDBNLSettings(max_rounds=max_rounds, server_screen=screened)
    state = dbn.initial_state(d, 1, s.rho1, s.rho2)
    rounds = 0
    t_all = time.process_time()
    while not dbn.converged(state, **s.stop_args()):
        with m.part("client"):
            local = {k: dbn.admm_local_step(moms[k], *dbn.fdbnl_client_payload(state, k),
                                            rho2=state.rho2) for k in range(K)}
        with m.part("server"):
            state = dbn.fdbnl_server_round(state, local, **s.fdbnl_round_args())
        rounds += 1
    total = time.process_time() - t_all
    server = m.cpu["server"]
    expm, bounds = m.cpu.get("expm", 0.0), m.cpu.get("bounds", 0.0)
    metrics = dbn_graph_metrics(state.W, state.A, *truths[0], s.tau_w, s.tau_a)
    return {"d": d, "K": K, "rows": rows, "seed": seed, "rounds": rounds,
            "solver": "screened" if screened else "split",
            "nonzero_w": int(np.sum(state.W != 0)),
            "server_state_mb": sum(a.nbytes for a in (state.W, state.A, *state.beta.values(),
                                                      *state.gamma.values())) / 2**20,
            "converged": bool(state.h <= s.h_tol and state.residual <= s.primal_tol),
            "cpu_s": total, "moments_s": moments_s, "client_s": m.cpu["client"],
            "expm_s": expm, "bounds_s": bounds,
            "lbfgsb_s": server - expm - bounds, "evaluations": m.calls.get("expm", 0),
            "true_edges_w": int(np.sum(truths[0][0] != 0)),
            "shd_w": float(metrics["shd_w"]), "shd_a": float(metrics["shd_a"]),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "client_moments_mb": 8 * (2 * d) ** 2 / 2**20}


def exponent(rows: list[dict[str, Any]]) -> float | None:
    """b of CPU per round ~ d^b, least squares on the log scale."""
    pts = [(r["d"], r["cpu_s"] / r["rounds"]) for r in rows if r["rounds"]]
    if len({d for d, _ in pts}) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def exponents(rows: list[dict[str, Any]]) -> dict[str, float]:
    """:func:`exponent` per solver and K (where at least two sizes ran whole)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["converged"]:
            groups.setdefault(f"{r.get('solver', 'split')}, K {r['K']}", []).append(r)
    return {k: b for k, g in groups.items() if (b := exponent(g)) is not None}


def table(r: dict[str, Any]) -> str:
    rows = [[x["d"], x["K"], x.get("solver", "split"),
             x["rounds"] if x["converged"] else f"{x['rounds']} (capped)",
             f"{x['cpu_s']:.1f}", f"{x['cpu_s'] / x['rounds']:.2f}",
             f"{x['client_s']:.1f}", f"{1e3 * x['client_s'] / x['rounds'] / x['K']:.1f}",
             f"{x['expm_s']:.1f}", f"{x['bounds_s']:.1f}",
             f"{x['lbfgsb_s']:.1f}", f"{x['evaluations'] / x['rounds']:.0f}",
             x.get("nonzero_w", "-"),
             f"{x['shd_w']:.0f} / {x['true_edges_w']}", f"{x['shd_a']:.0f}",
             f"{x.get('server_state_mb', float('nan')):.0f}",
             f"{x['client_moments_mb']:.0f}", f"{x['peak_rss_mb']:.0f}"] for x in r["rows"]]
    head = ["d", "K", "server solver", "rounds", "CPU s", "per round", "clients",
            "ms per client-round", "expm", "bounds", "L-BFGS-B rest", "expm calls/round",
            "nonzero W", "SHD(W) / true edges", "SHD(A)", "server state MB",
            "client moments MB", "peak RSS MB"]
    fits = r.get("exponents") or {}
    text = "; ".join(f"{k}: d^{fmt(b)}" for k, b in fits.items())
    return markdown(head, rows) + (f"\n\nCPU per round over these sizes: {text}." if text
                                   else "")


def flwr_table(runs: list[dict[str, Any]]) -> str:
    rows = [[r["run_config"]["d"], r["K"], r["status"], r["rounds"], f"{r['flwr_wall_s']:.0f}",
             f"{r['strategy_s']:.0f}", f"{r['s_per_round']:.1f}",
             r["metrics"].get("shd_w", "-"), r["metrics"].get("shd_a", "-"),
             f"{r['simulation_rss_mb']:.0f}", f"{r['tree_rss_mb']:.0f}"] for r in runs]
    return markdown(["d", "K", "status", "rounds", "wall s", "ServerApp s", "s per round",
                     "SHD(W)", "SHD(A)", "ServerApp RSS MB", "all processes RSS MB"], rows)


def table_large_graphs() -> str:
    return table(read_results(NAME))


def table_large_graphs_d1000() -> str:
    r = read_results(f"{NAME}_d1000")
    runs = r.get("flwr") or []
    return table(r) + ("\n\nUnder `flwr run` (Ray, one virtual SuperNode per client, the App's "
                       "data of the same seed):\n\n" + flwr_table(runs) if runs else "")


TABLES = {"large_graphs": table_large_graphs, "large_graphs_d1000": table_large_graphs_d1000}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--clients", type=int, nargs="+", default=[8])
    ap.add_argument("--solvers", nargs="+", default=["screened"], choices=["screened", "split"],
                    help="server step (3) on the screened entries (default) or all split "
                         "variables (before)")
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--max-rounds", type=int, default=dbn.FDBNLSettings().max_rounds)
    ap.add_argument("--flwr", action="store_true",
                    help="also run each (d, K) under flwr run (Ray, one virtual SuperNode per "
                         "client, the App's synthetic data of the same seed and size)")
    ap.add_argument("--timeout", type=float, default=3600, help="of each flwr run (s)")
    args = ap.parse_args()
    out = []
    for seed in args.seeds:
        for d, K, solver in itertools.product(args.sizes, args.clients, args.solvers):
            row = run(d, K, args.rows, seed, args.max_rounds, solver == "screened")
            log(f"d {d}, K {K}, {solver}: {row['rounds']} rounds, {row['cpu_s']:.1f} s CPU "
                f"(clients "
                f"{row['client_s']:.1f}, expm {row['expm_s']:.1f}, bounds {row['bounds_s']:.1f}, "
                f"L-BFGS-B rest {row['lbfgsb_s']:.1f}), SHD(W) {row['shd_w']:.0f}")
            out.append(row)
    runs = []
    if args.flwr:
        from many_clients import flwr_run

        with tempfile.TemporaryDirectory() as tmp:
            for seed, d, K in itertools.product(args.seeds, args.sizes, args.clients):
                rc = {"algorithm": "fdbnl", "seed": seed, "d": d, "samples-per-client": args.rows,
                      "num-rounds": args.max_rounds}
                runs.append(flwr_run(f"fdbnl-d{d}-K{K}", K, rc, Path(tmp), args.timeout))
                r = runs[-1]
                log(f"flwr run d {d}, K {K}: {r['status']}, {r['rounds']} rounds, "
                    f"{r['flwr_wall_s']:.0f} s wall, {r['s_per_round']:.1f} s/round, SHD(W) "
                    f"{r['metrics'].get('shd_w')}, simulation RSS {r['simulation_rss_mb']:.0f} MB")
    res = {"settings": settings(args), "rows": out, "exponents": exponents(out),
           "flwr": runs}
    print(table(res))
    write_results(NAME, res, args.out)


if __name__ == "__main__":
    main()
