"""VFedCD with pipelined mini-batch steps: F1 against the staleness of the features (issue 36).

A deployed VFedCD step is five relayed exchanges in a chain (forward -> share -> decode ->
gradient -> update, ``fedcausal_flwr.vertical.dispatch``). A pipelined schedule starts a new
step every ``q`` exchanges, so one exchange carries phases of up to ``ceil(5 / q)`` steps
(step j's forward rides with step j-1's share, ..., step j-4's update when q = 1). Step j's
forward then reads the fragments the holders last received, those before step ``j - delay``
with ``delay = ceil(5 / q) - 1``; the CTV's gradient (sent with the update) and every update
act on the current fragments: delayed-gradient SGD/Adam. Exchanges per epoch fall from 5 S
to q S (S steps per epoch), plus ``5 - q`` once to drain the pipeline.

This study runs the reference arithmetic of that schedule (``loop.train_reference`` with
``delay``; delay 0 is today's protocol, bit for bit) on the Table 1 data of
``vfedcd_table1.py`` (d = 15, E = 60, n = 1000, 80/20 split, K = 3, App defaults, preset
"fast"), development seeds by default, and scores the DAG at the App's tau after each of
``--snapshots`` epochs (training continues, so one run gives every snapshot):

    nice -n 10 python simulations/studies/vfedcd_pipeline.py --seeds 100..109 --delays 0 1 2 4
    nice -n 10 python simulations/studies/vfedcd_pipeline.py --seeds 2000..2009 --delays 0 4 \\
        --out simulations/results/vfedcd_pipeline_eval.json

``--set k=v`` changes a setting of the preset (e.g. ``lr=0.05``). Results (per seed and mean
+- sample sd) go to ``--out`` (default ``results/vfedcd_pipeline.json``).
"""

from __future__ import annotations

import math
import time

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import markdown, mean_sd, parser, read_results, write_results
from vfedcd_table1 import data, f1
from vfedcd_table1 import settings as preset_settings

from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import blocks, split_standardised

PHASES = 5  # relayed exchanges in one step's chain


def interval(delay: int) -> int:
    """Fewest exchanges between step starts with this staleness: ``ceil(5 / (delay + 1))``."""
    return math.ceil(PHASES / (delay + 1))


def run_one(seed: int, delay: int, sets: list[str], snapshots: list[int]) -> dict:
    """One training run; SHD and F1 of the DAG at tau after each snapshot epoch."""
    X, A = data(15, seed)
    s = preset_settings("fast", sets, seed=seed)
    tr, _ = split_standardised(X)
    S = blocks(X.shape[1], 3)
    sizes, order = [len(b) for b in S], np.concatenate(S)
    state, done, out, t0 = None, 0, {}, time.process_time()
    for ep in sorted(snapshots):
        state = loop.train_reference([tr[:, b] for b in S], s, epochs=ep - done, state=state,
                                     delay=delay)
        done = ep
        B = np.zeros((len(order), len(order)))
        B[np.ix_(order, order)] = V.graph(state.F, sizes)
        m = graph_metrics(V.dag_at_threshold(B, s.tau), A)
        out[str(ep)] = {"shd": m["shd_rev1"], "f1": f1(m), "nnz": m["nnz"]}
    steps = math.ceil(len(tr) / s.batch)
    return {"seed": seed, "delay": delay, "scores": out, "steps_per_epoch": steps,
            "cpu_s": time.process_time() - t0}


def main() -> None:
    ap = parser(__doc__, seeds=list(range(100, 110)))
    ap.add_argument("--delays", type=int, nargs="+", default=[0, 1, 2, 4])
    ap.add_argument("--set", nargs="*", default=[], help="preset 'fast' overrides k=v")
    ap.add_argument("--snapshots", type=int, nargs="+", default=[20, 25, 30])
    a = ap.parse_args()
    res: dict = {"seeds": a.seeds, "set": a.set, "snapshots": a.snapshots, "cells": []}
    for delay in a.delays:
        rows = [run_one(seed, delay, a.set, a.snapshots) for seed in a.seeds]
        q, spe = interval(delay), rows[0]["steps_per_epoch"]
        for ep in map(str, sorted(a.snapshots)):
            f, shd = [r["scores"][ep]["f1"] for r in rows], [r["scores"][ep]["shd"] for r in rows]
            cell = {"delay": delay, "exchanges_per_step": q, "epochs": int(ep),
                    "exchanges_per_epoch": q * spe,
                    "exchanges": q * spe * int(ep) + PHASES - q + 2,  # + drain, keys, setup
                    "f1": mean_sd(f), "shd": mean_sd(shd), "per_seed_f1": f}
            res["cells"].append(cell)
            print(f"delay {delay} (every {q} exch) epochs {ep}: F1 {cell['f1'][0]:.3f} +- "
                  f"{cell['f1'][1]:.3f}  SHD {cell['shd'][0]:.1f}  exchanges "
                  f"{cell['exchanges']}", flush=True)
    write_results("vfedcd_pipeline", res, a.out)


# ----------------------------------------------------------------------------- tables
def table_vfedcd_pipeline() -> str:
    """Issue 36: exchanges per epoch and F1 of the pipelined schedules (development seeds;
    the lr rows from ``--set lr=...`` runs saved beside the default's)."""
    rows = []
    for name in ("vfedcd_pipeline", "vfedcd_pipeline_lr0.05", "vfedcd_pipeline_lr0.02"):
        try:
            r = read_results(name)
        except FileNotFoundError:
            continue
        lr = ", ".join(r["set"]) or "lr=0.1 (default)"
        seeds = f"{min(r['seeds'])}-{max(r['seeds'])}"
        for c in r["cells"]:
            rows.append([c["delay"], c["exchanges_per_step"], c["exchanges_per_epoch"],
                         c["epochs"], c["exchanges"], lr, seeds,
                         f"{c['shd'][0]:.1f} +- {c['shd'][1]:.1f}",
                         f"{c['f1'][0]:.3f} +- {c['f1'][1]:.3f}"])
    return markdown(["delay (steps)", "exchanges per step", "exchanges per epoch", "epochs",
                     "exchanges per run", "setting", "seeds", "SHD", "F1"], rows)


TABLES = {"vfedcd_pipeline": table_vfedcd_pipeline}


if __name__ == "__main__":
    main()
