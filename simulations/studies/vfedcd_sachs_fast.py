"""VFedCD's few-step defaults on Sachs-shaped data (issue 13, item 4, after issue 12).

Issue 12 replaced the App's VFedCD schedule (Adam, lr 0.1, batch 200, 30 epochs: 602 exchanges
instead of 176,400), chosen on d = 15 synthetic data. This study chooses the settings again on
development data shaped like Sachs, then evaluates once on new evaluation seeds and once on
Sachs (11 proteins, 853 observational rows, 18 edges in ``cyto_full_target.csv``).

Development data (two families, one data set per seed; data seed = training seed):

    gaussian  ``vfedcd_sachs_settings.dev_data``: the spec's nonlinear ANM (MLP mechanisms,
              Gaussian noise), d = 11, an ER DAG with 17 edges, n = 853, parties of 4, 4, 3
    skewed    the same data observed as exp(s_j z_j) per column (z_j: the column z-scored,
              s_j ~ U(0.5, 2.0) drawn from the seed): log-normal intensities, as flow cytometry
              measures them (Sachs' raw columns have skewness 2-27; only their marginals,
              never their graph, shaped this family)

Grid (fixed before the study): the App defaults (``VFedCDSettings()``), then one setting
changed at a time (lambda1 0 / 3e-3 / 1e-2, gamma 0.003 / 0.03, lr 0.03 / 0.3, l2 1e-3,
hidden 20, loss mse, batch 100), each under both party transforms (``transform`` "zscore",
the App's, and "yeo-johnson"); graphs at epochs 10, 20 and 30 (more epochs would cost more
exchanges than the default's 602) and every threshold of ``TAUS``. Runs use the in-process
reference loop (``core.vfedcd.train_reference``, equal to the mock and Paillier protocols),
mode "vfedcd", mock backend; 80/20 split, the transform fitted on the training rows.

Criterion, fixed before the study: the (config, epochs, tau) with the highest mean F1 over the
40 development data sets (seeds 100-119 of both families), ties broken by the lower mean SHD.
Evaluation: the chosen cell, the App defaults before this study (z-score) and after it on seeds
7000-7019 of both families (never used before), then each once on Sachs (training seed 0).
SHD counts a reversal once; F1 on directed edges; ``edges``: the number predicted.

App defaults, rule fixed before the ``table1`` stage ran: the chosen cell's changes become the
App's defaults if, on the data the few-step defaults were chosen on (``vfedcd_table1.data``:
d = 15, E = 60, n = 1000, development seeds 100-109), its mean F1 is at most 0.01 below the
App defaults'; otherwise only the changes whose single-change cell passes that test do.

    python simulations/studies/vfedcd_sachs_fast.py --stage dev
    python simulations/studies/vfedcd_sachs_fast.py --stage eval
    python simulations/studies/vfedcd_sachs_fast.py --stage table1
    python simulations/studies/vfedcd_sachs_fast.py --stage sachs
"""

from __future__ import annotations

import time
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import DEFAULT_DATA, fmt, markdown, mean_sd, parser, read_results, write_results
from vfedcd_sachs_settings import (
    EDGES,
    PAPER_SACHS_SHD,
    TAUS,
    K,
    best_per_config,
    cell_summary,
    config_changes,
    dev_data,
    score,
    snapshot_graphs,
)

from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import (
    VerticalData,
    fitted_scaler,
    sachs,
    split_standardised,
)

FAMILIES = ("gaussian", "skewed")
DEV_SEEDS, EVAL_SEEDS = range(100, 120), range(7000, 7020)
SNAPSHOTS = (10, 20, 30)
SKEW = (0.5, 2.0)  # range of the log-scale s_j of the skewed family
CHANGES: dict[str, dict[str, Any]] = {
    "default": {}, "lambda1_0": {"lambda1": 0.0}, "lambda1_3e-3": {"lambda1": 3e-3},
    "lambda1_1e-2": {"lambda1": 1e-2}, "gamma_0.003": {"gamma": 0.003},
    "gamma_0.03": {"gamma": 0.03}, "lr_0.03": {"lr": 0.03}, "lr_0.3": {"lr": 0.3},
    "l2_1e-3": {"l2": 1e-3}, "hidden_20": {"hidden": 20}, "loss_mse": {"loss": "mse"},
    "batch_100": {"batch": 100}}
CONFIGS = {f"{name}/{tf}": {**ch, "transform": tf}
           for tf in ("zscore", "yeo-johnson") for name, ch in CHANGES.items()}
PREVIOUS = "default/zscore"  # the App's defaults before this study
APP = f"default/{VerticalData().transform}"  # the App's defaults now


def family_data(family: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Data set ``seed`` of ``family`` (853 x 11) and its graph."""
    X, A = dev_data(seed)
    if family == "skewed":
        s = np.random.default_rng([seed, 1]).uniform(*SKEW, X.shape[1])
        X = np.exp(s * fitted_scaler(X)(X))
    return X, A


def graphs(X: np.ndarray, config: dict[str, Any], seed: int) -> dict[int, np.ndarray]:
    """Weighted graphs B (columns in data order) after each epoch count of ``SNAPSHOTS``."""
    c = dict(config)
    tr, _ = split_standardised(X, 0.2, c.pop("transform"))
    s = V.VFedCDSettings(**{**c, "mode": "vfedcd", "he_backend": "mock", "seed": seed,
                            "epochs": max(SNAPSHOTS)})
    return snapshot_graphs(tr, s, SNAPSHOTS)


def cells(names: list[str], seeds: range) -> dict[tuple[str, int, float], dict]:
    """Per (config, epochs, tau): the metrics of every (family, seed) data set."""
    out: dict[tuple[str, int, float], dict] = {}
    for name in names:
        t0 = time.time()
        for fam in FAMILIES:
            for seed in seeds:
                X, A = family_data(fam, seed)
                for ep, B in graphs(X, CONFIGS[name], seed).items():
                    for tau in TAUS:
                        out.setdefault((name, ep, tau), {})[f"{fam}/{seed}"] = score(B, A, tau)
        print(f"  {name}: {time.time() - t0:.0f} s", flush=True)
    return out


def ranked(table: dict[tuple[str, int, float], dict]) -> list[dict]:
    """Every cell with its summary, best first (criterion in the module docstring)."""
    rows = [{"config": n, "epochs": ep, "tau": tau, **summary_of(per)}
            for (n, ep, tau), per in table.items()]
    return sorted(rows, key=lambda c: (-c["f1"][0], c["shd"][0]))


def summary_of(per: dict[str, dict]) -> dict[str, Any]:
    """Mean and sample sd over all data sets and per family."""
    out = {k: v for k, v in cell_summary(per).items() if k != "seeds"}
    out["n"] = len(per)
    for fam in FAMILIES:
        sub = {k: v for k, v in per.items() if k.startswith(fam + "/")}
        out[fam] = {k: v for k, v in cell_summary(sub).items() if k != "seeds"}
    return out


def line(c: dict) -> str:
    fams = "  ".join(f"{f} F1 {c[f]['f1'][0]:.3f} SHD {c[f]['shd'][0]:.1f}" for f in FAMILIES)
    return (f"{c['config']:>26s} ep {c['epochs']:2d} tau {c['tau']:<4g} F1 {c['f1'][0]:.3f} ± "
            f"{c['f1'][1]:.3f} SHD {c['shd'][0]:.1f} ± {c['shd'][1]:.1f} edges "
            f"{c['nnz'][0]:.1f}  ({fams})")


def table1_check(chosen: dict, app: tuple[str, int, float]) -> dict[str, Any]:
    """The chosen cell, each of its changes alone and the App defaults on d = 15 data
    (development seeds 100-109 of the few-step study), mean and sample sd of F1 and SHD."""
    from vfedcd_table1 import data

    base = CONFIGS[app[0]]
    changes = {k: v for k, v in CONFIGS[chosen["config"]].items() if base.get(k, None) != v}
    if chosen["tau"] != app[2]:
        changes["tau"] = chosen["tau"]
    variants = {"previous": {}, "chosen": changes,
                **{f"only {k}": {k: v} for k, v in changes.items()}}
    per: dict[str, list[dict]] = {name: [] for name in variants}
    for seed in range(100, 110):
        X, A = data(15, seed)
        for name, ch in variants.items():
            c = {**base, **{k: v for k, v in ch.items() if k != "tau"}}
            tr, _ = split_standardised(X, 0.2, c.pop("transform"))
            s = V.VFedCDSettings(**{**c, "mode": "vfedcd", "he_backend": "mock", "seed": seed})
            B = snapshot_graphs(tr, s, ())[s.epochs]
            per[name].append(score(B, A, ch.get("tau", app[2])))
    out = {"data": "vfedcd_table1.data(15, seed), seeds 100-109", "changes": changes}
    for name, ms in per.items():
        out[name] = {k: list(mean_sd(m[k] for m in ms)) for k in ("f1", "shd", "nnz")}
        print(f"d = 15, seeds 100-109, {name:>18s}: F1 {out[name]['f1'][0]:.3f} ± "
              f"{out[name]['f1'][1]:.3f}  SHD {out[name]['shd'][0]:.1f} ± "
              f"{out[name]['shd'][1]:.1f}  edges {out[name]['nnz'][0]:.1f}")
    return out


def main() -> None:
    ap = parser(__doc__, seeds=None)
    ap.add_argument("--stage", choices=("dev", "eval", "table1", "sachs"), required=True)
    a = ap.parse_args()
    if a.stage == "dev":
        rank = ranked(cells(list(CONFIGS), DEV_SEEDS))
        best_per = best_per_config(rank)
        app = next(c for c in rank if c["config"] == PREVIOUS and c["epochs"] == 30
                   and c["tau"] == V.VFedCDSettings().tau)
        print("development, best (epochs, tau) per config:")
        for c in best_per:
            print(line(c))
        print("App defaults before this study:\n" + line(app) + "\nCHOSEN:\n" + line(rank[0]))
        write_results("vfedcd_sachs_fast", {
            "families": FAMILIES, "skew": SKEW, "edges": EDGES, "parties": K,
            "dev_seeds": [DEV_SEEDS[0], DEV_SEEDS[-1]], "snapshots": SNAPSHOTS, "taus": TAUS,
            "configs": CONFIGS, "criterion": "highest mean F1 over the 40 development data "
            "sets, ties: lower mean SHD", "dev_best_per_config": best_per, "dev_top": rank[:15],
            "dev_previous": app, "chosen": rank[0]}, a.out)
        return
    res = read_results("vfedcd_sachs_fast")
    res.pop("meta", None)
    ch = res["chosen"]
    pairs = {"chosen": (ch["config"], ch["epochs"], ch["tau"]),
             "previous": (PREVIOUS, 30, V.VFedCDSettings().tau),
             "app": (APP, V.VFedCDSettings().epochs, V.VFedCDSettings().tau)}
    if a.stage == "eval":
        table = cells(list(dict.fromkeys(p[0] for p in pairs.values())), EVAL_SEEDS)
        res["eval_seeds"] = [EVAL_SEEDS[0], EVAL_SEEDS[-1]]
        res["eval"] = {}
        for who, key in pairs.items():
            res["eval"][who] = {"config": key[0], "epochs": key[1], "tau": key[2],
                                **summary_of(table[key])}
            print(f"evaluation {who}: " + line(res["eval"][who]))
        for who in ("chosen", "app"):
            d = [table[pairs[who]][k]["shd"] - table[pairs["previous"]][k]["shd"]
                 for k in table[pairs["previous"]]]
            res["eval"][f"paired_shd_{who}_minus_previous"] = [
                float(np.mean(d)), float(np.std(d, ddof=1) / np.sqrt(len(d)))]
    elif a.stage == "table1":
        res["table1"] = table1_check(ch, pairs["previous"])
    else:
        X, A, _ = sachs(DEFAULT_DATA / "sachs")
        res["sachs"] = {"true_edges": int(A.sum()), "empty_shd": int(A.sum()),
                        "paper_shd": PAPER_SACHS_SHD, "seed": 0}
        for who, (name, ep, tau) in pairs.items():
            m = score(graphs(X, CONFIGS[name], 0)[ep], A, tau)
            res["sachs"][who] = {"config": name, "epochs": ep, "tau": tau, **m}
            print(f"Sachs {who} ({name}, {ep} epochs, tau {tau}): SHD {m['shd']}, F1 "
                  f"{m['f1']:.3f}, edges {m['nnz']} | empty graph SHD {A.sum():.0f}, "
                  f"paper {PAPER_SACHS_SHD}")
    write_results("vfedcd_sachs_fast", res, a.out)


# ----------------------------------------------------------------------------- tables
def _cell(c: dict, configs: dict) -> str:
    return (f"{c['config']} ({config_changes(configs[c['config']])}), {c['epochs']} epochs, "
            f"tau {c['tau']:g}")


def table_vfedcd_sachs_fast_dev() -> str:
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


def table_vfedcd_sachs_fast() -> str:
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
                             ("chosen", f"chosen ({config_changes(t1['changes'])})"),
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


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"vfedcd_sachs_fast_dev": table_vfedcd_sachs_fast_dev,
          "vfedcd_sachs_fast": table_vfedcd_sachs_fast}


if __name__ == "__main__":
    main()
