"""FedGC, the paper's default (M=2, D=8, P=2, A_21 = 0.25 * ones, A_12 = 0), over 10 seeds.

Prints, per seed and on average, ||A_21_hat - A_21||_F (paper Table 3: 0.120) and
||A_12_hat||_F (paper: 0.024), whether the losses fall (mean over the first vs the last epoch),
how well the plain, augmented and oracle states predict client 2's next measurement, and
how close client 2's predicted states ``A_22 hhat^{t-1}`` are to the oracle's (Thm 6.1). The
"fixed point" columns are the exact stationary point of the Jacobi iteration (theta_m and
A_hat with eta1 grad L_a + eta2 grad L_s = 0 and grad L_s = 0 over the whole series, solved
from the core gradients, which are affine in the parameters): what the optimiser converges
to, so the gap to it is optimisation and the rest is the synthetic design.

Design (the paper gives none of it; chosen on seeds 100-119, see results/fedgc.md): T = 10000,
shift levels 4x the fork's, W = 1000, 30 epochs (300 exchanges), running-max normalized steps
lr 0.3 (server; 1.5 stopped 0.012 short of the stationary point's ||A12||) and 1.5 (client).
Since issue 12 the App's schedule is one window per epoch (W = 10000), 20 epochs, lr 1.0 / 1.5
(20 windows, 22 exchanges, the same accuracy: ``statespace_windows.py``); the runs in
results/fedgc.md used the schedule above, ``--window 1000 --epochs 30 --set ss-lr-server=0.3``.
Default: the paper's setting, shifts that no filter models (``ss-shift-known=false``),
learned by the innovation target on time differences (``ss-gc-target``, ``ss-difference``).
The earlier design (shifts known to client 0's filter, the paper's algorithm):
``--set ss-shift-known=true ss-gc-target='"predicted"' ss-difference=false ss-lr-server=1.5``.

    python simulations/paper/fedgc_default.py [--n-seeds 10] [--first-seed 0] [--t T] [--window W]
        [--epochs E] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    dec3,
    markdown,
    mean_sd,
    parser,
    pm,
    read_results,
    seed_range,
    settings,
    write_results,
)

from fedcausal_flwr.statespace import kalman, loop, lti
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import (
    known_shift_input,
    merged_config,
    synthetic_clients,
    synthetic_series,
)

PAPER = {"err_A21": 0.120, "norm_A12": 0.024}
TARGET = {"err_A21": 0.12, "norm_A12": 0.05}


def stationary_point(clients: list[kalman.ClientData], s: ss.FedGCSettings
                     ) -> tuple[list[np.ndarray], np.ndarray]:
    """``(thetas, A_hat)`` where every full-series Jacobi gradient vanishes (ridge included)."""
    ts = np.arange(1, clients[0].y.shape[0])
    P = [c.dims[0] for c in clients]
    shapes = [c.dims[0] * c.dims[2] for c in clients]
    mask = ss.off_diagonal(np.ones((sum(P), sum(P))), np.zeros((sum(P), 0)), P,
                            [0] * len(P))[0].astype(bool)
    n = sum(shapes) + int(mask.sum())

    def unpack(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        th, o = [], 0
        for c, k in zip(clients, shapes, strict=True):
            th.append(x[o:o + k].reshape(c.dims[0], c.dims[2]))
            o += k
        A = np.zeros((sum(P), sum(P)))
        A[mask] = x[o:]
        return th, A

    def grad(x: np.ndarray) -> np.ndarray:
        th, A = unpack(x)
        cpar = [ss.ClientParams(t, np.zeros(c.dims[0])) for c, t in zip(clients, th, strict=True)]
        msgs = [ss.fedgc_states(c, p, ts, s.target) for c, p in zip(clients, cpar, strict=True)]
        win = ss.fedgc_server_window(loop.clients_A(clients), A, msgs, s.target, s.difference)
        out = []
        for m, (c, p) in enumerate(zip(clients, cpar, strict=True)):
            gl = ss.local_gradients(c, p, ts)[0]
            gs = ss.server_grad_theta(c, ts, win.g[m], win.g_tilde[m], s.target, s.alg1_literal)[0]
            out.append((s.eta1 * gl + s.eta2 * gs + 2 * s.lambda_l * p.theta).ravel())
        out.append((win.grad_A + 2 * s.lambda_g * A)[mask])
        return np.concatenate(out)

    g0 = grad(np.zeros(n))
    H = np.column_stack([grad(e) - g0 for e in np.eye(n)])
    return unpack(np.linalg.lstsq(H, -g0, rcond=None)[0])


def oracle_states(sys: lti.LTISystem, rc: dict, y: np.ndarray) -> np.ndarray:
    """The centralized KF (true A), knowing client 0's shifts when client 0 does."""
    ub = known_shift_input(rc, sys)
    K = kalman.kalman_gain(sys.A, sys.C, sys.Q, sys.R)
    if ub is None:
        return kalman.kalman_filter(sys.A, sys.C, K, y)
    B = np.zeros((sys.A.shape[0], ub.shape[1]))
    B[:ub.shape[1]] = np.eye(ub.shape[1])
    return kalman.kalman_filter(sys.A, sys.C, K, y, B, ub)


def prior_distance(c: kalman.ClientData, states: np.ndarray, prior_o: np.ndarray, ts: np.ndarray
                   ) -> float:
    """Mean ``||A_mm states^{t-1} - (A hhat_o^{t-1})_m||^2``: Thm 6.1's predicted states."""
    return float(np.mean(np.sum((states[ts - 1] @ c.A.T - prior_o) ** 2, axis=1)))


def one_seed(seed: int, args: argparse.Namespace) -> dict[str, float]:
    rc = merged_config({"seed": seed, **args.extra})
    sys, _, y, u = synthetic_series(rc)
    clients = synthetic_clients(rc, sys, y, u)
    s = ss.FedGCSettings.from_run_config(rc)
    t0 = time.time()
    run = loop.reference(clients, s)
    wall = time.time() - t0
    A = run.server.A_hat
    n = len(run.history) // s.epochs

    def epoch_mean(key: str, e: int) -> float:
        return float(np.mean([h[key] for h in run.history[e * n:(e + 1) * n]]))

    _, A_star = stationary_point(clients, s)
    oracle = oracle_states(sys, rc, y)
    T = y.shape[0]
    c, ts = clients[1], np.arange(1, T)
    aug = ss.augmented_states(c, run.clients[1])
    r = c.y[ts] - (oracle[ts - 1] @ sys.A.T)[:, 2:] @ c.C.T
    o2 = oracle[:, 2:]
    prior_o = (oracle[ts - 1] @ sys.A.T)[:, 2:]
    return {"err_A21": ss.block_error(A, sys.A, sys.P, sys.P, 1, 0),
            "norm_A12": ss.block_error(A, 0 * A, sys.P, sys.P, 0, 1),
            "fp_err_A21": ss.block_error(A_star, sys.A, sys.P, sys.P, 1, 0),
            "fp_norm_A12": ss.block_error(A_star, 0 * A, sys.P, sys.P, 0, 1),
            "L_s_first": epoch_mean("L_s", 0), "L_s_last": epoch_mean("L_s", s.epochs - 1),
            "L_a2_first": epoch_mean("L_a_1", 0),
            "L_a2_last": epoch_mean("L_a_1", s.epochs - 1),
            "pred_plain": ss.prediction_loss(c, c.hc, ts),
            "pred_aug": ss.prediction_loss(c, aug, ts),
            "pred_oracle": float(np.mean(np.sum(r * r, axis=1))),
            "prior_plain_oracle": prior_distance(c, c.hc, prior_o, ts),
            "prior_aug_oracle": prior_distance(c, aug, prior_o, ts),
            "post_plain_oracle": float(np.mean(np.sum((c.hc - o2) ** 2, axis=1))),
            "post_aug_oracle": float(np.mean(np.sum((aug - o2) ** 2, axis=1))),
            "exchanges": len(run.history), "wall_s": wall}


def verdict(ok: bool) -> str:
    return "ok" if ok else "WORSE"


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=10)
    ap.add_argument("--first-seed", type=int, default=0, help="development seeds: >= 100")
    ap.add_argument("--t", type=int)
    ap.add_argument("--window", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--set", nargs="*", default=[], help="run-config overrides key=json")
    args = ap.parse_args()
    args.extra = {k: v for k, v in (("ss-t", args.t), ("ss-window", args.window),
                                    ("ss-epochs", args.epochs)) if v is not None}
    args.extra.update({k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)})
    seeds = [args.first_seed + s for s in args.seeds]
    rows = [one_seed(s, args) for s in seeds]
    keys = list(rows[0])
    print("| seed | " + " | ".join(keys) + " |")
    print("|" + "---|" * (len(keys) + 1))
    for s, r in zip(seeds, rows, strict=True):
        print(f"| {s} | " + " | ".join(f"{r[k]:.4g}" for k in keys) + " |")
    mean = {k: float(np.mean([r[k] for r in rows])) for k in keys}
    sd = {k: mean_sd([r[k] for r in rows])[1] for k in keys}  # sample sd, ddof = 1
    print("| mean | " + " | ".join(f"{mean[k]:.4g}" for k in keys) + " |")
    print("| sd | " + " | ".join(f"{sd[k]:.4g}" for k in keys) + " |")
    rc = merged_config({"seed": seeds[0], **args.extra})
    s = ss.FedGCSettings.from_run_config(rc)
    setting = {"shift_known": bool(rc["ss-shift-known"]), "shift_scale": rc["ss-shift-scale"],
               "target": s.target, "difference": s.difference}
    print(f"setting: {setting}")
    print(f"\nseeds {seeds[0]}-{seeds[-1]}, {args.extra or 'defaults'}")
    print("| | paper | ours | target | |\n|---|---|---|---|---|")
    print(f"| ||A21_hat - A21||_F | {PAPER['err_A21']} | "
          f"{mean['err_A21']:.3f} ± {sd['err_A21']:.3f} "
          f"(fixed point {mean['fp_err_A21']:.3f}) | <= 0.12 | "
          f"{verdict(mean['err_A21'] <= TARGET['err_A21'])} |")
    print(f"| ||A12_hat||_F | {PAPER['norm_A12']} | {mean['norm_A12']:.3f} ± {sd['norm_A12']:.3f} "
          f"(fixed point {mean['fp_norm_A12']:.3f}) | < 0.05 | "
          f"{verdict(mean['norm_A12'] < TARGET['norm_A12'])} |")
    print(f"| L_s first -> last epoch | falls | {mean['L_s_first']:.4g} -> "
          f"{mean['L_s_last']:.4g} | falls | {verdict(mean['L_s_last'] < mean['L_s_first'])} |")
    print(f"| (L_2)_a first -> last epoch | falls | {mean['L_a2_first']:.4g} -> "
          f"{mean['L_a2_last']:.4g} | falls | "
          f"{verdict(mean['L_a2_last'] < mean['L_a2_first'])} |")
    print(f"| one-step prediction of y_2: plain / augmented / oracle | aug better | "
          f"{mean['pred_plain']:.4g} / {mean['pred_aug']:.4g} / {mean['pred_oracle']:.4g} | "
          f"aug < plain | {verdict(mean['pred_aug'] < mean['pred_plain'])} |")
    print(f"| mean ||h^t - h_o^t||^2 (predicted states, Thm 6.1): plain / augmented | "
          f"aug closer | {mean['prior_plain_oracle']:.4g} / {mean['prior_aug_oracle']:.4g} | "
          f"aug < plain | {verdict(mean['prior_aug_oracle'] < mean['prior_plain_oracle'])} |")
    print(f"| mean ||hhat^t - hhat_o^t||^2 (posterior states; not a target): plain / augmented "
          f"| - | {mean['post_plain_oracle']:.4g} / {mean['post_aug_oracle']:.4g} | - | - |")
    write_results("fedgc_default", {"settings": settings(args), "paper": PAPER, "target": TARGET,
                                    "per_seed": dict(zip(seeds, rows, strict=True)),
                                    "mean": mean, "sd": sd, "setting": setting}, args.out)


# ----------------------------------------------------------------------------- tables
FEDGC_RUNS = {"fedgc_default": "unknown shifts (paper's setting), default algorithm",
              "fedgc_default_known": "shifts known to client 1's filter, paper's algorithm",
              "fedgc_default_paper_unknown": "unknown shifts, paper's algorithm"}


def gc_setting(r: dict[str, Any]) -> str:
    """The setting of a fedgc_default run in words: who knows the shifts, which server."""
    s = r["setting"]
    who = "shifts known to client 1's filter" if s["shift_known"] else "unknown shifts"
    alg = ("innovation target, differenced" if s["target"] == "innovation" and s["difference"]
           else "paper's algorithm" if s["target"] == "predicted" and not s["difference"]
           else f"target {s['target']}, difference {s['difference']}")
    return f"{who} (scale {s['shift_scale']:g}), {alg}"


def table_fedgc_settings() -> str:
    """FedGC's errors in each setting of the shifts (the default and the paper's algorithm)."""
    rows = []
    for name in FEDGC_RUNS:
        r = read_results(name)
        t = r["target"]
        rows.append([gc_setting(r), seed_range(r["per_seed"]),
                     f"{pm(r, 'err_A21')} ({r['mean']['fp_err_A21']:.3f})",
                     f"{pm(r, 'norm_A12')} ({r['mean']['fp_norm_A12']:.3f})",
                     "ok" if r["mean"]["err_A21"] <= t["err_A21"]
                     and r["mean"]["norm_A12"] < t["norm_A12"] else "WORSE"])
    return markdown(["setting", "seeds", "‖Â_21 − A_21‖_F (stationary point)",
                     "‖Â_12‖_F (stationary point)", "target ≤ 0.12 / < 0.05"], rows)


def table_fedgc_default() -> str:
    """FedGC acceptance 1: mean over seeds of the errors, losses and predictions."""
    r = read_results("fedgc_default")
    m, p, t = r["mean"], r["paper"], r["target"]

    def ok(b: bool) -> str:
        return "ok" if b else "WORSE"

    rows = [
        ["‖Â_21 − A_21‖_F", f"{p['err_A21']:.3f}",
         f"**{pm(r, 'err_A21')}** (stationary point {m['fp_err_A21']:.3f})",
         f"≤ {t['err_A21']:g}", ok(m["err_A21"] <= t["err_A21"])],
        ["‖Â_12‖_F", f"{p['norm_A12']:.3f}",
         f"**{pm(r, 'norm_A12')}** (stationary point {m['fp_norm_A12']:.3f})",
         f"< {t['norm_A12']:g}", ok(m["norm_A12"] < t["norm_A12"])],
        ["L_s, mean of the first → the last epoch", "falls",
         f"{m['L_s_first']:.4f} → {m['L_s_last']:.4f}", "falls",
         ok(m["L_s_last"] < m["L_s_first"])],
        ["client 2 local loss (L_2)_a, first → last epoch", "falls",
         f"{dec3(m['L_a2_first'])} → {dec3(m['L_a2_last'])}", "falls",
         ok(m["L_a2_last"] < m["L_a2_first"])],
        ["one-step prediction of y_2: plain / augmented / oracle", "aug better",
         " / ".join(dec3(m[k]) for k in ("pred_plain", "pred_aug", "pred_oracle")),
         "aug < plain", ok(m["pred_aug"] < m["pred_plain"])],
        ["‖h_2^t − h_{2,o}^t‖² (predicted states, Thm 6.1): plain / augmented", "aug closer",
         f"{dec3(m['prior_plain_oracle'])} / {dec3(m['prior_aug_oracle'])}", "aug < plain",
         ok(m["prior_aug_oracle"] < m["prior_plain_oracle"])],
        ["‖ĥ_2^t − ĥ_{2,o}^t‖² (posterior states; not a target)", "",
         f"{dec3(m['post_plain_oracle'])} / {dec3(m['post_aug_oracle'])}", "", ""]]
    return markdown(["", "paper (Table 3)", f"ours ({gc_setting(r)}; mean ± sd of "
                     f"{len(r['per_seed'])} seeds)", "target", ""], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fedgc_settings": table_fedgc_settings, "fedgc_default": table_fedgc_default}


if __name__ == "__main__":
    main()
