"""FedDeepGMM-GDA hyper-parameter sweep on development seeds (>= 100) only.

Each run logs, per round, the federated validation criterion (the only thing used to choose
settings) and, as a diagnostic, the dev-seed test MSE. One JSON line per (config, seed).

    nice -n 10 python simulations/studies/fediv_gda_sweep.py --scenarios abs --seeds 100 101 \
        --grid 0.02,0.1,5,100,sgd 0.05,0.5,10,100,sgd --jsonl gda_sweep.jsonl
"""

from __future__ import annotations

import json
import time

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
import torch
from harness import append_jsonl, parser, settings, write_results

from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg


def federation(rc: dict, k: int, val_features: int, seed: int):
    """The k clients' training batches, validation batches with their features, the test set,
    an evaluation network and ``evaluate(theta) -> {"crit", "mse"}`` (pooled criterion and
    test MSE of g = theta) for the FedIV data of run config ``rc``."""
    test = iv.test_set(rc)
    basis = dg.rff(int(np.prod(test.z.shape[1:])), val_features, seed)
    g_eval, _ = dg.networks(test.x.shape[1:], test.z.shape[1:], 0)
    data = [iv.client_data(rc, i, k) for i in range(k)]
    tr = [dg.batch(d["train"].x, d["train"].y, d["train"].z) for d in data]
    val = [(dg.batch(d["val"].x, d["val"].y, d["val"].z), dg.features(d["val"].z, basis))
           for d in data]

    def evaluate(theta: dg.Params) -> dict:
        crit = dg.pooled_criterion([dg.validation_sums(dg.set_params(g_eval, theta), *v)
                                    + (v[0].n,) for v in val])
        return {"crit": crit, "mse": dg.mse(dg.g_values(g_eval, theta, test.x), test.g)}

    return tr, val, test, g_eval, evaluate


def run(scenario: str, seed: int, lr_g: float, lr_f: float, local: int, rounds: int,
        optimizer: str, k: int = 10, n: int = 20000) -> dict:
    """One FedGDA run with per-round criterion and (diagnostic) test MSE."""
    if seed < 100:
        raise ValueError("the sweep runs on development seeds >= 100 only")
    rc = {"iv-scenario": scenario, "iv-dgp": "paper", "seed": seed, "iv-n": n, "iv-alpha": 0.3}
    s = dg.FedIVSettings(lr_g=lr_g, lr_f=lr_f, mode="gda", local_epochs=local, rounds=rounds,
                         optimizer=optimizer)
    tr, val, test, g_eval, evaluate = federation(rc, k, 32, seed)
    t0 = time.time()
    st = dg.fedgda_reference(tr, s, seed, val, evaluate=evaluate)
    crit = [h["crit"] for h in st.history]
    return {"scenario": scenario, "seed": seed, "lr_g": lr_g, "lr_f": lr_f, "local": local,
            "rounds": rounds, "optimizer": optimizer, "seconds": round(time.time() - t0, 1),
            "selected_round": st.best_round, "crit_selected": st.best_score,
            "crit_last": crit[-1], "crit_last10": float(np.mean(crit[-10:])),
            "mse_selected": dg.mse(dg.g_values(g_eval, st.best_theta, test.x), test.g),
            "mse_last": st.history[-1]["mse"],
            "crit_hist": [round(c, 6) for c in crit],
            "mse_hist": [round(h["mse"], 4) for h in st.history]}


def main() -> None:
    """Run the grid (``lr_g,lr_f,R,T,optimizer`` per entry) on the given dev seeds."""
    ap = parser(__doc__, seeds=[100, 101])
    ap.add_argument("--scenarios", nargs="+", default=["abs"])
    ap.add_argument("--grid", nargs="+", required=True)
    ap.add_argument("--jsonl", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    runs = []
    for sc in a.scenarios:
        for entry in a.grid:
            lg, lf, r, t, opt = entry.split(",")
            for seed in a.seeds:
                row = run(sc, seed, float(lg), float(lf), int(r), int(t), opt)
                short = {k: v for k, v in row.items() if not k.endswith("_hist")}
                print(json.dumps(short), flush=True)
                runs.append(short)
                if a.jsonl:
                    append_jsonl(a.jsonl, row)
    write_results("fediv_gda_sweep", {"settings": settings(a), "runs": runs}, a.out)


if __name__ == "__main__":
    main()
