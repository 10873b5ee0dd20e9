"""What replicas cost an FDBNL run (issue 21): exchanges, bytes and CPU per exchange against R.

The App's default FDBNL run (built-in data: d 10, 5 nodes, 100 rows each) in process
(:class:`~fedcausal_flwr.testing.InProcessGrid`) with ``replicas`` R = 0 (the ordinary run) and
each R of ``--replicas``: rounds, exchanges, array bytes per exchange, and the CPU seconds per
exchange of the server (the strategy) and of the clients (their ``train`` replies), each as a
factor of R = 0's. A replicated run stops when its fit on all rows stops, so its exchanges do
not depend on R. ``--deploy R``: the same run with R replicas in a loopback deployment (TLS +
SuperNode authentication, :func:`fedcausal_flwr.cli.launch.deploy`), its wall time beside the
ordinary run's.

    python simulations/bench/replica_cost.py [--replicas 20 50] [--deploy 50]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
from harness import Clock, finish, log, markdown, parser, read_results, table

from fedcausal_flwr.appconfig import glue, view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.results import load_result
from fedcausal_flwr.testing import InProcessGrid

NODES = 5


def timed_app(clock: dict[str, float]):
    """The App's ClientApp, its CPU seconds per message added to ``clock["client"]``."""
    def handle(msg, context):
        t0 = time.process_time()
        out = client_app(msg, context)
        clock["client"] += time.process_time() - t0
        return out
    return handle


def in_process(R: int) -> dict[str, Any]:
    """One default run with R replicas: rounds, exchanges, bytes and CPU per exchange."""
    rc = {"algorithm": "fdbnl", "dbn.replicas": R}
    clock = {"client": 0.0}
    strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", rc))
    t0 = time.process_time()
    res = strategy.start(grid=InProcessGrid(timed_app(clock), NODES, rc))
    total = time.process_time() - t0
    wire = strategy.wire_summary()
    train = [k for k in wire if k.startswith("train.")]
    ex = len(res.history)
    nbytes = sum(wire[k]["bytes"] for k in train)
    return {"status": res.status, "rounds": len(res.history), "exchanges": ex,
            "messages": sum(wire[k]["messages"] for k in train),
            "bytes_per_exchange": nbytes / ex,
            "server_cpu_per_exchange": (total - clock["client"]) / ex,
            "client_cpu_per_exchange": clock["client"] / ex,
            "stability": res.metrics.get("stability")}


def deployed(R: int, work: Path) -> dict[str, Any]:
    """The default run with R replicas in a loopback deployment: wall time and exchanges."""
    name = f"fdbnl-r{R}"
    cfg = {"algorithm": "fdbnl", "dbn.replicas": R, "node-wait-s": 120.0,
           "outputs": str(work), "run-name": name}
    t0 = time.perf_counter()
    launch.deploy(NODES, cfg, workdir=work / f"{name}-deployment", timeout=3600)
    res = load_result(work / name)
    return {"status": res["status"], "wall_s": time.perf_counter() - t0,
            "rounds": len(res["history"])}


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--deploy", type=int, nargs="*", default=[],
                    help="also deploy with these R (and R = 0 beside them)")
    args = ap.parse_args()
    if args.quick:
        args.replicas, args.deploy = [4], []
    clock = Clock()
    runs = {R: in_process(R) for R in [0, *args.replicas]}
    base = runs[0]
    for r in runs.values():
        r["factors"] = {k: r[k] / base[k] for k in (
            "exchanges", "bytes_per_exchange", "server_cpu_per_exchange",
            "client_cpu_per_exchange")}
    log(table(["R", "status", "exchanges", "KB/exchange", "server CPU ms/ex", "x",
               "client CPU ms/ex", "x"],
              [[R, r["status"], r["exchanges"], f"{r['bytes_per_exchange'] / 1e3:.1f}",
                f"{1e3 * r['server_cpu_per_exchange']:.1f}",
                f"{r['factors']['server_cpu_per_exchange']:.1f}",
                f"{1e3 * r['client_cpu_per_exchange']:.1f}",
                f"{r['factors']['client_cpu_per_exchange']:.1f}"] for R, r in runs.items()]))
    out: dict[str, Any] = {"in_process": {str(R): r for R, r in runs.items()}}
    if args.deploy:
        with tempfile.TemporaryDirectory() as tmp:
            out["deployment"] = {str(R): deployed(R, Path(tmp)) for R in [0, *args.deploy]}
        log(table(["R", "status", "rounds", "wall s"],
                  [[R, d["status"], d["rounds"], f"{d['wall_s']:.0f}"]
                   for R, d in out["deployment"].items()]))
    finish("replica_cost", args, clock, {}, "replicas of FDBNL", out)


def table_replica_cost() -> str:
    """Issue 21's cost rows (replica_cost.json): per R, exchanges, bytes and CPU per exchange
    as factors of the ordinary run, and the deployment's wall time."""
    r = read_results("replica_cost")
    dep = r.get("deployment", {})
    rows = [[R, x["status"], x["exchanges"], f"{x['bytes_per_exchange'] / 1e3:.0f} KB",
             f"{x['factors']['bytes_per_exchange']:.1f}",
             f"{1e3 * x['server_cpu_per_exchange']:.0f} ms",
             f"{x['factors']['server_cpu_per_exchange']:.1f}",
             f"{1e3 * x['client_cpu_per_exchange']:.0f} ms",
             f"{x['factors']['client_cpu_per_exchange']:.1f}",
             f"{dep[R]['wall_s']:.0f} s ({dep[R]['rounds']} rounds)" if R in dep else "-"]
            for R, x in r["in_process"].items()]
    return (f"**FDBNL with R half-sample replicas, the App's default run** (d 10, 5 nodes, 100 "
            f"rows each; `{r['meta']['script']}`, {r['meta']['finished']}). CPU per exchange "
            f"in process; wall time in a loopback deployment (TLS, node auth).\n\n"
            + markdown(["R", "status", "exchanges", "bytes / exchange", "x",
                        "server CPU / exchange", "x", "client CPU / exchange (all 5)", "x",
                        "deployment"], rows))


TABLES = {"replica_cost": table_replica_cost}


if __name__ == "__main__":
    main()
