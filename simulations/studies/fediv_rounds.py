"""FedIV's default App run in far fewer rounds (issue 12, item 2): rounds T vs local work.

In a deployment every exchange (server -> all clients -> server) costs seconds whatever its
size, and a FedIV App run takes T + 1 exchanges (T FedGDA rounds, then one validation of the
last global model). The default was Table 1's T = 200 rounds of R = 10 local full-batch GDA
steps (lr_g 0.02, lr_f 0.2). This study compares settings with T <= 60 against it by the test
MSE of the round the federated validation criterion selects (as the App does) and by the
number of runs that diverge. The levers: more local work per exchange (R) and larger steps
(lr_g, lr_f); what more local steps between averages cost is client drift.

Every run is the reference loop (``core.deepgmm.fedgda_reference``, equal to the Flower path)
on the built-in data (DGP "paper", n = 20000, Dirichlet(0.3) quantity skew over ``--clients``)
with the App's settings otherwise (f's local gradient clipped to norm 2 in this study's runs, the
default then; divergence detection).
A sweep run of ``--rounds T`` logs, per round, the federated criterion and the (diagnostic)
test MSE, so the selected-round MSE of every shorter run T' <= T (``--prefixes``) is read off
the same run: rounds never depend on later ones, and the selection over rounds 0..T' is what a
run of T' rounds makes.

Development seeds 100-109 (the range of ``fediv_divergence.py``'s development runs, whose
T = 200, R = 10 rows are the baseline there); evaluation seeds 4000-4009, never used before,
run once after the choice with ``--variants``:

    nice -n 10 python simulations/studies/fediv_rounds.py --scenarios abs step --seeds 100..103 \\
        --grid 0.02,0.2,10,60 0.02,0.2,33,60 0.04,0.4,20,60 \\
        --jsonl simulations/results/fediv_runs/rounds_dev.jsonl
    nice -n 10 python simulations/studies/fediv_rounds.py --scenarios abs step --seeds 4000..4009 \\
        --variants default paper --jsonl simulations/results/fediv_runs/rounds_eval.jsonl
    cd simulations/results/fediv_runs && python ../../studies/fediv_rounds.py --summarize \\
        rounds_dev.jsonl divergence_dev.jsonl rounds_eval.jsonl

(``divergence_dev.jsonl``: the T = 200, R = 10 runs of the current default on the same
development seeds, from ``fediv_divergence.py``, the baseline of the sweep: only its seeds
that this script ran too are kept, so every comparison is paired.)

Gradient clip under this schedule (issue 13, item 2): ``--clips`` runs every job once per
value of ``grad_clip`` (0: Algorithm 1's raw gradients), the App's settings otherwise;
``--reuse`` copies a run of the same settings, scenario, seed and clients from an earlier
file instead of running it again, and a run already in ``--jsonl`` is skipped (resume).
``--clip-summary`` reads such files: per seed phase, scenario and clip the runs diverged
(stopped), the runs with a client dropped in some round, the selected MSE (mean, sample sd),
and the paired difference to raw (clip 0) and to clip 2 (the default before the study) on
common seeds
(mean ± standard error). Development seeds 100-119, evaluation seeds 7100-7109:

    nice -n 10 python simulations/studies/fediv_rounds.py --scenarios step abs linear \
        --seeds 100..109 --clips 0 2 5 --reuse simulations/results/fediv_runs/rounds_dev.jsonl \
        --jsonl simulations/results/fediv_runs/clip_dev.jsonl
    python simulations/studies/fediv_rounds.py --clip-summary \
        simulations/results/fediv_runs/clip_dev.jsonl simulations/results/fediv_runs/clip_eval.jsonl

The rule of the choice, written down before any of these runs was read: a clip is eligible
if on the development seeds no run of it diverged (stopped) and no run had a client dropped,
in every scenario. Among the eligible clips the one with the lowest selected MSE averaged over
all its development runs (every run of every scenario one term) is chosen, unless
its paired difference to clip 2 over the same runs is within one standard error of 0 (a tie):
then the default 2 stays. A chosen clip other than 2 is then run once on the evaluation seeds
7100-7109 beside 0 and 2 before the default changes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
import torch
from fediv_gda_sweep import federation
from harness import (
    append_jsonl,
    fmt,
    markdown,
    mean_sd,
    parser,
    read_jsonl,
    read_results,
    settings,
    table,
    write_results,
)

from fedcausal_flwr.iv import model as dg

DEV, EVAL = range(100, 120), range(4000, 4010)
#: the clip study's evaluation seeds (issue 13, item 2), never used before it
CLIP_EVAL = range(7100, 7110)
#: what makes two runs the same run (``--reuse``, resume)
SAME = ("scenario", "seed", "clients", "lr_g", "lr_f", "local", "rounds", "grad_clip")
#: f's gradient clip of this study's runs (the App default then; now 5, see ``--clips``), so
#: a rerun of the committed sweeps and evaluations reproduces them
STUDY_CLIP = 2.0
#: the two variants of the evaluation: the App default and Table 1's T = 200, R = 10
VARIANTS = {"default": {},
            "paper": {"lr_g": 0.02, "lr_f": 0.2, "local_epochs": 10, "rounds": 200}}


def phase(seed: int) -> str:
    """``dev`` (100-119), ``eval`` (4000-4009 and the clip study's 7100-7109) or ``other``."""
    return "dev" if seed in DEV else "eval" if seed in EVAL or seed in CLIP_EVAL else "other"


def run(scenario: str, seed: int, s: dg.FedIVSettings, k: int = 10, n: int = 20000) -> dict:
    """One FedGDA run with the per-round criterion and test MSE (round 0: the initial g)."""
    rc = {"iv-scenario": scenario, "iv-dgp": "paper", "seed": seed, "iv-n": n, "iv-alpha": 0.3}
    tr, val, test, g_eval, evaluate = federation(rc, k, s.val_features, seed)
    g0, _ = dg.networks(tuple(tr[0].x.shape[1:]), tuple(tr[0].z.shape[1:]), seed)
    first = evaluate(dg.get_params(g0))
    t0, c0 = time.time(), time.process_time()
    st = dg.fedgda_reference(tr, s, seed, val, evaluate=evaluate)
    return {"scenario": scenario, "seed": seed, "clients": k, "lr_g": s.lr_g, "lr_f": s.lr_f,
            "local": s.local_epochs, "rounds": s.rounds, "grad_clip": s.grad_clip,
            "cpu_s": round(time.process_time() - c0, 1), "wall_s": round(time.time() - t0, 1),
            "stopped": st.stopped, "diverged_round": st.diverged_round,
            "rounds_done": st.round,
            "rounds_with_drops": sum(h["n_clients"] < k for h in st.history),
            "selected_round": st.best_round, "crit_selected": st.best_score,
            "mse_selected": dg.mse(dg.g_values(g_eval, st.best_theta, test.x), test.g),
            "mse_last": dg.mse(dg.g_values(g_eval, st.theta, test.x), test.g),
            "crit_hist": [first["crit"]] + [h["crit"] for h in st.history],
            "mse_hist": [first["mse"]] + [h["mse"] for h in st.history]}


def prefix(r: dict, t: int) -> dict:
    """What a run of ``t <= r["rounds"]`` rounds selects: the lowest criterion of rounds 0..t
    (the first on ties, as :func:`core.deepgmm.select`), its test MSE, and whether it
    diverged by round t."""
    crit = np.asarray(r["crit_hist"][:t + 1], dtype=float)
    crit = np.where(np.isfinite(crit), crit, np.inf)
    i = int(np.argmin(crit))
    return {"rounds": t, "selected_round": i, "mse_selected": r["mse_hist"][i],
            "diverged": bool(r["stopped"]) and r["diverged_round"] <= t}


def config(r: dict) -> str:
    """``T x R, lr g / f`` of a run (T: its rounds, or a prefix's)."""
    return f"T={r['rounds']} R={r['local']} lr {r['lr_g']:g}/{r['lr_f']:g}"


def baseline(r: dict) -> dict | None:
    """A ``fediv_divergence.py`` run of the App's T = 200, R = 10 (``new``: f clipped, as
    now) in this script's fields, or None (its ``old`` variant, raw gradients)."""
    if r.get("variant") != "new":
        return None
    return {**{k: r[k] for k in ("scenario", "seed", "clients", "lr_g", "lr_f", "rounds",
                                 "grad_clip", "stopped", "diverged_round", "selected_round",
                                 "mse_selected")},
            "local": r["local_epochs"], "source": "fediv_divergence"}


def summarize(rows: list[dict], prefixes: list[int]) -> dict:
    """Per ``phase/scenario/clients/config``: runs, diverged, exchanges, local steps, selected
    MSE and selected round (mean, sample sd); a sweep run (not a variant's) also stands for its
    prefixes."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        views = [r] + [{**r, **prefix(r, t)} for t in prefixes
                       if t < r["rounds"] and "crit_hist" in r and not r.get("variant")]
        for v in views:
            key = (f"{phase(r['seed'])}/{r['scenario']}/{r['clients']}/{config(v)}"
                   + (f"/{r['variant']}" if r.get("variant") else ""))
            groups.setdefault(key, []).append(v)
    out = {}
    for key, rs in sorted(groups.items()):
        seeds = [r["seed"] for r in rs]
        if len(seeds) != len(set(seeds)):
            raise ValueError(f"{key}: a seed twice: {sorted(seeds)}")
        out[key] = {
            "runs": len(rs), "seeds": sorted(seeds),
            "diverged": sum(bool(r.get("diverged", r["stopped"])) for r in rs),
            "exchanges": rs[0]["rounds"] + 1, "local_steps": rs[0]["rounds"] * rs[0]["local"],
            "mse_selected": mean_sd(r["mse_selected"] for r in rs),
            "selected_round": mean_sd(r["selected_round"] for r in rs),
            "mse_by_seed": {r["seed"]: round(r["mse_selected"], 5) for r in rs}}
    return out


def lines(summary: dict) -> list[str]:
    """A text table of the summary."""
    rows = [[*k.split("/")[:3], "/".join(k.split("/")[3:]), f"{v['diverged']} / {v['runs']}",
             v["exchanges"], v["local_steps"],
             f"{v['mse_selected'][0]:.4f} ± {v['mse_selected'][1]:.4f}",
             f"{v['selected_round'][0]:.0f}"] for k, v in summary.items()]
    return table(["seeds", "scenario", "clients", "setting", "diverged", "exchanges",
                  "steps/client", "selected MSE", "sel. round"], rows).splitlines()


def grid_entry(entry: str) -> dict:
    """``"lr_g,lr_f,R,T"`` as FedIVSettings fields."""
    lr_g, lr_f, local, rounds = entry.split(",")
    return {"lr_g": float(lr_g), "lr_f": float(lr_f), "local_epochs": int(local),
            "rounds": int(rounds)}


def main() -> None:
    """Run a grid or the variants (one JSON line per run), or summarise JSON lines."""
    ap = parser(__doc__, seeds=[100, 101, 102, 103])
    ap.add_argument("--scenarios", nargs="+", default=["abs", "step"])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--grid", nargs="*", default=[], help="entries lr_g,lr_f,R,T")
    ap.add_argument("--variants", nargs="*", default=[], choices=list(VARIANTS))
    ap.add_argument("--prefixes", nargs="*", type=int, default=[30, 40, 50])
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--summarize", nargs="*", default=None, help="only summarise JSONL files")
    ap.add_argument("--clips", nargs="*", type=float, default=[],
                    help="run every job once per grad_clip value (0: raw gradients)")
    ap.add_argument("--reuse", nargs="*", default=[],
                    help="JSONL files whose runs of the same settings are copied, not rerun")
    ap.add_argument("--clip-summary", nargs="*", default=None,
                    help="only summarise the clip study's JSONL files")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows: list[dict] = []
    if a.clip_summary is not None:
        clip_main(a)
        return
    if a.summarize is not None:
        for path in a.summarize:
            got = read_jsonl(Path(path))
            rows += [b for b in map(baseline, got) if b] if "variant" in got[0] \
                and "local_epochs" in got[0] else got
        ran = {(r["scenario"], r["seed"]) for r in rows if "source" not in r}
        rows = [r for r in rows if "source" not in r or (r["scenario"], r["seed"]) in ran]
    else:
        jobs = [("", grid_entry(e)) for e in a.grid]
        jobs += [(v, VARIANTS[v]) for v in a.variants]
        if a.clips:
            jobs = [(v, {**over, "grad_clip": c}) for v, over in jobs or [("", {})]
                    for c in a.clips]
        done = {same(r) for r in read_jsonl(Path(a.jsonl))} \
            if a.jsonl and Path(a.jsonl).exists() else set()
        earlier = {same(r): (r, Path(f).name) for f in a.reuse for r in read_jsonl(Path(f))
                   if not r.get("variant")}
        for sc in a.scenarios:
            for seed in a.seeds:
                for variant, over in jobs:
                    s = dg.FedIVSettings(grad_clip=STUDY_CLIP).replace(**over)
                    key = same({"scenario": sc, "seed": seed, "clients": a.clients,
                                "lr_g": s.lr_g, "lr_f": s.lr_f, "local": s.local_epochs,
                                "rounds": s.rounds, "grad_clip": s.grad_clip})
                    if key in done:
                        continue
                    if not variant and key in earlier:
                        r = {**earlier[key][0], "reused_from": earlier[key][1]}
                    else:
                        r = run(sc, seed, s, a.clients)
                    if variant:
                        r["variant"] = variant
                    rows.append(r)
                    print(json.dumps({k: v for k, v in r.items() if not k.endswith("_hist")}),
                          flush=True)
                    if a.jsonl:
                        append_jsonl(a.jsonl, r)
    if a.clips:
        print("\n".join(clip_lines(clip_summary(rows))))
        return
    summary = summarize(rows, a.prefixes)
    out = lines(summary)
    print("\n".join(out))
    if a.summarize is not None:
        write_results("fediv_rounds", {"settings": settings(a), "summary": summary,
                                       "table": out}, a.out)


def same(r: dict) -> tuple:
    """The fields that make two runs the same run (floats as floats: 2 == 2.0)."""
    return tuple(float(r[k]) if k in ("lr_g", "lr_f", "grad_clip") else r[k] for k in SAME)


def paired(a: dict[int, float], b: dict[int, float]) -> dict:
    """``a - b`` on the seeds both have: mean, standard error, n, seeds no worse."""
    d = np.array([a[s] - b[s] for s in sorted(a) if s in b], dtype=float)
    if d.size == 0:
        return {"n": 0, "mean": None, "se": None, "no_worse": 0}
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None
    return {"n": int(d.size), "mean": float(d.mean()), "se": se,
            "no_worse": int((d <= 0).sum())}


def clip_summary(rows: list[dict]) -> dict:
    """Per ``phase/scenario/clip``: runs, seeds, diverged, runs with a client dropped, selected
    MSE (mean, sample sd), selected round, the paired difference to clip 0 (all its seeds, and
    those where its run did not stop) and to clip 2."""
    groups: dict[tuple[str, str, float], list[dict]] = {}
    for r in rows:
        groups.setdefault((phase(r["seed"]), r["scenario"], float(r["grad_clip"])),
                          []).append(r)
    by_seed = {k: {r["seed"]: r["mse_selected"] for r in rs} for k, rs in groups.items()}
    out = {}
    for (ph, sc, c), rs in sorted(groups.items()):
        seeds = [r["seed"] for r in rs]
        if len(seeds) != len(set(seeds)):
            raise ValueError(f"{ph}/{sc}/clip {c:g}: a seed twice: {sorted(seeds)}")
        v = {"runs": len(rs), "seeds": sorted(seeds), "grad_clip": c,
             "diverged": sum(bool(r["stopped"]) for r in rs),
             "diverged_rounds": sorted(r["diverged_round"] for r in rs if r["stopped"]),
             "with_drops": sum(r["rounds_with_drops"] > 0 for r in rs),
             "mse_selected": mean_sd(r["mse_selected"] for r in rs),
             "selected_round": mean_sd(r["selected_round"] for r in rs),
             "exchanges": rs[0]["rounds"] + 1, "setting": config(rs[0]),
             "mse_by_seed": {r["seed"]: r["mse_selected"] for r in rs}}
        for ref in (0.0, 2.0):
            if ref != c and (ph, sc, ref) in by_seed:
                v[f"vs_{ref:g}"] = paired(by_seed[(ph, sc, c)], by_seed[(ph, sc, ref)])
        if c != 0.0 and (ph, sc, 0.0) in groups:  # raw's runs that did not stop
            raw = {r["seed"]: r["mse_selected"] for r in groups[(ph, sc, 0.0)]
                   if not r["stopped"]}
            v["vs_0_not_stopped"] = paired(by_seed[(ph, sc, c)], raw)
        out[f"{ph}/{sc}/{c:g}"] = v
    return out


def choose(summary: dict) -> dict:
    """The module docstring's rule on the development rows: eligible clips (no run diverged or
    with a client dropped, in every scenario), the lowest pooled mean selected MSE, a tie with
    clip 2 (paired difference within one standard error of 0) keeps 2."""
    dev = {k: v for k, v in summary.items() if k.startswith("dev/")}
    scenarios = sorted({k.split("/")[1] for k in dev})
    clips = sorted({v["grad_clip"] for v in dev.values()})
    per: dict[str, dict] = {}
    for c in clips:
        cells = [dev.get(f"dev/{sc}/{c:g}") for sc in scenarios]
        if any(x is None for x in cells):
            continue
        mse = [m for x in cells for m in x["mse_by_seed"].values()]
        d = [x["mse_by_seed"][s] - dev[f"dev/{x_sc}/2"]["mse_by_seed"][s]
             for x, x_sc in zip(cells, scenarios, strict=True)
             for s in x["mse_by_seed"] if s in dev[f"dev/{x_sc}/2"]["mse_by_seed"]]
        per[f"{c:g}"] = {
            "eligible": all(x["diverged"] == 0 and x["with_drops"] == 0 for x in cells),
            "runs": len(mse), "mse_pooled": float(np.mean(mse)),
            "vs_2": {"n": len(d), "mean": float(np.mean(d)),
                     "se": float(np.std(d, ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0}}
    eligible = {c: v for c, v in per.items() if v["eligible"]}
    best = min(eligible, key=lambda c: eligible[c]["mse_pooled"]) if eligible else None
    chosen = best
    if best is not None and best != "2" and "2" in eligible \
            and abs(eligible[best]["vs_2"]["mean"]) <= eligible[best]["vs_2"]["se"]:
        chosen = "2"
    return {"scenarios": scenarios, "per_clip": per, "lowest_eligible": best, "chosen": chosen}


def clip_lines(summary: dict) -> list[str]:
    """A text table of the clip summary."""
    def d(v: dict | None) -> str:
        if not v or not v["n"]:
            return "-"
        return f"{v['mean']:+.4f} ± {v['se'] or 0:.4f} ({v['no_worse']}/{v['n']})"
    rows = [[*k.split("/"), f"{v['diverged']} / {v['runs']}", f"{v['with_drops']} / {v['runs']}",
             f"{v['mse_selected'][0]:.4f} ± {v['mse_selected'][1]:.4f}",
             f"{v['selected_round'][0]:.0f}", d(v.get("vs_0")), d(v.get("vs_2"))]
            for k, v in summary.items()]
    return table(["seeds", "scenario", "clip", "diverged", "client dropped", "selected MSE",
                  "sel. round", "- raw (paired)", "- clip 2 (paired)"], rows).splitlines()


def clip_main(a) -> None:  # noqa: ANN001
    """Summarise the clip study's JSON lines and apply the rule."""
    rows = [r for f in a.clip_summary for r in read_jsonl(Path(f))]
    summary = clip_summary(rows)
    rule = choose(summary)
    out = clip_lines(summary)
    print("\n".join(out))
    print(json.dumps(rule, indent=1))
    write_results("fediv_clip", {"settings": settings(a), "summary": summary, "rule": rule,
                                 "table": out}, a.out)


# ----------------------------------------------------------------------------- tables
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


def table_fediv_rounds_dev() -> str:
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


def table_fediv_rounds() -> str:
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


def table_fediv_clip() -> str:
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


def table_fediv_clip_rule() -> str:
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


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fediv_rounds_dev": table_fediv_rounds_dev,
          "fediv_rounds": table_fediv_rounds,
          "fediv_clip": table_fediv_clip,
          "fediv_clip_rule": table_fediv_clip_rule}


if __name__ == "__main__":
    main()
