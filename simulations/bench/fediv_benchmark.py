"""FedIV wall time and bytes per round: reference loop vs the Flower path.

The Flower path runs the FedIV strategy and the App's ClientApp on the in-process Grid
(messages built and audited, no sockets), and with ``--flwr`` under a real ``flwr run``
simulation (Ray) of the App. ``--device cuda`` times the image scenario's rounds on a GPU when
one is present.

    nice -n 10 python simulations/bench/fediv_benchmark.py --rounds 10 [--flwr]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
import torch
from harness import app_config, parser, settings, write_results

from fedcausal_flwr.cli import launch
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.iv import app as app_iv
from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import FedIVSettings
from fedcausal_flwr.testing import InProcessGrid


def reference_seconds(rc: dict, k: int) -> float:
    """Wall time per round of the in-process reference loop (validation included)."""
    data = [iv.client_data(rc, i, k) for i in range(k)]
    dev = dg.device_of(str(rc.get("iv-device", "cpu")))
    zdim = int(np.prod(data[0]["train"].z.shape[1:]))
    basis = dg.rff(zdim, int(rc["iv-val-features"]), int(rc["seed"]))
    tr = [dg.batch(d["train"].x, d["train"].y, d["train"].z, dev) for d in data]
    val = [(dg.batch(d["val"].x, d["val"].y, d["val"].z, dev), dg.features(d["val"].z, basis))
           for d in data]
    t0 = time.time()
    dg.fedgda_reference(tr, FedIVSettings.from_run_config(rc), int(rc["seed"]), val, dev)
    return (time.time() - t0) / int(rc["iv-rounds"])


def main() -> None:
    """Print seconds and bytes per round of each path."""
    ap = parser(__doc__)
    ap.add_argument("--scenario", default="abs")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--mode", default="gda")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--flwr", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rc = {"algorithm": "fediv", "seed": 0, "iv-scenario": a.scenario, "iv-n": a.n,
          "iv-rounds": a.rounds, "iv-mode": a.mode, "iv-val-features": 32,
          "iv-device": a.device, "node-wait-s": 60.0}
    k = a.clients
    ref = reference_seconds(rc, k)
    t0 = time.time()
    res = app_iv.strategy("fediv", rc).start(grid=InProcessGrid(client_app, k, rc))
    wall = (time.time() - t0) / a.rounds
    h = res.history
    up, down = np.mean([r["bytes_up"] for r in h]), np.mean([r["bytes_down"] for r in h])
    print(f"scenario={a.scenario} mode={a.mode} clients={k} n={a.n} device={a.device}")
    print(f"reference loop      : {ref:.3f} s/round")
    print(f"Flower, in-process  : {wall:.3f} s/round (x{wall / ref:.2f}); "
          f"bytes/round up {up:.0f} down {down:.0f}")
    res_out = {"settings": settings(a), "reference_s_per_round": ref,
               "inprocess_s_per_round": wall, "bytes_up_per_round": up,
               "bytes_down_per_round": down}
    if a.flwr:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            t0 = time.time()
            launch.simulate(k, app_config("fediv", {**rc, "outputs": str(root),
                                                    "run-name": "b"}),
                            flwr_home=root / "flwr",
                            port=launch.free_port_block(launch.SIMULATE_PORTS),
                            timeout=590)
            total = time.time() - t0
            out = load_result(root / "b")
            per = np.mean([r["seconds"] for r in out["history"]])
            print(f"Flower, flwr run sim: {per:.3f} s/round in the rounds (x{per / ref:.2f}); "
                  f"{total:.1f} s end to end incl. Ray start")
            res_out |= {"flwr_s_per_round": per, "flwr_end_to_end_s": total}
    write_results("fediv_benchmark", res_out, a.out)


if __name__ == "__main__":
    main()
