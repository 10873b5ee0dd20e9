"""FedCF, the paper's default (M=2, P=U=D=2, A_21 = 0.25 * ones, A_12 = 0), 10 seeds.

Four variants (spec A5): the literal paper (i.i.d. inputs, server target h_a^t), the same
with AR(0.9) inputs ("persistently exciting correlated inputs"), the refined-target variant
(the server regresses on hhat_a^t, which carries y^t: biased, only the K C part of B u gets
through) and the innovation-target variant (h_a^t + C^+ (y^t - C h_a^t) = C^+ y^t, unbiased
for h^t, so B_hat_mn is unbiased for i.i.d. inputs: the recovering variant). Prints L_s and
the penalty D (first vs last exchange), ||B_hat_21 - B_21||_F and the counterfactual error
CF_y = ||C_22 (B_hat_21 - B_21)||_F / ||C_22 B_21||_F (the paper reports no CF error).

``--shift-scale 4``: FedGC's mean shifts on client 0's states, unknown to every filter (FedCF
has no known-shift option; its data default has no shifts). The server loss stays on levels:
differencing biases B_hat here (core ``FedCFSettings``).

    python simulations/paper/fedcf_default.py [--n-seeds 10] [--t 5000] [--rounds 300] [--lr 0.9]
        [--shift-scale 0] [--variants literal "innovation target"]

``--variants`` runs some of the four (by name; default all); a run of fewer writes its JSON to
``--out`` only, so the tables' ``results/fedcf_default.json`` always holds all four.
"""

from __future__ import annotations

import argparse
import time

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import markdown, mean_sd, parser, pm, read_results, settings, write_results

from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import merged_config, synthetic_series
from fedcausal_flwr.statespace.lti import split_clients

VARIANTS = {"literal": {}, "literal, AR(0.9) inputs": {"ss-input-ar": 0.9},
            "refined target": {"ss-target": "refined"},
            "innovation target": {"ss-target": "innovation"}}
RECOVERING = "innovation target"
TARGET_CF_Y = 0.2  # the recovering variant's target (the paper reports no CF error)


def one_run(seed: int, extra: dict, args: argparse.Namespace) -> dict[str, float]:
    rc = merged_config({"seed": seed, "ss-t": args.t, "ss-window": args.t - 1,
                        "ss-epochs": args.rounds, "ss-xi": args.xi, "ss-lr-server": args.lr,
                        "ss-lr-client": args.lr, "ss-shift-scale": args.shift_scale, **extra},
                       "fedcf")
    sys, _, y, u = synthetic_series(rc)
    clients = split_clients(sys, y, u)
    t0 = time.time()
    run = loop.reference(clients, ss.FedCFSettings.from_run_config(rc))
    h0, h1 = run.history[1], run.history[-1]  # exchange 1 has theta = phi = 0: L_s = 0
    B = run.server.B_hat
    B21, C22 = ss.block(sys.B, sys.P, sys.U, 1, 0), clients[1].C
    return {"L_s_2": h0["L_s"], "L_s_last": h1["L_s"], "D_2": h0["penalty"],
            "D_last": h1["penalty"],
            "err_A21": ss.block_error(run.server.A_hat, sys.A, sys.P, sys.P, 1, 0),
            "err_B21": float(np.linalg.norm(ss.block(B, sys.P, sys.U, 1, 0) - B21)),
            "cf_y": ss.counterfactual_error(C22, ss.block(B, sys.P, sys.U, 1, 0), B21),
            "wall_s": time.time() - t0}


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=10)
    ap.add_argument("--t", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--xi", type=float, default=10.0)
    ap.add_argument("--lr", type=float, default=0.9, help="normalized step (tuned on seeds "
                    "100-101, not on the reported seeds 0-9)")
    ap.add_argument("--shift-scale", type=float, default=0.0,
                    help="mean shifts on client 0's states, unknown to every filter (0: none)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    metavar="NAME", help=f"variants to run (default all: {', '.join(VARIANTS)})")
    args = ap.parse_args()
    if set(args.variants) != set(VARIANTS) and args.out is None:
        ap.error("--variants with fewer than all four needs --out (results/fedcf_default.json "
                 "feeds the tables with all four)")
    results = {}
    for name, extra in ((n, VARIANTS[n]) for n in args.variants):
        rows = [one_run(s, extra, args) for s in args.seeds]
        keys = list(rows[0])
        mean = {k: float(np.mean([r[k] for r in rows])) for k in keys}
        print(f"\n### {name}\n")
        print("| seed | " + " | ".join(keys) + " |")
        print("|" + "---|" * (len(keys) + 1))
        for s, r in zip(args.seeds, rows, strict=True):
            print(f"| {s} | " + " | ".join(f"{r[k]:.4g}" for k in keys) + " |")
        print("| mean | " + " | ".join(f"{mean[k]:.4g}" for k in keys) + " |")
        mark = ""
        if name == RECOVERING:
            mark = " ok" if mean["cf_y"] < TARGET_CF_Y else " WORSE"
        print(f"\n{name}: CF_y mean {mean['cf_y']:.3f} (target for the recovering variant "
              f"< {TARGET_CF_Y:g}{mark}; paper: not reported); L_s {mean['L_s_2']:.4g} -> "
              f"{mean['L_s_last']:.4g}, D {mean['D_2']:.4g} -> {mean['D_last']:.4g}")
        sd = {k: mean_sd([r[k] for r in rows])[1] for k in keys}  # sample sd, ddof = 1
        results[name] = {"run_config": extra, "per_seed": dict(zip(args.seeds, rows, strict=True)),
                         "mean": mean, "sd": sd}
    write_results("fedcf_default", {"settings": settings(args), "variants": results,
                                   "recovering": RECOVERING, "target_cf_y": TARGET_CF_Y,
                                   "setting": {"shift_scale": args.shift_scale,
                                               "shift_known": False}}, args.out)


# ----------------------------------------------------------------------------- tables
CF_LABELS = {"literal": "literal (paper), i.i.d. u",
             "refined target": "refined target (server regresses on ĥ_a^t)",
             "innovation target": "**innovation target** (recovering variant)"}


def table_fedcf_default(results: str = "fedcf_default") -> str:
    """FedCF acceptance 3: the four server variants, mean ± sd over seeds."""
    r = read_results(results)
    target, rows = r["target_cf_y"], []
    for name, v in r["variants"].items():
        m = v["mean"]
        cf = f"{m['cf_y']:.3f} ± {v['sd']['cf_y']:.3f}"
        if name == r["recovering"] or name == "literal":
            cf = f"**{cf}**"
        if "ss-target" in v["run_config"]:
            cf += (f" (target < {target:g}: ok)" if m["cf_y"] < target
                   else f" (WORSE than {target:g})")
        rows.append([CF_LABELS.get(name, name), f"{m['L_s_2']:.3f} → {m['L_s_last']:.3f}",
                     f"{m['D_2']:.4f} → {m['D_last']:.4f}", pm(v, "err_A21"),
                     pm(v, "err_B21"), cf])
    return markdown(["variant", "L_s exch. 2 → last", "penalty 𝒟 2 → last", "‖Â_21 − A_21‖_F",
                     "‖B̂_21 − B_21‖_F", "CF_y = ‖C_22(B̂_21 − B_21)‖/‖C_22 B_21‖"], rows)


def table_fedcf_default_shifts() -> str:
    """FedCF acceptance 3 with FedGC's mean shifts, unknown to every filter."""
    return table_fedcf_default("fedcf_default_shifts")


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fedcf_default": table_fedcf_default, "fedcf_default_shifts": table_fedcf_default_shifts}


if __name__ == "__main__":
    main()
