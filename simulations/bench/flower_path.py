"""Where the CPU of an in-process FDBNL run goes, beside the reference loop (issue 36).

The App's default FDBNL run (built-in synthetic data, d 10, K clients) goes once through the
reference loop (``dbn.fdbnl_reference`` on the clients' moments, data generation included)
and once through the App in process (``InProcessGrid``: the ServerApp's strategy and every
node's ClientApp in this process, messages crossing as Flower's records), both on one thread
(``time.process_time``). The App's run is profiled (``cProfile``) and split by what the time
is spent in (cumulative time of the entry points, scaled to the unprofiled CPU):

- ``algorithm``: the model's equations, the clients' local steps (``admm_local_step``) and the
  server rounds (``fdbnl_server_round``), the same calls the reference loop makes;
- ``flower records``: Flower's conversion of arrays to and from its records
  (``ArrayRecord.from_numpy_ndarrays`` / ``to_numpy_ndarrays``) and of messages to the wire
  (``Message.deflate``), what any Flower App pays per array and message;
- ``client set-up``: our ClientApp building a node's client per message (its settings and
  data from the run config: a SuperNode starts a process per message, so it cannot keep one);
- ``rest``: our exchange bookkeeping, screens, metrics and logging, and Flower's Grid.

``--clients`` also reports the server's CPU per client and round beyond the clients' own
(total minus the ClientApp calls) at K = 10, 100, 1,000, over ``--rounds`` rounds.

    python simulations/bench/flower_path.py                      # K 8, then K 10 100 1000
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # CPU seconds of one thread: set before numpy loads BLAS

import cProfile  # noqa: E402
import logging  # noqa: E402
import pstats  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _sims  # noqa: E402, F401 - simulations/ on sys.path
from harness import log, markdown, parser, read_results, settings, write_results  # noqa: E402

from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV, glue, view  # noqa: E402
from fedcausal_flwr.client_app import app as client_app  # noqa: E402
from fedcausal_flwr.dbn import model as dbn  # noqa: E402
from fedcausal_flwr.dbn.data import client_data  # noqa: E402
from fedcausal_flwr.strategies import FDBNLSettings  # noqa: E402
from fedcausal_flwr.testing import InProcessGrid  # noqa: E402

NAME = "flower_path"
#: part -> the functions (file suffix, name) whose cumulative time it is
PARTS = {
    "algorithm": [("dbn/model.py", "admm_local_step"), ("dbn/model.py", "fdbnl_server_round")],
    "flower records": [("message/arrayrecord.py", "from_numpy_ndarrays"),
                       ("message/arrayrecord.py", "to_numpy_ndarrays"),
                       ("message/message.py", "deflate")],
    "client set-up": [("dbn/app.py", "client")],
}
CLIENT_CALL = ("fedcausal_flwr/client_app.py", "handle")


def reference_cpu(K: int, rc: dict[str, Any]) -> float:
    """CPU seconds of the reference loop on the App's data for K clients."""
    s = FDBNLSettings.from_run_config(rc)
    t0 = time.process_time()
    dbn.fdbnl_reference([dbn.moments(*client_data(rc, i, K)) for i in range(K)], s)
    return time.process_time() - t0


def cumulative(stats: pstats.Stats, where: str, name: str) -> float:
    """Cumulative seconds of the functions ``name`` in files ending with ``where``."""
    return sum(v[3] for (f, _, n), v in stats.stats.items()
               if n == name and f.replace(os.sep, "/").endswith(where))


def app_run(K: int, rc: dict[str, Any], profile: bool) -> dict[str, Any]:
    """CPU seconds, rounds and (``profile``) the split of one in-process App run."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[OUTPUTS_ROOT_ENV] = tmp
        cfg = {"algorithm": "fdbnl", "plots": False, **rc}
        strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", cfg))
        grid = InProcessGrid(client_app, K, cfg)
        t0 = time.process_time()
        res = strategy.start(grid=grid)
        cpu = time.process_time() - t0
        out: dict[str, Any] = {"K": K, "status": res.status, "rounds": len(res.history),
                               "cpu_s": cpu}
        if profile:
            pr = cProfile.Profile()
            strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", cfg))
            pr.enable()
            strategy.start(grid=InProcessGrid(client_app, K, cfg))
            pr.disable()
            st = pstats.Stats(pr)
            total = sum(v[2] for v in st.stats.values())
            scale = cpu / max(total, 1e-12)  # the profiler's own cost scaled away
            parts = {p: scale * sum(cumulative(st, *f) for f in fs) for p, fs in PARTS.items()}
            parts["rest"] = cpu - sum(parts.values())
            out["parts"] = parts
    return out


def server_per_client(K: int, rc: dict[str, Any]) -> dict[str, Any]:
    """The server's CPU per client and round beyond the ClientApp calls, at K clients."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[OUTPUTS_ROOT_ENV] = tmp
        cfg = {"algorithm": "fdbnl", "plots": False, **rc}
        strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", cfg))
        pr = cProfile.Profile()
        t0 = time.process_time()
        pr.enable()
        res = strategy.start(grid=InProcessGrid(client_app, K, cfg))
        pr.disable()
        cpu = time.process_time() - t0
        st = pstats.Stats(pr)
        total = sum(v[2] for v in st.stats.values())
        clients = cumulative(st, *CLIENT_CALL) * cpu / max(total, 1e-12)
    rounds = len(res.history)
    return {"K": K, "rounds": rounds, "status": res.status, "cpu_s": cpu, "clients_s": clients,
            "server_ms_per_client_round": 1e3 * (cpu - clients) / max(rounds * K, 1)}


def table_flower_path() -> str:
    """The split of the App's run beside the reference loop, and the per-client server cost."""
    r = read_results(NAME)
    m = r["main"]
    rows = [[p, f"{s:.3f}", f"{s / r['reference_cpu_s']:.2f}"] for p, s in m["parts"].items()]
    ref = r["reference_cpu_s"]
    rows += [["**App run, total**", f"{m['cpu_s']:.3f}", f"{m['cpu_s'] / ref:.2f}"],
             ["reference loop", f"{ref:.3f}", "1.00"]]
    out = markdown([f"part (K = {m['K']}, {m['rounds']} rounds)", "CPU s", "x reference"], rows)
    if r.get("scaling"):
        out += "\n\n" + markdown(
            ["K", "rounds", "CPU s", "clients' ClientApp calls s", "server ms per client-round"],
            [[x["K"], x["rounds"], f"{x['cpu_s']:.1f}", f"{x['clients_s']:.1f}",
              f"{x['server_ms_per_client_round']:.2f}"] for x in r["scaling"]])
    return out


TABLES = {"flower_path": table_flower_path}


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8, help="clients of the profiled run")
    ap.add_argument("--clients", type=int, nargs="*", default=[10, 100, 1000],
                    help="K of the per-client server cost")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the per-client runs")
    args = ap.parse_args()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    ref = reference_cpu(args.k, {})
    main_run = app_run(args.k, {}, profile=True)
    log(f"K {args.k}: reference {ref:.3f} CPU s, App {main_run['cpu_s']:.3f} "
        f"({main_run['cpu_s'] / ref:.2f}x): " + ", ".join(
            f"{p} {s:.3f}" for p, s in main_run["parts"].items()))
    scaling = []
    for K in args.clients:
        scaling.append(server_per_client(K, {"dbn.num-rounds": args.rounds, "dbn.h-tol": 0.0}))
        x = scaling[-1]
        log(f"K {K}: {x['rounds']} rounds, {x['cpu_s']:.1f} CPU s, clients {x['clients_s']:.1f}, "
            f"server {x['server_ms_per_client_round']:.2f} ms per client-round")
    res = {"settings": settings(args), "reference_cpu_s": ref, "main": main_run,
           "scaling": scaling}
    write_results(NAME, res, args.out)
    print(table_flower_path() if args.out is None else "")


if __name__ == "__main__":
    main()
