"""FedGC and FedCF: window, epochs and step sizes against accuracy and exchanges (issue 12).

A deployment pays ~6.5 s per exchange (server -> every client -> server) whatever its size,
so the default App runs should need few of them. A run is ``epochs * ceil((T - 1) / W) + 2``
exchanges (setup and the final gradient delivery included); windows are sequential by
dependency, so fewer exchanges means larger windows and/or fewer epochs, with the
normalized steps ``ss-lr-server`` / ``ss-lr-client`` re-chosen.

Every candidate runs the in-process reference loop (:func:`statespace.reference`, proven
equal to the Flower path by the tests) on the App's data defaults, for three runs per seed:

``fedgc``            FedGC's App defaults (unknown mean shifts, innovation target, differenced)
``fedcf``            FedCF's App defaults (the paper's literal ``ss-target="predicted"``)
``fedcf-innovation`` the README's FedCF run (``ss-target="innovation"``): counterfactual error

and records ``||A21_hat - A21||_F``, ``||A12_hat||_F`` (targets <= 0.12, <= 0.05) and, for
FedCF, ``cf_error_21 = ||C_22 (B21_hat - B21)||_F / ||C_22 B21||_F``. Each row is appended
to a JSON-lines file as it finishes, so a long sweep loses nothing; ``--summary`` turns the
rows into ``results/<out>.json`` (means and sample sds, ddof = 1) for ``tables.py``.

    python simulations/studies/statespace_windows.py [--seeds 100..109] [--grid SPEC ...]
        [--runs fedgc fedcf fedcf-innovation] [--jsonl FILE.jsonl]
    python simulations/studies/statespace_windows.py --summary FILE.jsonl --name NAME

A grid entry ``SPEC`` is ``W,epochs,lr_server,lr_client``; ``default`` is the settings
classes' defaults and ``paper`` the schedule before issue 12 (W = 1000, 30 epochs, 0.3 / 1.5;
``StateSpaceSettings.paper_schedule``). What was run (results/, RESULTS.md):

1. coarse, development seeds 100-104: ``paper`` and W in {9999: 10, 20, 30, 38 epochs;
   5000: 10, 19 epochs} x lr_server {0.3, 0.6, 1.0, 1.5} x lr_client {1.5, 3.0}
   -> ``statespace_windows_dev_coarse.jsonl`` / ``.json``;
2. fine, development seeds 100-109: ``paper`` and W 9999 x {5, 8, 10, 12, 15, 20} epochs x
   lr_server {0.6, 0.8, 1.0, 1.2, 1.5} x lr_client {1.0, 1.5}
   -> ``statespace_windows_dev.jsonl`` / ``.json``;
3. once, with the chosen default (W 10000, 20 epochs, 1.0 / 1.5), new evaluation seeds
   5200-5209: ``--seeds 5200..5209 --grid default paper``
   -> ``statespace_windows_eval.jsonl``, summary ``statespace_windows.json``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    RESULTS_DIR,
    append_jsonl,
    fmt,
    markdown,
    mean_sd,
    parser,
    read_jsonl,
    read_results,
    seed_range,
    write_results,
)

from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import merged_config, synthetic_clients, synthetic_series

RUNS = {"fedgc": ("fedgc", {}), "fedcf": ("fedcf", {}),
        "fedcf-innovation": ("fedcf", {"ss-target": "innovation"})}
PAPER_SCHEDULE = {"ss-window": 1000, "ss-epochs": 30, "ss-lr-server": 0.3, "ss-lr-client": 1.5}
METRICS = ("err_A21", "norm_A12", "cf_error_21", "exchanges")


def candidate(spec: str) -> dict[str, Any]:
    """Run-config keys of a grid entry (``{}``: the settings' defaults)."""
    if spec == "default":
        return {}
    if spec == "paper":
        return dict(PAPER_SCHEDULE)
    W, E, lrs, lrc = spec.split(",")
    return {"ss-window": int(W), "ss-epochs": int(E), "ss-lr-server": float(lrs),
            "ss-lr-client": float(lrc)}


def exchanges(T: int, s: ss.StateSpaceSettings) -> int:
    """Setup + one per window + the final gradient delivery."""
    return s.epochs * math.ceil((T - 1) / s.window) + 2


def one_run(run: str, seed: int, extra: dict[str, Any]) -> dict[str, Any]:
    model, keys = RUNS[run]
    rc = merged_config({"seed": seed, **keys, **extra}, model)
    sys, _, y, u = synthetic_series(rc)
    clients = synthetic_clients(rc, sys, y, u)
    cls = ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings
    s = cls.from_run_config(rc)
    t0 = time.process_time()
    res = ss.reference(clients, s)
    cpu = time.process_time() - t0
    A = res.server.A_hat
    out = {"run": run, "seed": seed, "window": s.window, "epochs": s.epochs,
           "lr_server": s.lr_server, "lr_client": s.lr_client,
           "err_A21": ss.block_error(A, sys.A, sys.P, sys.P, 1, 0),
           "norm_A12": ss.block_error(A, 0 * A, sys.P, sys.P, 0, 1),
           "exchanges": exchanges(y.shape[0], s), "cpu_s": cpu,
           "L_s_last": res.history[-1]["L_s"]}
    if model == "fedcf":
        C22 = ss.block(sys.C, sys.D, sys.P, 1, 1)
        B21 = ss.block(sys.B, sys.P, sys.U, 1, 0)
        out["cf_error_21"] = ss.counterfactual_error(
            C22, ss.block(res.server.B_hat, sys.P, sys.U, 1, 0), B21)
    return out


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and sample sd (ddof = 1) per (grid entry, run), in first-seen order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["grid"], r["run"]), []).append(r)
    out = []
    for (spec, run), rs in groups.items():
        row: dict[str, Any] = {"grid": spec, "run": run, "seeds": sorted(r["seed"] for r in rs),
                               **{k: rs[0][k] for k in ("window", "epochs", "lr_server",
                                                         "lr_client")}}
        for k in METRICS:
            if k in rs[0]:
                m, sd = mean_sd([r[k] for r in rs])
                row[k] = {"mean": m, "sd": sd}
        out.append(row)
    return out


def main() -> None:
    ap = parser(__doc__.splitlines()[0], seeds=[100, 101, 102, 103, 104])
    ap.add_argument("--grid", nargs="*", default=["default"],
                    help="W,epochs,lr_server,lr_client | default | paper")
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--jsonl", type=Path, default=RESULTS_DIR / "statespace_windows_dev.jsonl")
    ap.add_argument("--summary", type=Path, help="summarize this JSON-lines file and exit")
    ap.add_argument("--name", default="statespace_windows", help="results/<name>.json")
    args = ap.parse_args()
    if args.summary:
        rows = read_jsonl(args.summary)
        table = summarize(rows)
        for r in table:
            print(r["grid"], r["run"],
                  " ".join(f"{k} {r[k]['mean']:.4g}±{r[k]['sd']:.2g}" for k in METRICS if k in r))
        write_results(args.name, {"settings": {"summary": args.summary.name},
                                  "paper_schedule": PAPER_SCHEDULE, "summary": table}, args.out)
        return
    for spec in args.grid:
        extra = candidate(spec)
        for run in args.runs:
            for seed in args.seeds:
                r = {**one_run(run, seed, extra), "grid": spec}
                append_jsonl(args.jsonl, r)
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                  for k, v in r.items()}), flush=True)


# ----------------------------------------------------------------------------- tables
SS_RUNS = {"fedgc": "FedGC (App defaults)", "fedcf": "FedCF (App defaults, literal target)",
           "fedcf-innovation": "FedCF, `ss-target=\"innovation\"` (the README's run)"}


def ss_schedule(r: dict[str, Any]) -> str:
    """``W 10000, 20 epochs, lr 1.0 / 1.5`` of a statespace_windows summary row."""
    return f"W {r['window']}, {r['epochs']} epochs, lr {r['lr_server']:g} / {r['lr_client']:g}"


def ss_cells(r: dict[str, Any]) -> list[str]:
    """err_A21, norm_A12, cf_error_21 (mean ± sd) of a statespace_windows summary row."""
    return [fmt(r[k]["mean"], r[k]["sd"], 3) if k in r else "-"
            for k in ("err_A21", "norm_A12", "cf_error_21")]


def table_statespace_windows() -> str:
    """FedGC/FedCF: the new default schedule beside the schedule before issue 12, eval seeds."""
    r = read_results("statespace_windows")
    rows = [[SS_RUNS[x["run"]], "default" if x["grid"] == "default" else "before (paper)",
             ss_schedule(x), f"{x['exchanges']['mean']:.0f}", seed_range(x["seeds"]),
             *ss_cells(x)] for x in sorted(r["summary"], key=lambda x: list(SS_RUNS)
                                           .index(x["run"]))]
    return markdown(["run", "schedule", "", "exchanges", "seeds", "‖Â_21 − A_21‖_F",
                     "‖Â_12‖_F", "CF_y (cf_error_21)"], rows)


def table_statespace_windows_dev() -> str:
    """The development grid (seeds 100-109): lr_client 1.5, one window per epoch, by lr_server
    and epochs, beside the schedule before issue 12."""
    r = read_results("statespace_windows_dev")
    by: dict[tuple[str, str], dict[str, Any]] = {}
    for x in r["summary"]:
        by[(x["grid"], x["run"])] = x
    grids = [g for g in dict.fromkeys(x["grid"] for x in r["summary"])
             if g == "paper" or (g.endswith(",1.5") and int(g.split(",")[1]) in (5, 10, 15, 20))]
    rows = []
    for g in grids:
        gc, cf, ci = (by[(g, run)] for run in SS_RUNS)
        rows.append([ss_schedule(gc), f"{gc['exchanges']['mean']:.0f}",
                     *(f"{x[k]['mean']:.3f}" for x, k in ((gc, "err_A21"), (gc, "norm_A12"),
                                                          (cf, "err_A21"), (ci, "err_A21"),
                                                          (ci, "norm_A12"),
                                                          (ci, "cf_error_21")))])
    return markdown(["schedule", "exchanges", "FedGC ‖Â_21 − A_21‖", "FedGC ‖Â_12‖",
                     "FedCF ‖Â_21 − A_21‖", "FedCF innov. ‖Â_21 − A_21‖",
                     "FedCF innov. ‖Â_12‖", "FedCF innov. CF_y"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"statespace_windows": table_statespace_windows,
          "statespace_windows_dev": table_statespace_windows_dev}


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
