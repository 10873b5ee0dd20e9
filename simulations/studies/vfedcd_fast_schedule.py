"""A VFedCD schedule that a loopback deployment finishes in about 2 hours (issue 12, item 3).

A deployed VFedCD run costs about ``E S 5`` relayed exchanges (E epochs of S mini-batch
steps, 5 phases each; ~7 s per exchange on loopback) plus E times the cryptography of one
epoch (every row is encrypted once per epoch, so that cost hardly depends on the batch). The
paper's schedule (SGD, lr 0.01, batch 16, 700 epochs: 35,000 steps) is ~15 days of exchanges.
This study looks for few epochs of few (large) batches on the spec's Table 1 data: d = 15,
E = 4d edges, n = 1000 (80/20 split, per-party z-score), K = 3 contiguous parties, mode
"vfedcd", the mock backend's arithmetic (``core.vfedcd.train_reference``, which equals the
Paillier protocols bit for bit), one data set per seed (data seed = training seed).

Every run keeps the weighted graph B after each epoch count of ``--snapshots`` (training
continues from the same state, so one 30-epoch run also gives 10, 15, 20 and 25 epochs) and
scores the DAG at every threshold of ``TAUS``: epochs and tau cost no extra training. Each
(setting, seed) appends one JSON line to ``--runs`` (the scores, not B).

Settings are changes to the App defaults of the time the study ran, ``VFedCDSettings.slow()``
(SGD, lr 0.01, batch 16, NLL, lambda1 5e-4, l2 5e-3, gamma 5e-4, tau 0.6; Adam's eps 1e-8
where a setting names no ``adam_eps``); ``--grid k=v1,v2 ...`` runs their product:

    python simulations/studies/vfedcd_fast_schedule.py --seeds 100..102 --grid optimizer=adam \\
        batch=800,200 lr=0.01,0.03 gamma=0.01,0.02
    python simulations/studies/vfedcd_fast_schedule.py --summary --seeds 100..109

``--summary`` ranks every (setting, epochs, tau) run on all ``--seeds`` by mean F1 (ties: lower
SHD) and writes ``results/vfedcd_fast_schedule.json``; ``--max-steps`` (default 120, i.e.
600 exchanges) drops cells whose ``E S`` exceeds it. Every cell also gets the projected minutes
of its loopback deployment with real keys (:func:`deployed_s`); ``--max-minutes`` drops the
cells above it and ``--frontier`` lists, instead of the best cell per setting, the cells no
faster cell beats on mean F1 (issue 23: what a 30-minute deployment can reach):

    python simulations/studies/vfedcd_fast_schedule.py --summary --seeds 100..109 \
        --runs simulations/results/vfedcd_deploy30_runs.jsonl --max-steps 9999 --frontier \
        --out simulations/results/vfedcd_deploy30.json
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    RESULTS_DIR,
    append_jsonl,
    markdown,
    mean_sd,
    parser,
    read_jsonl,
    read_results,
    write_results,
)
from vfedcd_table1 import data
from vfedcd_table1 import settings as preset_settings

from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.secure.paillier import DEFAULT_BITS, SLOT_BITS
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import blocks, split_standardised

TAUS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.2, 1.4, 1.6, 2.0)
RUNS = RESULTS_DIR / "vfedcd_fast_schedule_runs.jsonl"
BASE = {"mode": "vfedcd", "adam_eps": 1e-8}  # with VFedCDSettings.slow(): what "no change" meant
PHASES = 5  # relayed exchanges per mini-batch step (forward, share, decode, gradient, update)
EXCHANGE_S = 7.24  # s per exchange, VFedCD's 3-node loopback deployment (RESULTS.md, "before")
CRYPTO_EPOCH_S = 60.0  # s per epoch of the 3 parties' 2048-bit crypto on 2 cores, h = 10
START_S = 60.0  # deployment start-up, keys and setup phase
PARTY_COLS = 5  # d_t: d = 15 over K = 3 parties


def parse_value(key: str, text: str) -> Any:
    """A ``VFedCDSettings`` field's value from text."""
    kind = {f.name: f.type for f in fields(V.VFedCDSettings)}[key]
    if kind == "bool":
        return text in ("1", "true", "True")
    return type(getattr(V.VFedCDSettings(), key))(text)


def grid(specs: list[str]) -> list[dict[str, Any]]:
    """The product of ``k=v1,v2`` specs as change dicts."""
    axes = [[(k, parse_value(k, v)) for v in vs.split(",")]
            for k, _, vs in (spec.partition("=") for spec in specs)]
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


def name_of(changes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(changes.items())) or "default"


def steps_per_epoch(batch: int, rows: int = 800) -> int:
    return math.ceil(rows / batch)


def packed_blocks(hidden: int, cols: int = PARTY_COLS, bits: int = DEFAULT_BITS) -> int:
    """Packed ciphertexts per row of ``cols * hidden`` values (``paillier.blocks``)."""
    return -(-cols * hidden // ((bits - 2) // SLOT_BITS))


def deployed_s(epochs: int, steps: int, hidden: int, phases: int = PHASES) -> float:
    """Projected seconds of the loopback deployment with real keys: start-up, ``epochs *
    steps * phases`` exchanges at :data:`EXCHANGE_S` and the cryptography of every epoch
    (:data:`CRYPTO_EPOCH_S` measured at h = 10, scaled by the packed blocks per row, which
    every ciphertext count of an epoch is proportional to: ``results/vfedcd.md``)."""
    crypto = CRYPTO_EPOCH_S * packed_blocks(hidden) / packed_blocks(10)
    return START_S + epochs * (steps * phases * EXCHANGE_S + crypto)


def score(B: np.ndarray, A: np.ndarray, tau: float) -> dict[str, float]:
    """SHD (reversal counted once), F1 on directed edges and edges of the DAG at tau."""
    m = graph_metrics(V.dag_at_threshold(B, tau), A)
    p, r = m["precision"], m["tpr"]
    return {"shd": m["shd_rev1"], "f1": 2 * p * r / (p + r) if p + r else 0.0, "nnz": m["nnz"]}


def run_one(changes: dict[str, Any], seed: int, snapshots: list[int]) -> dict:
    """Train once; scores at every snapshot epoch and threshold."""
    X, A = data(15, seed)
    s = V.VFedCDSettings.slow(**{**BASE, **changes, "epochs": max(snapshots),
                                 "he_backend": "mock", "seed": seed})
    tr, _ = split_standardised(X)
    S = blocks(X.shape[1], 3)
    sizes, order = [len(b) for b in S], np.concatenate(S)
    state, done, scores, t0 = None, 0, {}, time.process_time()
    for ep in sorted(snapshots):
        state = loop.train_reference([tr[:, b] for b in S], s, epochs=ep - done, state=state)
        done = ep
        B = np.zeros((len(order), len(order)))
        B[np.ix_(order, order)] = V.graph(state.F, sizes)
        scores[str(ep)] = {str(tau): score(B, A, tau) for tau in TAUS}
    return {"setting": name_of(changes), "changes": changes, "seed": seed,
            "steps_per_epoch": steps_per_epoch(s.batch, len(tr)), "scores": scores,
            "lambda2": state.lam2, "frozen_at": next((h["epoch"] for h in state.history
                                                      if h["frozen"]), None),
            "rho": state.history[-1]["rho"], "cpu_s": time.process_time() - t0}


def ranked(rows: list[dict], seeds: list[int], max_steps: int,
           max_minutes: float = math.inf) -> list[dict]:
    """Every (setting, epochs, tau) run on all ``seeds`` with E S <= max_steps and a projected
    deployment (:func:`deployed_s`) within ``max_minutes``, best first."""
    cells: dict[tuple[str, int, str], dict[int, dict]] = {}
    spe: dict[str, int] = {}
    hidden: dict[str, int] = {}
    for r in rows:
        spe[r["setting"]] = r["steps_per_epoch"]
        hidden[r["setting"]] = int(r["changes"].get("hidden", V.VFedCDSettings().hidden))
        for ep, by_tau in r["scores"].items():
            for tau, m in by_tau.items():
                cells.setdefault((r["setting"], int(ep), tau), {})[r["seed"]] = m
    out = []
    for (name, ep, tau), per in cells.items():
        minutes = deployed_s(ep, spe[name], hidden[name]) / 60
        if not set(seeds) <= set(per) or ep * spe[name] > max_steps or minutes > max_minutes:
            continue
        out.append({"setting": name, "epochs": ep, "tau": float(tau),
                    "steps": ep * spe[name], "exchanges": PHASES * ep * spe[name],
                    "deploy_min": minutes,
                    **{k: mean_sd(per[s][k] for s in seeds) for k in ("shd", "f1", "nnz")},
                    "f1_min": min(per[s]["f1"] for s in seeds),
                    "per_seed_f1": [per[s]["f1"] for s in seeds]})
    out.sort(key=lambda c: (-c["f1"][0], c["shd"][0]))
    return out


def frontier(cells: list[dict], step: float = 0.005) -> list[dict]:
    """The cells that beat every faster cell's mean F1 by more than ``step``, fastest first."""
    out: list[dict] = []
    for c in sorted(cells, key=lambda c: (c["deploy_min"], -c["f1"][0])):
        if not out or c["f1"][0] > out[-1]["f1"][0] + step:
            out.append(c)
    return out


def fmt(c: dict) -> str:
    return (f"F1 {c['f1'][0]:.3f} ± {c['f1'][1]:.3f} (min {c['f1_min']:.3f})  "
            f"SHD {c['shd'][0]:5.1f} ± {c['shd'][1]:4.1f}  edges {c['nnz'][0]:4.1f}  "
            f"E {c['epochs']:3d} steps {c['steps']:5d} exch {c['exchanges']:6d}  "
            f"~{c['deploy_min']:5.1f} min  "
            f"tau {c['tau']:<4g} {c['setting']}")


def main() -> None:
    ap = parser(__doc__, seeds=[100, 101, 102])
    ap.add_argument("--grid", nargs="*", default=[], help="k=v1,v2 ... (VFedCDSettings fields)")
    ap.add_argument("--snapshots", type=int, nargs="+", default=[10, 15, 20, 25, 30])
    ap.add_argument("--runs", type=Path, default=RUNS)
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--max-steps", type=int, default=120)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--max-minutes", type=float, default=math.inf,
                    help="drop cells whose projected deployment takes longer")
    ap.add_argument("--frontier", action="store_true",
                    help="list the deployment-minutes / F1 frontier instead")
    a = ap.parse_args()
    if a.summary:
        rows = read_jsonl(a.runs)
        best = ranked(rows, a.seeds, a.max_steps, a.max_minutes)
        if a.frontier:
            front = frontier(best)
            for c in front:
                print(fmt(c))
            write_results("vfedcd_deploy30", {
                "seeds": a.seeds, "max_steps": a.max_steps, "frontier": front,
                "model": {"exchange_s": EXCHANGE_S, "crypto_epoch_s_h10": CRYPTO_EPOCH_S,
                          "start_s": START_S, "phases": PHASES}}, a.out)
            return
        seen: set[str] = set()
        per_setting = [c for c in best if not (c["setting"] in seen or seen.add(c["setting"]))]
        for c in per_setting[:a.top]:
            print(fmt(c))
        write_results("vfedcd_fast_schedule", {"seeds": a.seeds, "max_steps": a.max_steps,
                                               "best_per_setting": per_setting[:a.top]}, a.out)
        return
    done = {(r["setting"], r["seed"], max(map(int, r["scores"])))
            for r in read_jsonl(a.runs)} if a.runs.exists() else set()
    for changes in grid(a.grid):
        for seed in a.seeds:
            if (name_of(changes), seed, max(a.snapshots)) in done:
                continue
            row = run_one(changes, seed, a.snapshots)
            append_jsonl(a.runs, row)
            last = row["scores"][str(max(a.snapshots))]
            print(f"{row['setting']} seed {seed} ({row['cpu_s']:.1f} cpu s) ep "
                  f"{max(a.snapshots)}: " + " ".join(
                      f"t{t}:{m['shd']}/{m['f1']:.2f}" for t, m in last.items()), flush=True)


# ----------------------------------------------------------------------------- tables
VFEDCD_FAST_EVAL = RESULTS_DIR / "vfedcd_fast_eval.jsonl"


VFEDCD_FAST_PRESETS = (("fast", "App default: Adam lr 0.1, batch 200, 30 epochs"),
                       ("slow", "previous default (`VFedCDSettings.slow()`): SGD lr 0.01, "
                                "batch 16, 700 epochs"),
                       ("paper", "paper (`VFedCDSettings.paper()`): SGD lr 0.01, batch 16, "
                                 "500 epochs, MSE"))


def table_vfedcd_fast_schedule() -> str:
    """Issue 12.3: the few-step schedule on development seeds (best cells of the study) and
    the evaluation seeds (new default, previous default, paper), with exchanges per run."""
    study = read_results("vfedcd_fast_schedule")
    rows = []
    for c in study["best_per_setting"][:6]:
        rows.append([f"dev {min(study['seeds'])}-{max(study['seeds'])}", c["setting"],
                     c["epochs"], c["tau"], c["steps"], c["exchanges"],
                     f"{c['shd'][0]:.1f} +- {c['shd'][1]:.1f}",
                     f"{c['f1'][0]:.3f} +- {c['f1'][1]:.3f}"])
    evals = read_jsonl(VFEDCD_FAST_EVAL)
    for preset, label in VFEDCD_FAST_PRESETS:
        r = [x for x in evals if x["preset"] == preset]
        if not r:
            continue
        s = preset_settings(preset, [])
        steps = s.epochs * -(-800 // s.batch)
        seeds = sorted(x["seed"] for x in r)
        shd, f1 = mean_sd(x["shd"] for x in r), mean_sd(x["f1"] for x in r)
        rows.append([f"eval {seeds[0]}-{seeds[-1]}", label, s.epochs, s.tau, steps, 5 * steps,
                     f"{shd[0]:.1f} +- {shd[1]:.1f}", f"{f1[0]:.3f} +- {f1[1]:.3f}"])
    return markdown(["seeds", "setting (dev: changes to `VFedCDSettings.slow()`)", "epochs", "tau",
                     "steps", "exchanges", "SHD", "F1"],
                    rows)


def table_vfedcd_deploy30() -> str:
    """Issue 23: the frontier of projected deployment minutes (real keys) against mean F1 on
    the development seeds: each row beats every faster cell."""
    study = read_results("vfedcd_deploy30")
    seeds = f"{min(study['seeds'])}-{max(study['seeds'])}"
    rows = [[f"{c['deploy_min']:.1f}", c["steps"], c["exchanges"], c["epochs"], c["tau"],
             c["setting"].replace("adam_eps=0.003 ", "").replace(" l2=0.0", "").replace(
                 " lambda1=0.001", "").replace(" optimizer=adam", ""),
             f"{c['shd'][0]:.1f} +- {c['shd'][1]:.1f}", f"{c['f1'][0]:.3f} +- {c['f1'][1]:.3f}"]
            for c in study["frontier"]]
    return markdown(["projected min", "steps", "exchanges", "epochs", "tau",
                     f"setting (Adam; adam_eps 0.003, lambda1 1e-3, l2 0 unless named; dev "
                     f"{seeds})", "SHD", "F1"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"vfedcd_fast_schedule": table_vfedcd_fast_schedule,
          "vfedcd_deploy30": table_vfedcd_deploy30}


if __name__ == "__main__":
    main()
