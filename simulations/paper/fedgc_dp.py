"""FedGC with differential privacy: accuracy vs the per-release epsilon (no paper numbers).

The papers give no DP experiment and no epsilon, delta or clip values. Default FedGC design
(``fedgc_default.py``), DP on: every state row sent is clipped to ``ss-dp-clip-msg`` and every
gradient row to ``ss-dp-clip-grad``, each with Gaussian noise for (epsilon, delta = 1e-5) per
release (``privacy.py``; the classic bound is only valid for epsilon < 1, larger values are
shown to locate where accuracy returns). Two gradient clips: the default 1, and 1e-3, closer
to the size of the window-mean gradient rows (about 2/W times the server residual). Prints
mean ||A_21_hat - A_21||_F, ||A_12_hat||_F and the noiseless training L_s with the final
(frozen) parameters, and the composed epsilon over the run.

    python simulations/paper/fedgc_dp.py [--seeds 5] [--eps 0.5 5 50 500 5000]
"""

from __future__ import annotations

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import parser, settings, write_results

from fedcausal_flwr.privacy import composed
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import merged_config, synthetic_clients, synthetic_series

# The design these results were made with (before issue 13): client 1's shifts known to its
# filter and the paper's server (eqs 15-16 on levels). The App default now learns with unknown
# shifts through the innovation target on differences, where theta does not reach the server,
# so the paper's baselines (no augmentation, pre-trained client) would not differ there.
PAPER_DESIGN = {"ss-shift-known": True, "ss-gc-target": "predicted", "ss-difference": False,
                "ss-lr-server": 1.5, "ss-window": 1000, "ss-epochs": 30}  # schedule before issue 12


def one_run(seed: int, extra: dict) -> tuple[float, float, float, float]:
    rc = merged_config({"seed": seed, **PAPER_DESIGN, **extra})
    sys, _, y, u = synthetic_series(rc)
    clients = synthetic_clients(rc, sys, y, u)
    s = ss.FedGCSettings.from_run_config(rc)
    run = ss.reference(clients, s)
    ts = np.arange(1, y.shape[0])
    msgs = [ss.fedgc_states(c, p, ts, s.target) for c, p in zip(clients, run.clients,
                                                                strict=True)]
    L_s = ss.fedgc_server_window(ss.clients_A(clients), run.server.A_hat, msgs, s.target,
                                 s.difference).L_s
    eps = composed([(s.dp_epsilon, s.dp_delta)] * (2 * len(run.history)))[0] if s.dp else 0.0
    A = run.server.A_hat
    return (ss.block_error(A, sys.A, sys.P, sys.P, 1, 0),
            ss.block_error(A, 0 * A, sys.P, sys.P, 0, 1), L_s, eps)


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=5)
    ap.add_argument("--eps", type=float, nargs="*", default=[0.5, 5, 50, 500, 5000])
    args = ap.parse_args()
    print("| DP | clip msg / grad | per-release epsilon | composed epsilon | "
          "||A21_hat - A21||_F | ||A12_hat||_F | L_s (noiseless, final params) |")
    print("|---|---|---|---|---|---|---|")
    cells = [("off", 5.0, 1.0, None)] + [("on", 5.0, g, e) for g in (1.0, 1e-3)
                                         for e in args.eps]
    rows = []
    for name, cm, cg, eps in cells:
        extra = {} if eps is None else {"ss-dp": True, "ss-dp-epsilon": eps,
                                        "ss-dp-clip-msg": cm, "ss-dp-clip-grad": cg}
        r = np.mean([one_run(s, extra) for s in args.seeds], axis=0)
        print(f"| {name} | {cm:g} / {cg:g} | {'-' if eps is None else f'{eps:g}'} | "
              f"{'-' if eps is None else f'{r[3]:.3g}'} | {r[0]:.3f} | {r[1]:.3f} | "
              f"{r[2]:.4g} |", flush=True)
        rows.append({"dp": name, "clip_msg": cm, "clip_grad": cg, "epsilon": eps,
                     "composed_epsilon": None if eps is None else r[3], "err_A21": r[0],
                     "norm_A12": r[1], "L_s": r[2]})
    write_results("fedgc_dp", {"settings": settings(args), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
