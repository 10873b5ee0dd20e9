"""FedGC Table 4: test losses (L_2)_a / L_s when the causal structure changes after training.

Train on the default system (A_21 = 0.25 * 1, A_12 = 0, the default design of
``fedgc_default.py``), freeze theta and A_hat, then evaluate on fresh series (same local
blocks and mean shifts on client 1, new noise) whose coupling is perturbed, A_21 * (1 + eps)
with eps in {5, 45, 85, 125}%, or whose topology changes: preserving, reversing (A_21 = 0,
A_12 = 0.25 * 1), eliminating (both 0), bidirectional (both 0.25 * 1). The paper's claims:
both losses rise with the perturbation and "reversing" gives the largest L_s.

Frameworks (paper Sec. 8 / A.8): "ours" (eq 24 with eta1 = eta2 = 1), "no client aug."
(theta = 0: the server sees nothing, L_s = 0), "no server model" (eta2 = 0: theta trained on
the local loss alone; no L_s), "pre-trained client" (theta from "no server model", frozen,
then the server trained on it).

    python simulations/paper/fedgc_table4.py [--n-seeds 5] [--t 10000]
"""

from __future__ import annotations

from dataclasses import replace

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import parser, settings, write_results

from fedcausal_flwr.statespace import kalman, loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import merged_config, synthetic_clients, synthetic_series
from fedcausal_flwr.statespace.lti import LTISystem

PAPER = {  # framework -> case -> ((L_2)_a, L_s); None: not reported
    "no client aug.": {c: (None, 1e-5) for c in ("5%", "45%", "85%", "125%", "preserving",
                                                  "reversing", "eliminating", "bidirectional")},
    "no server model": {"5%": (0.22, None), "45%": (0.58, None), "85%": (0.88, None),
                        "125%": (1.135, None), "preserving": (0.182, None),
                        "reversing": (0.24, None), "eliminating": (0.279, None),
                        "bidirectional": (0.127, None)},
    "pre-trained client": {"5%": (0.22, 0.007), "45%": (0.58, 0.015), "85%": (0.88, 0.022),
                           "125%": (1.135, 0.028), "preserving": (0.182, 0.006),
                           "reversing": (0.24, 0.065), "eliminating": (0.279, 0.012),
                           "bidirectional": (0.127, 0.014)},
    "ours": {"5%": (0.39, 0.003), "45%": (0.57, 0.007), "85%": (0.76, 0.010),
             "125%": (0.93, 0.013), "preserving": (0.37, 0.003), "reversing": (0.35, 0.033),
             "eliminating": (0.40, 0.006), "bidirectional": (0.34, 0.008)},
}
CASES = list(PAPER["ours"])

# The design these results were made with (before issue 13): client 1's shifts known to its
# filter and the paper's server (eqs 15-16 on levels). The App default now learns with unknown
# shifts through the innovation target on differences, where theta does not reach the server,
# so the paper's baselines (no augmentation, pre-trained client) would not differ there.
PAPER_DESIGN = {"ss-shift-known": True, "ss-gc-target": "predicted", "ss-difference": False,
                "ss-lr-server": 1.5, "ss-window": 1000, "ss-epochs": 30}  # schedule before issue 12


def test_system(sys: LTISystem, case: str) -> LTISystem:
    A = sys.A.copy()
    one = 0.25 * np.ones((2, 2))
    if case.endswith("%"):
        A[2:, :2] *= 1 + float(case[:-1]) / 100
    elif case == "reversing":
        A[2:, :2], A[:2, 2:] = 0, one
    elif case == "eliminating":
        A[2:, :2] = 0
    elif case == "bidirectional":
        A[:2, 2:] = one
    return replace(sys, A=A)


def train(clients: list[kalman.ClientData], s: ss.FedGCSettings,
          cpar: list[ss.ClientParams] | None = None) -> tuple[list[ss.ClientParams],
                                                               ss.ServerParams]:
    """The reference loop, optionally from given client parameters."""
    T = clients[0].y.shape[0]
    cpar = cpar or [ss.initial_client(c) for c in clients]
    spar = ss.initial_server([c.dims[0] for c in clients], [0] * len(clients))
    for k, ts in ss.iterate_windows(T, s.window, s.epochs):
        cpar, spar, _ = loop.exchange_step(clients, cpar, spar, ts, s, k)
    return cpar, spar


def frameworks(clients: list[kalman.ClientData], s: ss.FedGCSettings) -> dict[str, tuple]:
    """Trained ``(client params, server params)`` of each framework of Table 4."""
    ours = train(clients, s)
    alone = train(clients, replace(s, eta2=0.0))
    return {"no client aug.": train(clients, replace(s, lr_client=0.0)),
            "no server model": alone,
            "pre-trained client": train(clients, replace(s, lr_client=0.0), alone[0]),
            "ours": ours}


def losses(cpar: list[ss.ClientParams], spar: ss.ServerParams,
           clients: list[kalman.ClientData]) -> tuple[float, float]:
    """Test (L_2)_a and L_s over the whole test series, parameters frozen."""
    ts = np.arange(1, clients[0].y.shape[0])
    msgs = [ss.fedgc_states(c, p, ts, PAPER_DESIGN["ss-gc-target"])
            for c, p in zip(clients, cpar, strict=True)]
    win = ss.fedgc_server_window(loop.clients_A(clients), spar.A_hat, msgs,
                                 PAPER_DESIGN["ss-gc-target"], PAPER_DESIGN["ss-difference"])
    return ss.local_loss(clients[1], cpar[1], ts), win.L_s


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=5)
    ap.add_argument("--t", type=int, default=10000)
    args = ap.parse_args()
    out = {f: {c: [] for c in CASES} for f in PAPER}
    for seed in args.seeds:
        rc = merged_config({"seed": seed, "ss-t": args.t, **PAPER_DESIGN})
        sys, _, y, u = synthetic_series(rc)
        trained = frameworks(synthetic_clients(rc, sys, y, u), ss.FedGCSettings.from_run_config(rc))
        for case in CASES:
            test = test_system(sys, case)
            if kalman.spectral_radius(test.A) >= 1:
                continue
            trc = {**rc, "seed": seed + 1000}
            _, _, yt, ut = synthetic_series(trc, test)
            clients = synthetic_clients(trc, test, yt, ut)
            for f, (cpar, spar) in trained.items():
                out[f][case].append(losses(cpar, spar, clients))
    print("| framework | test | paper (L_2)_a / L_s | ours (L_2)_a / L_s |")
    print("|---|---|---|---|")
    table = []
    for f, cases in out.items():
        for case, rows in cases.items():
            la, ls = np.mean(rows, axis=0)
            la = None if PAPER[f][case][0] is None else la
            ls = None if PAPER[f][case][1] is None else ls
            print(f"| {f} | {case} | {fmt(PAPER[f][case][0])} / {fmt(PAPER[f][case][1])} | "
                  f"{fmt(la)} / {fmt(ls)} |")
            table.append({"framework": f, "test": case, "paper_L_a": PAPER[f][case][0],
                          "paper_L_s": PAPER[f][case][1], "L_a": la, "L_s": ls,
                          "seeds": len(rows)})
    for f in ("pre-trained client", "ours"):
        ls = {c: np.mean([r[1] for r in out[f][c]]) for c in CASES}
        la = {c: np.mean([r[0] for r in out[f][c]]) for c in CASES}
        pert = [c for c in CASES if c.endswith("%")]
        rise = all(np.diff([ls[c] for c in pert]) > 0) and all(np.diff([la[c] for c in pert]) > 0)
        top = max((c for c in CASES if not c.endswith("%")), key=ls.get)
        print(f"{f}: both losses rise with eps: {'ok' if rise else 'WORSE'}; largest topology "
              f"L_s: {top} ({'ok' if top == 'reversing' else 'WORSE'}, paper: reversing); "
              f"reversing / eliminating L_s ratio {ls['reversing'] / ls['eliminating']:.3f} "
              f"(paper {f}: {PAPER[f]['reversing'][1] / PAPER[f]['eliminating'][1]:.3g})")
    write_results("fedgc_table4", {"settings": settings(args), "rows": table, "per_seed": out},
                  args.out)


if __name__ == "__main__":
    main()
