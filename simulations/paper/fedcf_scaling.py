"""Scaling in D_m and M: FedCF Tables 1-2 (final L_s and D) and FedGC Table 5 (final L_s).

D scan: M = 2, P = 2 (FedCF: U = 2); M scan: D = 8, P = 2; chain couplings 0.25 * ones
m -> m+1, A rescaled to spectral radius <= 0.95 (the papers do not give their systems).
FedCF full batch (W = T - 1); FedGC with W = 1000, 30 epochs, lr 0.3 / 1.5 (its defaults
before issue 12). One seed per cell (seed 0). The FedCF M scan is also run with the
off-diagonal B_mn divided by sqrt(M - 1) (see :func:`normalized_b`): L_s sums over the M
clients, and with every B_mn drawn N(0, 0.5^2) each client's unmodelled input variance grows
with M - 1.

    python simulations/paper/fedcf_scaling.py [--t 2000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import parser, settings, write_results

from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import (
    merged_config,
    synthetic_clients,
    synthetic_series,
    synthetic_system,
)
from fedcausal_flwr.statespace.lti import LTISystem

PAPER_CF_D = {16: (0.7649, 0.0034), 32: (1.0987, 0.0041), 64: (1.4243, 0.0046),
              128: (1.1805, 0.0047)}
PAPER_CF_M = {2: (0.0744, 0.0013), 4: (0.0412, 0.0010), 8: (0.1714, 0.0036),
              16: (0.3825, 0.0069)}
PAPER_GC = {("D", 16): 0.0027, ("D", 32): 0.0061, ("D", 64): 0.0090, ("D", 128): 0.0084,
            ("M", 2): 0.0003, ("M", 4): 0.0001, ("M", 8): 0.0026, ("M", 16): 0.0004}


def normalized_b(sys: LTISystem) -> LTISystem:
    """Off-diagonal ``B_mn`` divided by sqrt(M - 1): each client's exogenous input variance
    from the others stays that of M = 2 (the default draws every ``B_mn`` ~ N(0, 0.5^2))."""
    M = len(sys.P)
    B = sys.B.copy()
    for m in range(M):
        for n in range(M):
            if m != n:
                ss.block(B, sys.P, sys.U, m, n)[:] /= np.sqrt(max(M - 1, 1))
    return replace(sys, B=B)


def final(model: str, M: int, D: int, args: argparse.Namespace, norm_b: bool = False
          ) -> tuple[float, float, float]:
    rc = {"seed": 0, "ss-clients": M, "ss-d": D, "ss-t": args.t}
    if model == "fedcf":
        rc.update({"ss-window": args.t - 1, "ss-epochs": args.rounds, "ss-lr-server": 0.9,
                   "ss-lr-client": 0.9})
    else:  # FedGC's schedule before issue 12 (the results were run with it)
        rc.update({"ss-window": 1000, "ss-epochs": 30, "ss-lr-server": 0.3, "ss-lr-client": 1.5})
    full = merged_config(rc, model)
    sys = synthetic_system(full)
    sys = normalized_b(sys) if norm_b else sys
    _, _, y, u = synthetic_series(full, sys)
    clients = synthetic_clients(full, sys, y, u)
    t0 = time.time()
    cls = ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings
    run = ss.reference(clients, cls.from_run_config(full))
    last = run.history[-1]
    return last["L_s"], last["penalty"], time.time() - t0


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--t", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    print("| model | scan | value | paper L_s | ours L_s | paper D | ours D | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for scan, cells in (("D", [16, 32, 64, 128]), ("M", [2, 4, 8, 16])):
        for v in cells:
            M, D = (2, v) if scan == "D" else (v, 8)
            ls, pen, wall = final("fedcf", M, D, args)
            p_ls, p_d = (PAPER_CF_D if scan == "D" else PAPER_CF_M)[v]
            print(f"| FedCF | {scan} | {v} | {p_ls} | {ls:.4g} | {p_d} | {pen:.4g} | {wall:.1f} |",
                  flush=True)
            rows.append({"model": "FedCF", "scan": scan, "value": v, "paper_L_s": p_ls,
                         "L_s": ls, "paper_D": p_d, "D": pen, "wall_s": wall})
            if scan == "M":
                ls, pen, wall = final("fedcf", M, D, args, norm_b=True)
                print(f"| FedCF, B_mn / sqrt(M-1) | {scan} | {v} | {p_ls} | {ls:.4g} "
                      f"({ls / M:.3g} per client) | {p_d} | {pen:.4g} | {wall:.1f} |",
                      flush=True)
                rows.append({"model": "FedCF, B_mn / sqrt(M-1)", "scan": scan, "value": v,
                             "paper_L_s": p_ls, "L_s": ls, "paper_D": p_d, "D": pen,
                             "wall_s": wall})
            ls, _, wall = final("fedgc", M, D, args)
            print(f"| FedGC | {scan} | {v} | {PAPER_GC[(scan, v)]} | {ls:.4g} | - | - | "
                  f"{wall:.1f} |", flush=True)
            rows.append({"model": "FedGC", "scan": scan, "value": v,
                         "paper_L_s": PAPER_GC[(scan, v)], "L_s": ls, "wall_s": wall})
    write_results("fedcf_scaling", {"settings": settings(args), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
