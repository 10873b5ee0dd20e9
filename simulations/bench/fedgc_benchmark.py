"""FedGC/FedCF: reference loop vs the Flower message path, wall time and bytes per exchange.

The Flower path runs the real strategy and ClientApp on the in-process Grid (messages built,
validated and dispatched as under a SuperLink, without sockets or Ray); a ``flwr run`` adds
a roughly constant per-message latency on top (see tests/e2e/test_e2e_statespace.py).

    python simulations/bench/fedgc_benchmark.py [--clients 2 8 32] [--t 1000] [--window 100]
"""

from __future__ import annotations

import argparse
import time

import _sims  # noqa: F401 - simulations/ on sys.path
from harness import parser, settings, write_results

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.statespace import app as app_ss
from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace.data import all_clients, merged_config
from fedcausal_flwr.testing import InProcessGrid


def bench(algorithm: str, M: int, args: argparse.Namespace) -> dict[str, float]:
    rc = {"algorithm": algorithm, "seed": 0, "ss-clients": M, "ss-t": args.t,
          "ss-window": args.window, "ss-epochs": 1, "ss-coupling": 0.25 / max(1, M // 4),
          "min-nodes": M, "node-wait-s": 5.0}
    full = merged_config(rc, algorithm)
    _, clients = all_clients(full)
    t0 = time.perf_counter()
    ref = loop.reference(clients, app_ss.settings(algorithm, rc))
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = app_ss.strategy(algorithm, rc).start(grid=InProcessGrid(client_app, M, rc))
    t_fl = time.perf_counter() - t0
    h = result.history
    return {"exchanges": len(ref.history), "reference_s": t_ref, "flower_s": t_fl,
            "overhead": t_fl / t_ref,
            "bytes_up_per_exchange": sum(r["bytes_up"] for r in h) / len(h),
            "bytes_down_per_exchange": sum(r["bytes_down"] for r in h) / len(h)}


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[2, 8, 32])
    ap.add_argument("--t", type=int, default=1000)
    ap.add_argument("--window", type=int, default=100)
    args = ap.parse_args()
    print("| algorithm | M | exchanges | reference s | Flower (in-process) s | ratio | "
          "bytes up / exchange | bytes down / exchange |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for algorithm in ("fedgc", "fedcf"):
        for M in args.clients:
            r = bench(algorithm, M, args)
            print(f"| {algorithm} | {M} | {r['exchanges']} | {r['reference_s']:.2f} | "
                  f"{r['flower_s']:.2f} | {r['overhead']:.1f} | "
                  f"{r['bytes_up_per_exchange']:.0f} | {r['bytes_down_per_exchange']:.0f} |")
            rows.append({"algorithm": algorithm, "M": M, **r})
    write_results("fedgc_benchmark", {"settings": settings(args), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
