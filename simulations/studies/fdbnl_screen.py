"""FDBNL's server step (3) on the screened entries against all split variables (issue 23, goal 4).

The W-part of (3) can be nonzero only where weight |V| > lambda (``dbn.model.screen``), with
the sign of V there; ``server_screen`` (the default) solves it on those entries alone, in
variables scaled by the objective's curvature at the start point (``dbn.model.curvature``),
the split solver (``server_screen=False``, before) on all 2 d^2 split variables. The two reach
stationary points of the same objective, not always the same one (the step is nonconvex), so
the graphs may differ: this study measures by how much, on the scenarios of the defaults study
(``fdbnl_defaults.py``: ER / scale-free, unit / heterogeneous noise, d 10 and 20, K 4-64, 50
rows per client) and the App's data, at the default threshold, with the server step's CPU.

    python simulations/studies/fdbnl_screen.py --seeds 10000..10009   # evaluation seeds
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from dbn_common import Clock, client_moments, fmt, log, mean_sd, parser, settings
from fdbnl_defaults import APP, APP_N_K, APP_SCENARIO, HET_NOISE, N_K, SCENARIOS
from harness import markdown, read_results, write_results

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
from fedcausal_flwr.dbn.synthetic import federated_dbn

NAME = "fdbnl_screen"
SOLVERS = {"split": False, "screened": True}


def run(scenario: str, seed: int, screened: bool) -> dict[str, Any]:
    """One reference run: rounds, server-step CPU s, SHD(W), SHD(A) at the default tau."""
    graph, noise, d, K = APP_SCENARIO if scenario == APP else SCENARIOS[scenario]
    clients, truths = federated_dbn(seed, K, APP_N_K if scenario == APP else N_K, d, p=1,
                                    weights="paper", generator="svar", graph=graph,
                                    noise_scales=HET_NOISE if noise == "het" else None)
    s = dbn.FDBNLSettings(server_screen=screened)
    step, cpu = dbn.admm_global_step, [0.0]

    def timed(*a, **k):
        t0 = time.process_time()
        try:
            return step(*a, **k)
        finally:
            cpu[0] += time.process_time() - t0

    dbn.admm_global_step = timed
    try:
        st, hist = dbn.fdbnl_reference(client_moments(clients), s, seed)
    finally:
        dbn.admm_global_step = step
    m = dbn_graph_metrics(st.W, st.A, *truths[0], s.tau_w, s.tau_a)
    return {"rounds": len(hist), "server_s": cpu[0], "shd_w": float(m["shd_w"]),
            "shd_a": float(m["shd_a"]), "W": st.W}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101])
    ap.add_argument("--scenarios", nargs="+", default=[*SCENARIOS, APP],
                    choices=[*SCENARIOS, APP])
    args = ap.parse_args()
    if args.quick:
        args.scenarios, args.seeds = ["er-hom-d10-K4"], [100]
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    clock, cells = Clock(), {}
    for sc in args.scenarios:
        runs = {v: [run(sc, seed, on) for seed in args.seeds] for v, on in SOLVERS.items()}
        diff = [float(np.abs(a.pop("W") - b.pop("W")).max())
                for a, b in zip(runs["split"], runs["screened"], strict=True)]
        paired = [b["shd_w"] + b["shd_a"] - a["shd_w"] - a["shd_a"]
                  for a, b in zip(runs["split"], runs["screened"], strict=True)]
        cells[sc] = {"runs": runs, "max_abs_diff_W": diff, "paired_shd": mean_sd(paired),
                     **{f"{v}_{k}": mean_sd(r[k] for r in rs) for v, rs in runs.items()
                        for k in ("shd_w", "shd_a", "rounds", "server_s")}}
        log(f"  {sc}: SHD(W) split {fmt(*cells[sc]['split_shd_w'])}, screened "
            f"{fmt(*cells[sc]['screened_shd_w'])}; server s {fmt(*cells[sc]['split_server_s'])}"
            f" -> {fmt(*cells[sc]['screened_server_s'])} [{clock():.0f}s]")
    out = {"settings": settings(args), "cells": cells, "elapsed_s": clock()}
    print(table(out))
    log(f"wrote {write_results(NAME, out, args.out)}")


def table(r: dict[str, Any]) -> str:
    rows = []
    for sc, c in r["cells"].items():
        rows.append([sc, *(f"{fmt(*c[f'split_{k}'], 1)} / {fmt(*c[f'screened_{k}'], 1)}"
                           for k in ("shd_w", "shd_a", "rounds")),
                     fmt(*c["paired_shd"], 2),
                     f"{fmt(*c['split_server_s'], 2)} / {fmt(*c['screened_server_s'], 2)}",
                     f"{max(c['max_abs_diff_W']):.1e}"])
    seeds = r["settings"]["seeds"]
    return (f"Seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); each cell split / screened, "
            "mean ± sample sd.\n\n" + markdown(
                ["scenario", "SHD(W)", "SHD(A)", "rounds", "paired SHD(W)+SHD(A), screened - "
                 "split", "server step CPU s", "largest W difference"], rows))


def table_fdbnl_screen() -> str:
    return table(read_results(NAME))


TABLES = {"fdbnl_screen": table_fdbnl_screen}

if __name__ == "__main__":
    main()
