"""Regenerate the marked tables of ``simulations/RESULTS.md`` and ``simulations/results/*.md``.

Sources: the scripts' JSON in ``simulations/results/`` (``harness.write_results``), the JSON
lines of long runs (``results/fediv_runs/*.jsonl``, ``results/vfedcd_runs.jsonl``) and the
paper values the scripts hold (``PAPER`` of ``fediv_table1.py``, ``vfedcd_table1.py``). No
number is written here. Each managed table sits between ``<!-- table:NAME -->`` and
``<!-- /table -->``; everything outside the markers (prose, hand-written tables) is left alone.
``--check`` rewrites nothing and exits 1 when a file differs from what the results give (a table
edited by hand, or results rerun without regenerating).

    python simulations/tables.py            # rewrite the marked tables of every file
    python simulations/tables.py --check    # exit 1 if any file is out of date
    python simulations/tables.py --list     # the table names it knows
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from harness import RESULTS_DIR, SIM_DIR, fmt, markdown, mean_sd, read_jsonl, read_results

RESULTS_MD = SIM_DIR / "RESULTS.md"
MARKER = re.compile(r"(<!-- table:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                    re.DOTALL)
NETSIM_DIMS = {1: 5, 2: 10, 3: 15}  # NetSim sims 1-3: 5, 10, 15 regions
DREAM4_PAPER_MEAN = {"auroc": 0.600, "aupr": 0.040}  # Table 7's means, for JSON written before
# fdbnl_dream4.py recorded them (not the mean of the rounded per-network values: 0.604, 0.039)


def dot(v: float, digits: int = 2) -> str:
    """``0.64`` -> ``.64`` (the papers' style); ``1.00`` stays."""
    s = f"{v:.{digits}f}"
    return s[1:] if s.startswith("0.") else s


def short(v: float, digits: int = 3) -> str:
    """At most ``digits`` decimals, trailing zeros dropped (``0.736``, ``0.74``, ``6.2``)."""
    return f"{round(v, digits):g}"


def bold(m: float, s: float, digits: int = 3) -> str:
    """``**m ± s**``: a headline mean."""
    return f"**{fmt(m, s, digits)}**"


# ----------------------------------------------------------------------------- FDBNL / PFDBNL
def fdbnl_table1() -> str:
    """Table 1: PFDBNL vs FDBNL, paper weights (fdbnl_table1) and code weights (_codeweights)."""
    runs = [read_results("fdbnl_table1"), read_results("fdbnl_table1_codeweights")]
    paper = runs[0]["paper"]
    rows = []

    def pair(summ: dict, a: str, b: str) -> str:
        return f"{dot(summ[a][0])} / {dot(summ[b][0])}"

    for label, key in (("mSHD W", "shd_w"), ("mSHD A", "shd_a")):
        rows.append([label] + [c for i, m in enumerate(("PFDBNL", "FDBNL"))
                               for c in [short(paper[key][i]),
                                         *(fmt(*r["summary"][m][key]) for r in runs)]])
    for label, a, b, with_paper in (
            ('paper "mTPR" W / A', "paper_tpr_w", "paper_tpr_a", True),
            ('paper "mFDR" W / A', "paper_fdr_w", "paper_fdr_a", True),
            ("true TPR W / A", "tpr_w", "tpr_a", False),
            ("true FDR W / A", "fdr_w", "fdr_a", False)):
        row = [label]
        for i, m in enumerate(("PFDBNL", "FDBNL")):
            row.append(f"{dot(paper[a][i])} / {dot(paper[b][i])}" if with_paper else "")
            row += [pair(r["summary"][m], a, b) for r in runs]
        rows.append(row)
    return markdown(["", "paper PFDBNL", "ours, paper weights", "ours, code weights",
                     "paper FDBNL", "ours, paper weights", "ours, code weights"], rows)


def fdbnl_netsim_sim3() -> str:
    """NetSim sim3 per subject (Table 8), FDBNL and PFDBNL, paper beside ours."""
    r = read_results("fdbnl_netsim")
    rows, subjects = [], None
    for m in ("FDBNL", "PFDBNL"):
        per = r["per_subject"]["3"][m]
        subjects = [s["subject"] for s in per]
        paper = r["paper"][m]["3"]
        rows.append([f"paper {m}", *(dot(p) for p in paper), short(sum(paper) / len(paper))])
        rows.append([f"ours {m}", *(dot(s["auroc"]) for s in per),
                     bold(*r["summary"][f"sim3 {m}"]["auroc"])])
    return markdown(["subject", *map(str, subjects or []), "mean"], rows)


def fdbnl_netsim() -> str:
    """NetSim sims 1-3: mean AUROC ± sd over five subjects, ours / paper, and code-compat."""
    r = read_results("fdbnl_netsim")
    rows = []
    for sim in r["settings"]["sims"]:
        s = {m: r["summary"][f"sim{sim} {m}"]
             for m in ("FDBNL", "PFDBNL", "PFDBNL code-compat")}
        rows.append([f"{sim} (d={NETSIM_DIMS[sim]})",
                     *(f"{fmt(*s[m]['auroc'], 3)} / {s[m]['paper'][0]:.3f}"
                       for m in ("FDBNL", "PFDBNL")),
                     fmt(*s["PFDBNL code-compat"]["auroc"], 3)])
    return markdown(["sim", "FDBNL ours / paper", "PFDBNL ours / paper", "PFDBNL code-compat"],
                    rows)


def fdbnl_dream4() -> str:
    """DREAM4 size 100 (Table 7): AUROC and AUPR per network, paper beside ours."""
    r = read_results("fdbnl_dream4")
    nets = r["settings"]["networks"]
    per = r["per_network"]["FDBNL"]
    rows = []
    for key, pd, od in (("auroc", 2, 3), ("aupr", 3, 3)):
        paper = [r["paper"]["FDBNL"][key][i - 1] for i in nets]
        mean = r["paper"]["FDBNL"].get(f"{key}_mean", DREAM4_PAPER_MEAN[key])
        rows.append([f"paper {key.upper()}", *(dot(p, pd) for p in paper),
                     f"{mean:.3f}" if len(nets) == 5 else "-"])
        rows.append([f"ours {key.upper()}", *(dot(per[str(i)][key], od) for i in nets),
                     bold(*r["summary"]["FDBNL"][key])])
    return markdown(["network", *map(str, nets), "mean"], rows)


def fdbnl_lambda_scale() -> str:
    """SHD/TPR/FDR of W across K, ``lambda_scale`` paper vs pooled, and pooled DYNOTEARS."""
    r = read_results("fdbnl_lambda_scale")
    s = r["summary"]
    digits = {"shd_w": 1, "tpr_w": 2, "fdr_w": 2}
    rows = [[K, *(fmt(s[f"K={K} {sc}"][k][0], digits=d) for k, d in digits.items()
                  for sc in ("paper", "pooled"))] for K in r["settings"]["K"]]
    rows.append(["Alldata (pooled DYNOTEARS)",
                 *(c for k, d in digits.items() for c in (fmt(s["Alldata"][k][0], digits=d), ""))])
    return markdown(["K", "SHD(W) paper", "SHD(W) pooled", "TPR(W) paper", "TPR(W) pooled",
                     "FDR(W) paper", "FDR(W) pooled"], rows)


def fdbnl_varying_d() -> str:
    """Fig. 3: SHD(W) of FDBNL, Ave, Best, Alldata per d, and whether FDBNL <= Ave."""
    r = read_results("fdbnl_varying_d")
    rows = []
    for d, ms in r["summary"].items():
        shd = {m: ms[m]["shd_w"] for m in ("FDBNL", "Ave", "Best", "Alldata")}
        rows.append([d, len(r["per_seed"][d]), *(fmt(*v, 1) for v in shd.values()),
                     "yes" if shd["FDBNL"][0] <= shd["Ave"][0] else "no"])
    return markdown(["d", "seeds", "FDBNL", "Ave", "Best", "Alldata", "FDBNL <= Ave"], rows)


def fdbnl_varying_k() -> str:
    """d=20, n=512, K=64: TPR/SHD/FDR of W, FDBNL at the first and the oracle-picked lambda."""
    r = read_results("fdbnl_varying_k")
    rows = []
    for K, s in r["summary"].items():
        paper = r["paper_tpr_w"].get(K, {})
        grid, pick = r["settings"]["grid"], s["lambda_w"]

        def row(label: str, m: dict, p: Any) -> list[str]:
            return [label, "-" if p is None else short(p, 1), fmt(m["tpr_w"][0]),
                    f"{m['shd_w'][0]:.0f}", fmt(m["fdr_w"][0])]

        rows.append(row(f"FDBNL lambda {grid[0]:g}", s["grid"][str(grid[0])], paper.get("FDBNL")))
        if pick != grid[0]:
            rows.append(row(f"FDBNL lambda {pick:g} (oracle pick)", s["grid"][str(pick)],
                            paper.get("FDBNL")))
        n = r["settings"]["ave_clients"] or int(K)
        for m in ("Ave", "Best"):
            rows.append(row(f"{m} ({n} of {K} clients)", s["methods"][m], paper.get(m)))
        rows.append(row("Alldata (pooled DYNOTEARS)", s["methods"]["Alldata"], None))
    return markdown(["method", "TPR(W) paper", "TPR(W) ours", "SHD(W)", "FDR(W)"], rows)


def fdbnl_solver_cost() -> str:
    """FDBNL server-step solvers (issue 12): CPU s, evaluations, SHD per K, vs the official code."""
    r = read_results("fdbnl_solver_cost")
    rows = []
    for v in r["summary"].values():
        profile, _, solver = v["who"].rpartition("/")
        ratio = v.get("cpu_ratio_official")
        rows.append([v["K"], profile or "-", solver, v["seeds"], fmt(*v["cpu_s"]),
                     fmt(v["cpu_s_per_round"][0], digits=4), fmt(v["nfev_per_round"][0], digits=0),
                     fmt(v["rounds"][0], digits=1), fmt(*v["shd_w"], 1), fmt(*v["shd_a"], 1),
                     "-" if ratio is None else fmt(*ratio)])
    return markdown(["K", "settings", "solver", "seeds", "CPU s", "CPU s/round", "evals/round",
                     "rounds", "SHD(W)", "SHD(A)", "CPU / official (per seed)"], rows)


def fdbnl_rounds() -> str:
    """FDBNL/PFDBNL rounds and graph scores per stop rule and phi1, development seeds then
    evaluation seeds (issue 12): ``fdbnl_rounds.py``'s two JSONs."""
    rows = []
    for name, seeds in (("fdbnl_rounds_dev", "dev"), ("fdbnl_rounds", "eval")):
        r = read_results(name)
        label = f"{seeds} {r['settings']['seeds'][0]}-{r['settings']['seeds'][-1]}"
        for key, m in r["summary"].items():
            scenario, variant = key.split(" | ")
            rows.append([label, scenario, variant, fmt(*m["rounds"], 1), fmt(*m["shd_w"], 1),
                         fmt(*m["shd_a"], 1), fmt(*m["tpr_w"])])
    return markdown(["seeds", "scenario", "stop rule, rho1 growth", "rounds", "SHD(W)",
                     "SHD(A)", "TPR(W)"], rows)


def fdbnl_defaults_dev() -> str:
    """FDBNL default candidates on development seeds (issue 13): mean rank over scenarios of
    the mean SHD(W) + SHD(A), best first (``fdbnl_defaults.py``, results/fdbnl_defaults_dev)."""
    r = read_results("fdbnl_defaults_dev")
    rows = [[o["variant"], short(o["tau"]), f"{o['mean_rank']:.2f}", f"{o['mean_shd']:.1f}",
             f"{o['mean_shd_w']:.1f}", f"{o['mean_shd_a']:.1f}", f"{o['mean_rounds']:.0f}"]
            for o in r["overall"].values()]
    return markdown(["lambda scale / lambda / dual step", "tau", "mean rank", "SHD W + A",
                     "SHD(W)", "SHD(A)", "rounds"], rows)


def fdbnl_defaults() -> str:
    """FDBNL defaults on the evaluation seeds (issue 13): per scenario SHD(W) / SHD(A) (mean ±
    sd) and rounds of each reported profile (``fdbnl_defaults.py``, results/fdbnl_defaults)."""
    r = read_results("fdbnl_defaults")
    cells = {**r["cells"], **r.get("app", {})}
    scenarios = [*r["scenarios"]]
    rows = []
    for sc in scenarios:
        for label, vt in r["report"].items():
            v, tau = vt.split("@")
            c = cells[f"{sc} | {v} | tau {float(tau):g}"]
            rows.append([sc, label, fmt(*c["shd_w"], 1), fmt(*c["shd_a"], 1), fmt(*c["tpr_w"]),
                         fmt(c["rounds"][0], digits=0)])
    for label, vt in r["report"].items():
        v, tau = vt.split("@")
        o = r["overall"][f"{v} | tau {float(tau):g}"]
        rows.append(["**mean of the 6 scenarios**", label, f"{o['mean_shd_w']:.1f}",
                     f"{o['mean_shd_a']:.1f}", "", f"{o['mean_rounds']:.0f}"])
    return markdown(["scenario", "profile", "SHD(W)", "SHD(A)", "TPR(W)", "rounds"], rows)


def benchmark_flower_overhead() -> str:
    """Flower overhead of FDBNL: reference loop vs ``flwr run``, per K and round count."""
    r = read_results("benchmark_flower_overhead")
    rows = [[x["K"], x["rounds"], f"{x['reference_s']:.2f}", f"{x['flower_s']:.1f}",
             f"{x['ratio']:.0f}", f"{x['strategy_s']:.1f}", f"{x['s_per_round']:.3f}",
             f"{x['ref_s_per_round']:.3f}",
             f"{x['bytes_up_per_round'] / 1000:.1f} kB / {x['bytes_down_per_round'] / 1000:.1f} kB"]
            for x in r["rows"]]
    return markdown(["K", "rounds", "reference s", "`flwr run` s", "ratio", "strategy s",
                     "s/round Flower", "s/round reference", "bytes up / down per round"], rows)


# ----------------------------------------------------------------------------- FedGC / FedCF
CF_LABELS = {"literal": "literal (paper), i.i.d. u",
             "refined target": "refined target (server regresses on ĥ_a^t)",
             "innovation target": "**innovation target** (recovering variant)"}


def sig2(v: float) -> str:
    """Two significant figures, trailing zeros kept (``0.0197`` -> ``0.020``)."""
    return f"{v:.{max(0, 1 - math.floor(math.log10(abs(v))))}f}" if v else "0"


def dec3(v: float) -> str:
    """Three decimals, but at least two significant figures (``0.003776`` -> ``0.0038``)."""
    return f"{v:.3f}" if abs(v) >= 0.01 else sig2(v)


def seed_range(seeds: Sequence[Any]) -> str:
    """``0-9`` (or the list where the seeds are not a range)."""
    s = sorted({int(x) for x in seeds})
    return f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


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


def pm(r: dict[str, Any], key: str, digits: int = 3) -> str:
    """``mean ± sd`` (sample sd) of ``key`` in a run's ``mean`` and ``sd``."""
    return fmt(r["mean"][key], r["sd"][key], digits)


def fedgc_settings() -> str:
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


def fedgc_default() -> str:
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


def fedcf_default(results: str = "fedcf_default") -> str:
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


def fedcf_default_shifts() -> str:
    """FedCF acceptance 3 with FedGC's mean shifts, unknown to every filter."""
    return fedcf_default("fedcf_default_shifts")


# ----------------------------------------------------------------------------- FedIV
FEDIV_RUNS = RESULTS_DIR / "fediv_runs"
FEDIV_TABLE1_FILES = ("fed_gda", "fed_sgda", "central_gda", "central_rest",
                      "central_old_sgda_oadam")  # what fediv.md's --summarize command reads


SS_RUNS = {"fedgc": "FedGC (App defaults)", "fedcf": "FedCF (App defaults, literal target)",
           "fedcf-innovation": "FedCF, `ss-target=\"innovation\"` (the README's run)"}


def ss_schedule(r: dict[str, Any]) -> str:
    """``W 10000, 20 epochs, lr 1.0 / 1.5`` of a statespace_windows summary row."""
    return f"W {r['window']}, {r['epochs']} epochs, lr {r['lr_server']:g} / {r['lr_client']:g}"


def ss_cells(r: dict[str, Any]) -> list[str]:
    """err_A21, norm_A12, cf_error_21 (mean ± sd) of a statespace_windows summary row."""
    return [fmt(r[k]["mean"], r[k]["sd"], 3) if k in r else "-"
            for k in ("err_A21", "norm_A12", "cf_error_21")]


def statespace_windows() -> str:
    """FedGC/FedCF: the new default schedule beside the schedule before issue 12, eval seeds."""
    r = read_results("statespace_windows")
    rows = [[SS_RUNS[x["run"]], "default" if x["grid"] == "default" else "before (paper)",
             ss_schedule(x), f"{x['exchanges']['mean']:.0f}", seed_range(x["seeds"]),
             *ss_cells(x)] for x in sorted(r["summary"], key=lambda x: list(SS_RUNS)
                                           .index(x["run"]))]
    return markdown(["run", "schedule", "", "exchanges", "seeds", "‖Â_21 − A_21‖_F",
                     "‖Â_12‖_F", "CF_y (cf_error_21)"], rows)


def statespace_windows_dev() -> str:
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


def fediv_runs(files: Sequence[str] = FEDIV_TABLE1_FILES) -> list[dict[str, Any]]:
    """The committed JSON lines of ``fediv_table1.py`` runs (``results/fediv_runs/*.jsonl``)."""
    return [r for f in files for r in read_jsonl(FEDIV_RUNS / f"{f}.jsonl")]


def fediv_select(rows: list[dict], scenario: str, method: str) -> list[dict]:
    """The runs of one Table-1 cell, one per seed (the script's ``summary`` takes them all)."""
    out = [r for r in rows if r["scenario"] == scenario and r["method"] == method]
    seeds = [r["seed"] for r in out]
    if len(seeds) != len(set(seeds)):
        raise ValueError(f"fediv runs: {scenario} {method} has a seed twice: {sorted(seeds)}")
    return out


def fediv_table1() -> str:
    """FedIV Table 1 (low-dim): paper, ours selected / last (mean ± population sd), verdict."""
    fi = importlib.import_module("fediv_table1")
    rows, runs = [], fediv_runs()
    for sc in ("abs", "step", "linear"):
        for method, paper in fi.PAPER[sc].items():
            r = fediv_select(runs, sc, method)
            if not r:
                continue
            sel = np.array([x["mse_selected"] for x in r])
            last = np.array([x["mse_last"] for x in r])
            target = fi.TARGET.get((sc, method))
            verdict = "" if target is None else (
                f"{'ok' if sel.mean() <= target else 'WORSE'} (target {target:g})")
            rows.append([sc, method, f"{paper:g}", f"{sel.mean():.4f} ± {sel.std():.4f}",
                         f"{last.mean():.4f} ± {last.std():.4f}", len(r), verdict])
    return markdown(["scenario", "method", "paper", "ours selected", "ours last", "seeds",
                     "verdict (issue target)"], rows)


def fediv_divergence() -> str:
    """Issue 13.2: FedDeepGMM-GDA old default (raw gradients) vs new (clipped), per seed range
    and scenario: diverged runs, runs with a client dropped, selected MSE (mean ± sample sd)."""
    r = read_results("fediv_divergence")
    rows = []
    for key, v in r["summary"].items():
        ph, sc, variant = key.split("/")
        seeds = f"{'dev' if ph == 'dev' else 'evaluation'} {v['seeds'][0]}-{v['seeds'][1]}"
        label = {"new": f"new default: f's gradient clipped at {v['grad_clip']:g}",
                 "old": "old default: raw gradients (Alg. 1)",
                 "clip-both": f"alternative: both players clipped at {v['grad_clip']:g}"
                 }.get(variant, variant)
        mse = fmt(*v["mse_selected"], 4)
        rows.append([seeds, sc, label, f"{v['diverged']} / {v['runs']}"
                     + (f" (round{'s' * (len(v['diverged_rounds']) > 1)} "
                        f"{', '.join(map(str, v['diverged_rounds']))})"
                        if v["diverged_rounds"] else ""),
                     f"{v['with_drops']} / {v['runs']}",
                     f"**{mse}**" if variant == "new" else mse, fmt(*v["mse_last"], 4),
                     f"{v['paper']:g}"])
    return markdown(["seeds", "scenario", "variant", "diverged (stopped)",
                     "a client's local game non-finite", "selected MSE", "last MSE",
                     "paper (Table 1, Fed-GDA)"], rows)


def _fediv_rounds_groups(phase: str) -> dict[tuple[str, str], dict[str, dict]]:
    """``fediv_rounds`` summary of one seed phase as {(clients, setting[/variant]): {scenario:
    entry}}."""
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for key, v in read_results("fediv_rounds")["summary"].items():
        ph, sc, k, *setting = key.split("/")
        if ph == phase:
            out.setdefault((k, "/".join(setting)), {})[sc] = v
    return out


def _rounds_key(item: tuple[tuple[str, str], dict]) -> tuple:
    (k, setting), _ = item
    f = dict(part.split("=") for part in setting.split(" ")[:2])
    return int(k), int(f["T"]), int(f["R"]), setting


def fediv_rounds_dev() -> str:
    """Issue 12.2 on development seeds: FedGDA settings with T <= 60 rounds against the App's
    former T = 200, R = 10 (paired seeds), selected-round test MSE per scenario."""
    groups = _fediv_rounds_groups("dev")
    scenarios = sorted({sc for g in groups.values() for sc in g})
    rows = []
    for (k, setting), by_sc in sorted(groups.items(), key=_rounds_key):
        v0 = next(iter(by_sc.values()))
        if v0["exchanges"] - 1 not in (50, 60, 200):
            continue  # the 30- and 40-round prefixes stay in the JSON
        rows.append([k, setting, v0["exchanges"], v0["local_steps"],
                     f"{sum(v['diverged'] for v in by_sc.values())} / "
                     f"{sum(v['runs'] for v in by_sc.values())}",
                     *(fmt(*by_sc[sc]["mse_selected"], 4) + f" ({by_sc[sc]['runs']})"
                       if sc in by_sc else "-" for sc in scenarios)])
    return markdown(["clients", "setting (T rounds, R local steps, lr g / f)", "exchanges",
                     "local steps per client", "diverged",
                     *(f"{sc}: selected MSE (seeds)" for sc in scenarios)], rows)


def fediv_rounds() -> str:
    """Issue 12.2 on the evaluation seeds: the new default against T = 200, R = 10, per
    clients and scenario: diverged, selected-round test MSE (mean ± sample sd), the paired
    difference."""
    groups = _fediv_rounds_groups("eval")
    rows = []
    cells = sorted({(int(k), sc) for (k, _), g in groups.items() for sc in g})
    for clients, sc in cells:
        by_var = {setting.rsplit("/", 1)[1]: (setting.rsplit("/", 1)[0], g[sc])
                  for (k, setting), g in groups.items() if sc in g and int(k) == clients}
        for variant in ("default", "paper"):
            if variant not in by_var:
                continue
            setting, v = by_var[variant]
            diff = "-"
            if variant == "default" and "paper" in by_var:
                other = by_var["paper"][1]["mse_by_seed"]
                d = [v["mse_by_seed"][s] - other[s] for s in v["mse_by_seed"] if s in other]
                diff = fmt(float(np.mean(d)), float(np.std(d, ddof=1)), 4) \
                    + f" ({sum(x <= 0 for x in d)} of {len(d)} seeds no worse)"
            label = {"default": "new default", "paper": "former default (Table 1)"}[variant]
            rows.append([clients, sc, f"{label}: {setting}",
                         f"{min(v['seeds'])}-{max(v['seeds'])}", v["exchanges"],
                         v["local_steps"], f"{v['diverged']} / {v['runs']}",
                         f"**{fmt(*v['mse_selected'], 4)}**" if variant == "default"
                         else fmt(*v["mse_selected"], 4),
                         f"{v['selected_round'][0]:.0f}", diff])
    return markdown(["clients", "scenario", "variant", "evaluation seeds", "exchanges",
                     "local steps per client", "diverged", "selected MSE", "mean selected round",
                     "new - former, paired"], rows)


def _paired_cell(v: dict | None) -> str:
    """A paired difference as ``mean ± s.e. (k of n no worse)``; ``-`` when absent."""
    if not v or not v["n"]:
        return "-"
    return (f"{v['mean']:+.4f} ± {v['se'] or 0:.4f} "
            f"({v['no_worse']} of {v['n']} seeds no worse)")


def fediv_clip() -> str:
    """Issue 13.2 under the 50 x 40 schedule: FedGDA with f's gradient clipped at each value
    (0: raw, Algorithm 1), per seed range and scenario: diverged, runs with a client dropped,
    selected MSE (mean ± sample sd), the paired differences to raw and to clip 2 (± s.e.)."""
    r = read_results("fediv_clip")
    chosen = float(r["rule"]["chosen"]) if r["rule"]["chosen"] is not None else None
    rows = []
    order = sorted(r["summary"].items(), key=lambda kv: (kv[0].split("/")[0] != "dev",
                                                          kv[1]["seeds"][0] >= 110,
                                                          kv[0].split("/")[1],
                                                          kv[1]["grad_clip"]))
    for key, v in order:
        ph, sc, _ = key.split("/")
        seeds = v["seeds"]
        rng = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) \
            else ", ".join(map(str, seeds))
        c = v["grad_clip"]
        label = ("raw gradients (Alg. 1)" if c == 0 else f"f clipped at {c:g}") + (
            " (default before the study)" if c == 2 and chosen != 2 else "") + (
            " (chosen)" if c == chosen else "")
        rows.append([f"{'dev' if ph == 'dev' else 'evaluation'} {rng}", sc, label,
                     f"{v['diverged']} / {v['runs']}"
                     + (f" (round{'s' * (len(v['diverged_rounds']) > 1)} "
                        f"{', '.join(map(str, v['diverged_rounds']))})"
                        if v["diverged_rounds"] else ""),
                     f"{v['with_drops']} / {v['runs']}", fmt(*v["mse_selected"], 4),
                     f"{v['selected_round'][0]:.0f}", _paired_cell(v.get("vs_0")),
                     _paired_cell(v.get("vs_0_not_stopped")), _paired_cell(v.get("vs_2"))])
    return markdown(["seeds", "scenario", "f's local gradient", "diverged (stopped)",
                     "a client dropped", "selected MSE", "mean selected round",
                     "minus raw, paired", "minus raw, paired, seeds where raw did not stop",
                     "minus clip 2, paired"], rows)


def fediv_clip_rule() -> str:
    """Issue 13.2: the clip rule on the development runs, per clip: eligible (no run diverged
    or with a client dropped in any scenario), pooled mean selected MSE, paired difference to
    clip 2 (± s.e.), and which clip the rule keeps."""
    rule = read_results("fediv_clip")["rule"]
    rows = [[f"{float(c):g}", "yes" if v["eligible"] else "no", v["runs"],
             f"{v['mse_pooled']:.4f}",
             "-" if c == "2" else f"{v['vs_2']['mean']:+.4f} ± {v['vs_2']['se']:.4f}",
             "**chosen**" if c == rule["chosen"] else ""]
            for c, v in sorted(rule["per_clip"].items(), key=lambda kv: float(kv[0]))]
    return markdown(["clip", "eligible (no divergence, no drop)",
                     f"dev runs ({', '.join(rule['scenarios'])})", "pooled selected MSE",
                     "minus clip 2, paired", "rule"], rows)


# ----------------------------------------------------------------------------- VFedCD
VFEDCD_RUNS = RESULTS_DIR / "vfedcd_runs.jsonl"


def vfedcd_select(d: int | str, mode: str, preset: str = "slow") -> list[dict]:
    """One ``vfedcd_table1.py`` run per seed, data seed = training seed, no ``--set``.

    A seed run twice (the spec-protocol runs repeat a data set) must give the same SHD and F1
    (the loop is deterministic); the first is kept.
    """
    out: dict[int, dict] = {}
    for r in read_jsonl(VFEDCD_RUNS):
        if (r["d"], r["mode"], r["preset"]) != (d, mode, preset) or r["set"] \
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


def vfedcd_table1() -> str:
    """VFedCD Table 1 (acceptance 2): SHD and F1 per size and preset, paper beside ours."""
    vf = importlib.import_module("vfedcd_table1")
    rows = []
    for preset, sizes in (("slow", (10, 15, 25)), ("tuned", (10, 15, 25)), ("paper", (15,))):
        for d in sizes:
            r = vfedcd_select(d, "vfedcd", preset)
            shd, f1 = vfedcd_mean(r)
            p_shd, p_f1 = vf.PAPER[d]
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
                         f"{p_f1:.3f} +- {vf.PAPER_F1_SD[d]:.3f}", verdict])
    return markdown(["attributes", "preset", "ours SHD", "ours F1", "paper SHD", "paper F1", ""],
                    rows)


def vfedcd_table3_slow() -> str:
    """VFedCD Table 3 ablation, ``slow`` preset: the three modes, paper SHD / F1 / Corr."""
    vf = importlib.import_module("vfedcd_table1")
    corr = importlib.import_module("vfedcd_attack").PAPER_CORR
    rows = []
    for mode, label in T3_LABELS.items():
        r = vfedcd_select(15, mode)
        nnz = [x["nnz"] for x in r]
        rows.append([label, vfedcd_shd(r), vfedcd_f1(r), f"{min(nnz)}-{max(nnz)}",
                     f"{vf.PAPER_T3[mode][0]:g} / {vf.PAPER_T3[mode][1]:.3f} / {corr[mode]:.3f}"])
    return markdown(["mode", "ours SHD", "ours F1", "edges found", "paper SHD / F1 / Corr"], rows)


VFEDCD_FAST_EVAL = RESULTS_DIR / "vfedcd_fast_eval.jsonl"
VFEDCD_FAST_PRESETS = (("fast", "App default: Adam lr 0.1, batch 200, 30 epochs"),
                       ("slow", "previous default (`VFedCDSettings.slow()`): SGD lr 0.01, "
                                "batch 16, 700 epochs"),
                       ("paper", "paper (`VFedCDSettings.paper()`): SGD lr 0.01, batch 16, "
                                 "500 epochs, MSE"))


def vfedcd_fast_schedule() -> str:
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
        s = importlib.import_module("vfedcd_table1").settings(preset, [])
        steps = s.epochs * -(-800 // s.batch)
        seeds = sorted(x["seed"] for x in r)
        shd, f1 = mean_sd(x["shd"] for x in r), mean_sd(x["f1"] for x in r)
        rows.append([f"eval {seeds[0]}-{seeds[-1]}", label, s.epochs, s.tau, steps, 5 * steps,
                     f"{shd[0]:.1f} +- {shd[1]:.1f}", f"{f1[0]:.3f} +- {f1[1]:.3f}"])
    return markdown(["seeds", "setting (dev: changes to `VFedCDSettings.slow()`)", "epochs", "tau",
                     "steps", "exchanges", "SHD", "F1"],
                    rows)


def vfedcd_fast_crypto() -> str:
    """Issue 12.3: CPU seconds of cryptography per epoch (per phase and party) and the
    projected loopback deployment of the default run."""
    r = read_results("vfedcd_fast_crypto")
    per = r["cpu_s_per_epoch"]
    rows = [[ph, *(f"{v[k]:.1f}" for k in sorted(v)), f"{sum(v.values()):.1f}"]
            for ph, v in per.items()]
    pr = r["projection"]
    head = (f"{r['run_config']['he-backend']}, {r['run_config']['key-bits']}-bit keys, batch "
            f"{r['run_config']['batch']} ({r['steps_per_epoch']} steps per epoch): "
            f"{r['cpu_s_per_epoch_one_core']:.0f} CPU s per epoch on one core (parties in turn), "
            f"{r['cpu_s_per_epoch_concurrent']:.0f} s with the 3 parties on {pr['cores']} cores. "
            f"Projected loopback deployment of {pr['epochs']} epochs: {pr['exchanges']} "
            f"exchanges x {pr['exchange_s']:g} s + {pr['epochs']} x "
            f"{r['cpu_s_per_epoch_concurrent']:.0f} s + {r['keys_and_setup_s']:.0f} s = "
            f"{pr['seconds']:.0f} s ({pr['seconds'] / 3600:.2f} h).\n\n")
    return head + markdown(["phase", "party 0 CPU s", "party 1 CPU s", "party 2 CPU s", "sum"],
                           rows)


def vfedcd_sachs_dev() -> str:
    """Issue 13.4 development study (Sachs-shaped synthetic data): each config's best (epochs,
    tau) on seeds 100-104, the App defaults as they are, and the confirmed configs on 100-109."""
    r = read_results("vfedcd_sachs_settings")

    def row(stage: str, c: dict) -> list[str]:
        changes = r["grid"]["configs"][c["config"]]
        return [stage, f"{c['config']} ({_changes(changes)})", c["epochs"], f"{c['tau']:g}",
                fmt(*c["f1"], 3), fmt(*c["shd"], 1), fmt(*c["nnz"], 1)]

    rows = [row(f"{seed_range(c['seeds'])}", c) for c in r["dev_stage1_best_per_config"]]
    rows += [row(f"{seed_range(c['seeds'])}, App default as is", c)
             for c in r["dev_default_as_is"]]
    best = {}
    for c in r["dev_stage2"]:
        best.setdefault(c["config"], c)
    rows += [row(f"**{seed_range(c['seeds'])}**" if c == r["chosen"] else
                 seed_range(c["seeds"]), c) for c in best.values()]
    return markdown(["dev seeds", "config (changes to the App defaults)", "epochs", "tau",
                     "F1", "SHD", "edges"], rows)


def _changes(changes: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in changes.items()) or "none"


def vfedcd_sachs() -> str:
    """Issue 13.4: the chosen setting on evaluation seeds 3000-3009 and once on Sachs, beside
    the old App defaults, the empty graph and the paper."""
    r = read_results("vfedcd_sachs_settings")
    c, ev, sa = r["chosen"], r["eval"], r["sachs"]
    changes = r["grid"]["configs"][c["config"]]
    name = f"{_changes(changes)}, {c['epochs']} epochs, tau {c['tau']:g}"
    rows = [[f"synthetic, Sachs-shaped (eval seeds {seed_range(ev['seeds'])})",
             f"chosen: {name}", fmt(*ev["shd"], 1), fmt(*ev["f1"], 3), fmt(*ev["nnz"], 1),
             "-"]]
    if "eval_default" in r:
        o = r["eval_default"]
        rows.append([f"synthetic, Sachs-shaped (eval seeds {seed_range(o['seeds'])})",
                     "App defaults (700 epochs, tau 0.6)", fmt(*o["shd"], 1),
                     fmt(*o["f1"], 3), fmt(*o["nnz"], 1), "-"])
    rows.append([f"Sachs, once (training seed {sa['seed']})", f"**chosen**: {name}",
                 f"**{sa['chosen']['shd']}**", f"{sa['chosen']['f1']:.3f}",
                 sa["chosen"]["nnz"], f"{sa['paper_shd']:g}"])
    if "old_default" in sa:
        o = sa["old_default"]
        rows.append([f"Sachs (training seed {sa['seed']})", "App defaults (tau 0.6)",
                     o["shd"], f"{o['f1']:.3f}", o["nnz"], f"{sa['paper_shd']:g}"])
    rows.append(["Sachs", "empty graph", sa["empty_shd"], "0.000", 0, ""])
    return markdown(["data (seeds)", "setting", "SHD", "F1", "edges", "paper SHD"], rows)


def _cell(c: dict, configs: dict) -> str:
    return (f"{c['config']} ({_changes(configs[c['config']])}), {c['epochs']} epochs, "
            f"tau {c['tau']:g}")


def vfedcd_sachs_fast_dev() -> str:
    """Issue 13.4 after issue 12: the few-step defaults on Sachs-shaped data of two families,
    each config's best (epochs, tau) on the 40 development data sets, and the App defaults
    before the study."""
    r = read_results("vfedcd_sachs_fast")
    rows = [[("**chosen** " if c == r["chosen"] else "") + _cell(c, r["configs"]),
             fmt(*c["f1"], 3), fmt(*c["shd"], 1), fmt(*c["nnz"], 1),
             f"{c['gaussian']['f1'][0]:.3f} / {c['skewed']['f1'][0]:.3f}"]
            for c in r["dev_best_per_config"][:12]]
    p = r["dev_previous"]
    rows.append(["App defaults before (" + _cell(p, r["configs"]) + ")", fmt(*p["f1"], 3),
                 fmt(*p["shd"], 1), fmt(*p["nnz"], 1),
                 f"{p['gaussian']['f1'][0]:.3f} / {p['skewed']['f1'][0]:.3f}"])
    return markdown(["config (changes to the App's few-step defaults)", "F1", "SHD", "edges",
                     "F1 gaussian / skewed"], rows)


def vfedcd_sachs_fast() -> str:
    """Issue 13.4 after issue 12: evaluation seeds, the d = 15 check of the App defaults, and
    Sachs once, beside the empty graph, pooled DAGMA and the paper."""
    r = read_results("vfedcd_sachs_fast")
    ev, t1, sa = r["eval"], r["table1"], r["sachs"]
    label = {"chosen": "chosen", "previous": "App defaults before (z-score)",
             "app": "App defaults now (yeo-johnson)"}
    seeds = "{}-{}".format(*r["eval_seeds"])
    rows = [[f"Sachs-shaped, eval seeds {seeds} (both families)",
             f"{label[w]}: {_cell(ev[w], r['configs'])}", fmt(*ev[w]["shd"], 1),
             fmt(*ev[w]["f1"], 3), fmt(*ev[w]["nnz"], 1), "-"] for w in label]
    rows += [["d = 15, E = 60, dev seeds 100-109 (few-step study's data)", name,
              fmt(*t1[k]["shd"], 1), fmt(*t1[k]["f1"], 3), fmt(*t1[k]["nnz"], 1), "-"]
             for k, name in (("previous", "App defaults before"),
                             ("chosen", f"chosen ({_changes(t1['changes'])})"),
                             *((k, k) for k in t1 if k.startswith("only ")))]
    rows += [[f"Sachs, once (training seed {sa['seed']})", f"{label[w]}",
              f"**{sa[w]['shd']}**" if w == "chosen" else sa[w]["shd"], f"{sa[w]['f1']:.3f}",
              sa[w]["nnz"], f"{sa['paper_shd']:g}"] for w in label]
    for b in read_results("vfedcd_baselines")["rows"]:
        if b["d"] == "sachs":
            rows.append(["Sachs, pooled (not federated)", f"{b['method']}, {b['transform']}",
                         b["shd"], f"{b['f1']:.3f}", b["nnz"], ""])
    rows.append(["Sachs", "empty graph", sa["empty_shd"], "0.000", 0, ""])
    return markdown(["data (seeds)", "setting", "SHD", "F1", "edges", "paper SHD"], rows)


# ----------------------------------------------------------------------------- headline
def headline() -> str:
    """RESULTS.md's headline rows of the families beyond FDBNL, from their result files."""
    fi = importlib.import_module("fediv_table1")
    vf = importlib.import_module("vfedcd_table1")
    rows = []
    for name in FEDGC_RUNS:
        gc = read_results(name)
        rows.append(["FedGC", f"‖Â_21 − A_21‖_F / ‖Â_12‖_F, {gc_setting(gc)} "
                     f"({seed_range(gc['per_seed'])})",
                     f"{gc['paper']['err_A21']:.3f} / {gc['paper']['norm_A12']:.3f}",
                     f"{pm(gc, 'err_A21')} / {pm(gc, 'norm_A12')}"])
    for name in ("fedcf_default", "fedcf_default_shifts"):
        cf = read_results(name)
        lit, rec = cf["variants"]["literal"], cf["variants"][cf["recovering"]]
        scale = cf["setting"]["shift_scale"]
        where = (f"unknown shifts (scale {scale:g})" if scale else "no shifts (FedCF's default "
                 "data)")
        rows.append(["FedCF", f"counterfactual error CF_y, literal / "
                     f"{cf['recovering'].replace(' ', '-')} variant, {where} "
                     f"({seed_range(lit['per_seed'])})", "-",
                     f"{pm(lit, 'cf_y')} / {pm(rec, 'cf_y')}"])
        rows.append(["FedCF", f"‖Â_21 − A_21‖_F, literal / "
                     f"{cf['recovering'].replace(' ', '-')} variant, {where} "
                     f"({seed_range(lit['per_seed'])})", "-",
                     f"{pm(lit, 'err_A21')} / {pm(rec, 'err_A21')}"])
    runs = fediv_runs()
    for method in ("FedDeepGMM-GDA", "FedDeepGMM-SGDA"):
        cells = [fediv_select(runs, sc, method) for sc in ("abs", "step", "linear")]
        seeds = {r["seed"] for c in cells for r in c}
        rows.append(["FedIV", f"{method} test MSE abs / step / linear ({seed_range(seeds)})",
                     " / ".join(f"{fi.PAPER[sc][method]:g}" for sc in ("abs", "step", "linear")),
                     " / ".join(sig2(float(np.mean([r["mse_selected"] for r in c])))
                                for c in cells)])

    def pair(v: tuple) -> str:
        return f"{v[0]:g} / {v[1]:.3f}"

    fast = [r for r in read_jsonl(VFEDCD_FAST_EVAL) if r["preset"] == "fast"]
    rows.append(["VFedCD", "SHD / F1, 15 attributes, 3 parties, App default (Adam, 30 epochs, "
                 "600 exchanges; parties z-score, the default before `transform`) "
                 f"({seed_range([r['seed'] for r in fast])})",
                 pair(vf.PAPER[15]), f"{vfedcd_mean(fast)[0]:.1f} / {vfedcd_mean(fast)[1]:.3f}"])
    r15 = vfedcd_select(15, "vfedcd")
    rows.append(["VFedCD", f"SHD / F1, 15 attributes, 3 parties, `slow` preset (data seeds "
                 f"{seed_range([r['seed'] for r in r15])})", pair(vf.PAPER[15]),
                 f"{vfedcd_mean(r15)[0]:.1f} / {vfedcd_mean(r15)[1]:.3f}"])
    other = [vfedcd_select(d, "vfedcd") for d in (10, 25)]
    rows.append(["VFedCD", f"SHD / F1, 10 and 25 attributes, `slow` "
                 f"({seed_range([r['seed'] for r in other[0] + other[1]])})",
                 ", ".join(pair(vf.PAPER[d]) for d in (10, 25)),
                 ", ".join(f"{m[0]:.1f} / {m[1]:.3f}" for m in map(vfedcd_mean, other))])
    t3 = [vfedcd_select(15, m) for m in ("framework", "ctv", "vfedcd")]
    rows.append(["VFedCD", f"Table 3: SHD framework / + CTV / VFedCD "
                 f"({seed_range([r['seed'] for c in t3 for r in c])})",
                 " / ".join(f"{vf.PAPER_T3[m][0]:g}" for m in ("framework", "ctv", "vfedcd")),
                 " / ".join(f"{vfedcd_mean(c)[0]:.1f}" for c in t3)])
    sachs = vfedcd_select("sachs", "vfedcd")
    nnz = [r["nnz"] for r in sachs]
    rows.append(["VFedCD", f"Sachs SHD, `slow` preset (training seeds "
                 f"{seed_range([r['seed'] for r in sachs])})",
                 f"{vf.PAPER['sachs'][0]:g}",
                 f"{vfedcd_mean(sachs)[0]:.1f} ({min(nnz)}-{max(nnz)} edges)"])
    st = read_results("vfedcd_sachs_fast")
    ch, sa = st["chosen"], st["sachs"]
    for who, what in (("chosen", "setting chosen on Sachs-shaped synthetic data (dev seeds "
                       "{}-{}; ".format(*st["dev_seeds"]) + _changes(st["configs"][ch["config"]]) +
                       f", tau {ch['tau']:g})"), ("app", "App default (yeo-johnson transform)")):
        rows.append(["VFedCD", f"Sachs SHD, {what}, run once (training seed {sa['seed']})",
                     f"{vf.PAPER['sachs'][0]:g}",
                     f"{sa[who]['shd']} ({sa[who]['nnz']} edges, F1 {sa[who]['f1']:.3f}; "
                     f"empty graph {sa['empty_shd']})"])
    return markdown(["algorithm", "measure (seeds)", "paper", "ours"], rows)


# ----------------------------------------------------------------------------- reliability
def reliability() -> str:
    """Issue 11's fault x algorithm matrix (reliability.json): the count of handled cases,
    the silent wrong results, and each case's outcome."""
    r = read_results("reliability")
    summ, algos = r["summary"], r["algorithms"]
    cell = {(c["fault"], c["algorithm"]): c["outcome"] for c in r["cases"]}
    faults = [f for f in r["faults"] if any((f, a) in cell for a in algos)]
    rows = [[f"`{f}`: {r['faults'][f]}"] + [cell.get((f, a), "-") for a in algos]
            for f in faults]
    lines = [f"**{summ['handled']} of {summ['cases']} cases handled; "
             f"{summ['silent_wrong']} silent wrong results"
             + (f" ({', '.join(summ['silent_wrong_cases'])})" if summ["silent_wrong"] else "")
             + f".** Made by `{r['meta']['script']}` on {r['meta']['finished']} "
             f"({r['elapsed_s']:.0f} s).", ""]
    if r.get("honest"):
        lines += ["Honest runs of the same configs (no fault): largest max |x| of a reply's "
                  "array over max(1, the other replies' median), the screen dropping above "
                  f"{next(iter(r['honest'].values()))['screen_factor']:g}: "
                  + ", ".join(f"{a} {m['max_ratio']:.3g}" + (" (SCREENED)" if m["screened"]
                                                              else "")
                              for a, m in r["honest"].items()) + ".", ""]
    if summ["not_handled"]:
        lines += ["Not handled:", ""] + [f"- {k}: {v}" for k, v in summ["not_handled"].items()]
        lines.append("")
    return "\n".join(lines) + "\n" + markdown(["fault"] + algos, rows)


TABLES: dict[str, Callable[[], str]] = {f.__name__: f for f in (
    headline, fdbnl_table1, fdbnl_netsim_sim3, fdbnl_netsim, fdbnl_dream4, fdbnl_lambda_scale,
    fdbnl_varying_d, fdbnl_varying_k, fdbnl_solver_cost, fdbnl_rounds, fdbnl_defaults_dev,
    fdbnl_defaults, benchmark_flower_overhead,
    fedgc_default, fedgc_settings, fedcf_default, fedcf_default_shifts, statespace_windows,
    statespace_windows_dev,
    fediv_table1, fediv_divergence, fediv_rounds_dev, fediv_rounds, fediv_clip,
    fediv_clip_rule, vfedcd_table1,
    vfedcd_table3_slow, vfedcd_sachs_dev, vfedcd_sachs, vfedcd_sachs_fast_dev, vfedcd_sachs_fast,
    vfedcd_fast_schedule, vfedcd_fast_crypto,
    reliability)}


# ----------------------------------------------------------------------------- markdown files
def markdown_files() -> list[Path]:
    """Every file whose marked tables this script owns: RESULTS.md and ``results/*.md``."""
    return [RESULTS_MD, *sorted(RESULTS_DIR.glob("*.md"))]


def render(text: str, tables: dict[str, Callable[[], str]] = TABLES) -> str:
    """``text`` with every marked table replaced by what its result files give."""
    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in tables:
            raise KeyError(f"a file marks a table {name!r} that tables.py does not know")
        return m.group(1) + tables[name]().rstrip("\n") + "\n" + m.group(4)

    return MARKER.sub(one, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the marked tables, or with ``--check`` report whether any is stale."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--list", action="store_true", help="print the known table names")
    ap.add_argument("--file", type=Path, nargs="+", default=None,
                    help="only these markdown files (default RESULTS.md and results/*.md)")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(TABLES))
        return 0
    stale = 0
    for path in args.file or markdown_files():
        old = path.read_text()
        new = render(old)
        marked = [m["name"] for m in MARKER.finditer(old)]
        name = path.relative_to(SIM_DIR) if path.is_relative_to(SIM_DIR) else path
        if args.check:
            if new != old:
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), str(name), "from results"))
                print(f"{name}: tables differ from simulations/results/; "
                      "run python simulations/tables.py", file=sys.stderr)
                stale += 1
            else:
                print(f"{name}: {len(marked)} tables match the results")
            continue
        if new != old:
            path.write_text(new)
        print(f"{name}: {len(marked)} tables regenerated ({'changed' if new != old else 'same'})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
