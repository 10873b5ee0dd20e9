"""VFedCD paper Table 1 / Table 3 / Sachs setting: K=3 parties, ours beside the paper.

Runs the core reference loop, which equals the mock and Paillier protocols exactly
(tests/vertical/test_secure.py, tests/vertical/test_app_vfedcd.py), so it stands for the mock
backend. One synthetic data set per seed (data-seed = training seed = s; ``--data-seed`` fixes
it instead);
Sachs is one data set, so there only the training seed varies. SHD counts a reversal once
(the paper's text). ``--set k=v`` overrides a ``VFedCDSettings`` field (e.g. ``l2=0.005``);
``--preset tuned`` / ``slow`` apply the settings chosen on development data seeds 100-102 /
100-109 (see simulations/results/vfedcd.md). ``--transform`` is the parties' column transform
(default zscore, as every committed row of this script; the App's default is yeo-johnson:
``--preset fast --transform yeo-johnson`` is the App's default run). Rows are appended to
``--out`` (JSONL) as they finish. A "WORSE" marks a miss of the issue target (ours at least as
good as the paper: SHD <= paper and F1 >= paper).

    nice -n 10 python simulations/paper/vfedcd_table1.py --d 15 --seeds 0 1 2 3 4 --preset tuned
    python simulations/paper/vfedcd_table1.py --d sachs --preset fast --transform yeo-johnson \
        --seeds 0..4 --summary simulations/results/vfedcd_sachs_realdata.json   # the App default
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    DEFAULT_DATA,
    RESULTS_DIR,
    append_jsonl,
    markdown,
    parser,
    read_jsonl,
    write_results,
)
from harness import settings as cli_settings

from fedcausal_flwr.metrics import graph_metrics, orientation_share, score_auc
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import (
    TRANSFORMS,
    blocks,
    pooled_data,
    sachs,
    split_standardised,
)

PAPER = {10: (18.8, 0.698), 15: (33.0, 0.711), 25: (81.6, 0.649), "sachs": (19, None)}
PAPER_F1_SD = {10: 0.016, 15: 0.013, 25: 0.008}  # Table 1's F1 sd over training seeds
PAPER_T3 = {"framework": (56, 0.610), "ctv": (36, 0.678), "vfedcd": (35, 0.700)}
PRESETS = {  # changes to VFedCDSettings.paper(), chosen on development data seeds (15
    # attributes, vfedcd mode), never 0-9; "slow" gives VFedCDSettings.slow() (the App
    # defaults before the few-step schedule), "fast" the App defaults, VFedCDSettings()
    "paper": {},
    "tuned": {"loss": "nll", "lambda1": 5e-4, "l2": 5e-3, "gamma": 0.001, "tau": 0.4},  # 100-102
    "slow": {"loss": "nll", "lambda1": 5e-4, "l2": 5e-3, "gamma": 0.0005, "tau": 0.6,
             "epochs": 700},  # 100-109: half the penalty growth, 200 more epochs
    "fast": {"loss": "nll", "optimizer": "adam", "adam_eps": 0.003, "lr": 0.1, "batch": 200,
             "epochs": 30, "lambda1": 1e-3, "l2": 0.0, "gamma": 0.01, "tau": 0.7},  # 100-109,
    # vfedcd_fast_schedule.py: 120 steps (600 relayed exchanges) instead of 35,000
}


def f1(m: dict) -> float:
    p, r = m["precision"], m["tpr"]
    return 2 * p * r / (p + r) if p + r else 0.0


def data(key: int | str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Pooled data and true graph: Sachs, or the spec's ANM with E = 4d and data-seed ``seed``."""
    if key == "sachs":
        X, A, _ = sachs(DEFAULT_DATA / "sachs")
        return X, A
    return pooled_data({"d": key, "edges": 4 * key, "n": 1000, "data-seed": seed})


def run(X: np.ndarray, A: np.ndarray, s: V.VFedCDSettings, transform: str = "zscore") -> dict:
    """Train on the 80% split of K=3 contiguous blocks (columns mapped by ``transform``);
    metrics of the thresholded DAG, and the ranking AUROC / AUPR and orientation share of the
    weighted graph ``|B|`` (``metrics``)."""
    tr, _ = split_standardised(X, 0.2, transform)
    S = blocks(X.shape[1], 3)
    t0 = time.time()
    state = loop.train_reference([tr[:, b] for b in S], s)
    B, _ = V.result_graph(state.F, [len(b) for b in S], s.tau)
    order = np.concatenate(S)
    Bg = np.zeros_like(B)
    Bg[np.ix_(order, order)] = B
    m = graph_metrics(V.dag_at_threshold(Bg, s.tau), A)
    rank = score_auc(np.nan_to_num(Bg), A)
    return {"mode": s.mode, "seed": s.seed, "shd": m["shd_rev1"], "f1": f1(m), "nnz": m["nnz"],
            "transform": transform, "auroc": rank["auroc"], "aupr": rank["aupr"],
            "orientation": orientation_share(np.nan_to_num(Bg), A),
            "frozen_at": next((h["epoch"] for h in state.history if h["frozen"]), None),
            "lambda2": state.lam2, "rho": state.history[-1]["rho"],
            "seconds": time.time() - t0}


def settings(preset: str, sets: list[str], **kw) -> V.VFedCDSettings:
    """``VFedCDSettings`` of a preset plus ``k=v`` overrides."""
    types = {f.name: f.type for f in fields(V.VFedCDSettings)}
    over = dict(PRESETS[preset])
    for kv in sets:
        k, v = kv.split("=")
        over[k] = v in ("1", "true", "True") if types[k] == "bool" else \
            type(getattr(V.VFedCDSettings(), k))(v)
    return V.VFedCDSettings.paper(**{**over, **kw})


def verdict(shd: float, f: float, paper: tuple) -> str:
    """"WORSE" where ours misses the paper's SHD or F1."""
    worse = shd > paper[0] or (paper[1] is not None and f < paper[1])
    return " WORSE" if worse else ""


def main() -> None:
    ap = parser(__doc__, seeds=[0, 1, 2, 3, 4],
                out_help="also append each run as a JSON line to this file (the JSON summary "
                         "always goes to results/vfedcd_table1.json)")
    ap.add_argument("--d", default="15", help="attributes, or 'sachs'")
    ap.add_argument("--modes", nargs="+", default=["vfedcd"])
    ap.add_argument("--preset", default="tuned", choices=sorted(PRESETS))
    ap.add_argument("--set", nargs="*", default=[], help="Settings overrides k=v")
    ap.add_argument("--transform", default="zscore", choices=TRANSFORMS,
                    help="the parties' column transform (default zscore; the App's default "
                         "is yeo-johnson)")
    ap.add_argument("--summary", type=Path, default=None,
                    help="the JSON summary's path (default results/vfedcd_table1.json)")
    ap.add_argument("--data-seed", type=int, default=None,
                    help="fix the data set and vary only the training seed (spec 4.2)")
    a = ap.parse_args()
    key = a.d if a.d == "sachs" else int(a.d)
    summary = []
    for mode in a.modes:
        rows = []
        for seed in a.seeds:
            s = settings(a.preset, a.set, mode=mode, seed=seed)
            ds = seed if a.data_seed is None else a.data_seed
            rows.append({"d": key, "preset": a.preset, "set": a.set, "data_seed": ds,
                         **run(*data(key, ds), s, a.transform)})
            print(json.dumps(rows[-1]), flush=True)
            if a.out:
                append_jsonl(a.out, rows[-1])
        shd, f = np.mean([r["shd"] for r in rows]), [r["f1"] for r in rows]
        paper = PAPER_T3[mode] if key == 15 and mode != "vfedcd" else PAPER[key]
        print(f"d={key} mode={mode} preset={a.preset} {' '.join(a.set)} seeds={a.seeds}: "
              f"SHD {shd:.1f} F1 {np.mean(f):.3f}+-{np.std(f):.3f} | paper SHD {paper[0]} "
              f"F1 {paper[1]}{verdict(shd, np.mean(f), paper)}", flush=True)
        summary.append({"d": key, "mode": mode, "preset": a.preset, "set": a.set,
                        "seeds": a.seeds, "shd": shd, "f1": np.mean(f), "f1_sd": np.std(f),
                        "paper_shd": paper[0], "paper_f1": paper[1],
                        "paper_f1_sd": None if paper is PAPER_T3.get(mode) else
                        PAPER_F1_SD.get(key), "runs": rows})
    write_results("vfedcd_table1", {"settings": cli_settings(a), "summary": summary}, a.summary)


# ----------------------------------------------------------------------------- tables
VFEDCD_RUNS = RESULTS_DIR / "vfedcd_runs.jsonl"


def vfedcd_select(d: int | str, mode: str, preset: str = "slow") -> list[dict]:
    """One ``vfedcd_table1.py`` run per seed, data seed = training seed, no ``--set``, the
    z-score transform.

    A seed run twice (the spec-protocol runs repeat a data set) must give the same SHD and F1
    (the loop is deterministic); the first is kept.
    """
    out: dict[int, dict] = {}
    for r in read_jsonl(VFEDCD_RUNS):
        if (r["d"], r["mode"], r["preset"]) != (d, mode, preset) or r["set"] \
                or r.get("transform", "zscore") != "zscore" \
                or (d != "sachs" and r.get("data_seed", r["seed"]) != r["seed"]):
            continue
        old = out.setdefault(r["seed"], r)
        if (old["shd"], old["f1"]) != (r["shd"], r["f1"]):
            raise ValueError(f"vfedcd runs: d={d} {mode} {preset} seed {r['seed']} differs "
                             "between two runs")
    if not out:
        raise ValueError(f"vfedcd runs: nothing for d={d} {mode} {preset}")
    return [out[s] for s in sorted(out)]


def vfedcd_mean(rows: list[dict]) -> tuple[float, float]:
    """Mean SHD and mean F1."""
    return float(np.mean([r["shd"] for r in rows])), float(np.mean([r["f1"] for r in rows]))


T3_LABELS = {"framework": "Framework (no CTV, no SDP)", "ctv": "Framework + CTV",
             "vfedcd": "VFedCD (CTV + SDP)"}


def vfedcd_shd(rows: list[dict]) -> str:
    """``19.8 (17, 31, 20, 18, 13)``: mean SHD and the SHD of each seed."""
    return f"{vfedcd_mean(rows)[0]:.1f} ({', '.join(str(r['shd']) for r in rows)})"


def vfedcd_f1(rows: list[dict]) -> str:
    """``0.797 +- 0.090``: mean F1 ± population sd over the seeds (as the script prints)."""
    f = np.array([r["f1"] for r in rows])
    return f"{f.mean():.3f} +- {f.std():.3f}"


def table_vfedcd_table1() -> str:
    """VFedCD Table 1 (acceptance 2): SHD and F1 per size and preset, paper beside ours."""
    rows = []
    for preset, sizes in (("slow", (10, 15, 25)), ("tuned", (10, 15, 25)), ("paper", (15,))):
        for d in sizes:
            r = vfedcd_select(d, "vfedcd", preset)
            shd, f1 = vfedcd_mean(r)
            p_shd, p_f1 = PAPER[d]
            if shd > p_shd and f1 < p_f1:
                verdict = "WORSE"
            elif f1 < p_f1:
                verdict = f"F1 WORSE by {p_f1 - f1:.3f}"
            elif shd > p_shd:
                verdict = f"SHD WORSE by {shd - p_shd:.1f}"
            else:
                verdict = "better on both"
            b = "**" if preset == "slow" else ""  # the App defaults
            ours_shd, ours_f1 = vfedcd_shd(r).split(" ", 1), vfedcd_f1(r).split(" ", 1)
            rows.append([d, preset, f"{b}{ours_shd[0]}{b} {ours_shd[1]}",
                         f"{b}{ours_f1[0]}{b} {ours_f1[1]}", f"{p_shd:g}",
                         f"{p_f1:.3f} +- {PAPER_F1_SD[d]:.3f}", verdict])
    return markdown(["attributes", "preset", "ours SHD", "ours F1", "paper SHD", "paper F1", ""],
                    rows)


def table_vfedcd_table3_slow() -> str:
    """VFedCD Table 3 ablation, ``slow`` preset: the three modes, paper SHD / F1 / Corr."""
    from vfedcd_attack import PAPER_CORR  # here: vfedcd_attack imports this script

    rows = []
    for mode, label in T3_LABELS.items():
        r = vfedcd_select(15, mode)
        nnz = [x["nnz"] for x in r]
        rows.append([label, vfedcd_shd(r), vfedcd_f1(r), f"{min(nnz)}-{max(nnz)}",
                     f"{PAPER_T3[mode][0]:g} / {PAPER_T3[mode][1]:.3f} / {PAPER_CORR[mode]:.3f}"])
    return markdown(["mode", "ours SHD", "ours F1", "edges found", "paper SHD / F1 / Corr"], rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"vfedcd_table1": table_vfedcd_table1, "vfedcd_table3_slow": table_vfedcd_table3_slow}


if __name__ == "__main__":
    main()
