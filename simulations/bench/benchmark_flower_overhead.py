"""Flower overhead of FDBNL: reference loop vs real `flwr run` simulation, K = 10 and 64.

For each K and round budget the same run config goes through the in-process reference loop
and through `flwr run` (Ray, one SuperNode per client). Printed: wall times, their ratio,
the strategy's own time (without SuperLink/Ray start-up), time per round and bytes per round.
h-tol = 0 forces exactly the requested number of rounds.

    python simulations/bench/benchmark_flower_overhead.py [--clients 10 64] [--rounds 10 40]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
from harness import app_config, markdown, parser, read_results, write_results

from fedcausal_flwr.cli import launch
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import FDBNLSettings

BASE = {"algorithm": "fdbnl", "seed": 0, "d": 10, "samples-per-client": 20,
        "generator": "svar", "lambda-w": 0.1, "lambda-a": 0.1, "h-tol": 0.0,
        "node-wait-s": 120.0}


def reference_seconds(rc: dict, k: int) -> float:
    """Wall time of the reference loop, data loading (client side) included."""
    t0 = time.perf_counter()
    moms = [dbn.moments(*client_data(rc, i, k)) for i in range(k)]
    dbn.fdbnl_reference(moms, FDBNLSettings.from_run_config(rc))
    return time.perf_counter() - t0


def flower_run(rc: dict, k: int, work: Path) -> tuple[float, dict]:
    """Wall time of `flwr run` end to end and its result.json."""
    t0 = time.perf_counter()
    launch.simulate(k, app_config("fdbnl", {**rc, "outputs": str(work), "run-name": "bench"}),
                    flwr_home=work / "flwr", timeout=3000,
                    port=launch.free_port_block(launch.SIMULATE_PORTS))
    return time.perf_counter() - t0, load_result(work / "bench")


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--clients", type=int, nargs="+", default=[10, 64])
    ap.add_argument("--rounds", type=int, nargs="+", default=[10, 40])
    args = ap.parse_args()
    rows = []
    head = (f"{'K':>3} {'rounds':>6} {'ref s':>7} {'flwr s':>7} {'ratio':>6} {'strategy s':>10}"
            f" {'s/round':>8} {'ref s/round':>11} {'KB up/rnd':>9} {'KB down/rnd':>11}")
    print(head)
    for k in args.clients:
        for r in args.rounds:
            rc = {**BASE, "num-rounds": r}
            ref = reference_seconds(rc, k)
            with tempfile.TemporaryDirectory() as tmp:
                wall, res = flower_run(rc, k, Path(tmp))
            hist = res["history"]
            per_round = sum(h["seconds"] for h in hist) / len(hist)
            row = {"K": k, "rounds": len(hist), "reference_s": ref, "flower_s": wall,
                   "ratio": wall / ref, "strategy_s": res["timing"]["wall_s"],
                   "s_per_round": per_round, "ref_s_per_round": ref / r,
                   "bytes_up_per_round": hist[-1]["bytes_up"],
                   "bytes_down_per_round": hist[-1]["bytes_down"]}
            rows.append(row)
            print(f"{k:>3} {len(hist):>6} {ref:>7.2f} {wall:>7.2f} {wall / ref:>6.1f} "
                  f"{row['strategy_s']:>10.2f} {per_round:>8.3f} {ref / r:>11.3f} "
                  f"{row['bytes_up_per_round'] / 1e3:>9.1f} "
                  f"{row['bytes_down_per_round'] / 1e3:>11.1f}", flush=True)
    path = write_results("benchmark_flower_overhead", {"config": BASE, "rows": rows}, args.out)
    print(f"saved {path}")


# ----------------------------------------------------------------------------- tables
def table_benchmark_flower_overhead() -> str:
    """Flower overhead of FDBNL: reference loop vs ``flwr run``, per K and round count."""
    r = read_results("benchmark_flower_overhead")
    rows = [[x["K"], x["rounds"], f"{x['reference_s']:.2f}", f"{x['flower_s']:.1f}",
             f"{x['ratio']:.0f}", f"{x['strategy_s']:.1f}", f"{x['s_per_round']:.3f}",
             f"{x['ref_s_per_round']:.3f}",
             f"{x['bytes_up_per_round'] / 1000:.1f} kB / {x['bytes_down_per_round'] / 1000:.1f} kB"]
            for x in r["rows"]]
    return markdown(["K", "rounds", "reference s", "`flwr run` s", "ratio", "strategy s",
                     "s/round Flower", "s/round reference", "bytes up / down per round"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"benchmark_flower_overhead": table_benchmark_flower_overhead}


if __name__ == "__main__":
    main()
