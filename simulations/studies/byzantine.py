"""The Byzantine screen on lying clients (issue 20): detection, false flags, accuracy, cost.

One client (partition 1) of K = 5 or K = 10 lies in every ``train.*`` reply from round 1 on,
multiplying every float array by a factor (``tests/helpers/faults.py``'s ``ATTACKS``): sign-flip
(-1), 50x, zeros (0) and a subtle 2x. Each run is the App in process (``InProcessGrid``) with
the App's defaults for FDBNL, PFDBNL on its heterogeneous generator (every client its own
graph perturbation) and FedIV on its Dirichlet(0.3) client splits; FDBNL/PFDBNL runs are
capped at 50 ADMM rounds (honest runs stop by round 34; a lie the screen lets through can keep
h(W) from ever reaching h-tol, and the App's 200 rounds then cost minutes a run). Per
(algorithm, K, seed):

- **honest**: nobody lies, screen off; every client's screen ratio r_k (distance from the
  median update over the typical distance, ``federation.robust.screen_ratios``) is recorded
  in every exchange: what a threshold ``byzantine-factor`` would flag honestly;
- **screened**: each attack with the screen at the App's defaults: the liar's detection rate
  (flagged exchanges over its replies), honest clients flagged, and the result's accuracy
  (FDBNL SHD of the global W, PFDBNL mean SHD of the honest clients' personalized W (the
  liar's own graph left out), FedIV test MSE of the selected round) beside the honest run's;
- **unscreened** (K = 5 only): each attack with ``byzantine-screen = false``: the damage.

The cost of the screen is the time spent in ``flag`` per exchange beside the round's seconds.
Development seeds 100-102 chose ``byzantine-factor``: about twice the largest honest ratio,
rounded (``--honest``: the honest runs alone); evaluation seeds 8000-8002, new to every
study, were run once with the chosen defaults:

    nice python simulations/studies/byzantine.py --seeds 100..102 --honest \\
        --jsonl simulations/results/byzantine_dev.jsonl      # and --clients 3 for FDBNL
    nice python simulations/studies/byzantine.py --seeds 8000..8002 --algorithms fdbnl pfdbnl \\
        --jsonl simulations/results/byzantine_eval.jsonl
    nice python simulations/studies/byzantine.py --seeds 8000..8002 --algorithms fediv \\
        --jsonl simulations/results/byzantine_eval_iv.jsonl  # beside the first, on a 2nd core
    python simulations/studies/byzantine.py --summarize simulations/results/byzantine_eval.jsonl \\
        simulations/results/byzantine_eval_iv.jsonl

The adaptive liar (issue 35, ``adaptive_liar``) under each robust rule, honest runs beside,
then its table (``results/adaptive.json``):

    nice python simulations/studies/byzantine.py --adaptive mean clipped-mean trimmed-mean \\
        median --algorithms fdbnl pfdbnl --clients 5 10 --seeds 8000..8002 \\
        --jsonl simulations/results/adaptive_eval2.jsonl   # FedIV: adaptive_eval2_iv.jsonl
    python simulations/studies/byzantine.py --summarize simulations/results/adaptive_eval2.jsonl \\
        simulations/results/adaptive_eval2_iv.jsonl ... --adaptive-summary

(every command and file: ``results/reliability.md``, "Adaptive liar and the robust rule").

A run already in ``--jsonl`` is skipped (resume). ``--summarize`` writes
``results/byzantine.json`` and prints the tables (``simulations/tables.py`` puts them in
``results/reliability.md``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    Clock,
    append_jsonl,
    fmt,
    log,
    markdown,
    mean_sd,
    parser,
    read_jsonl,
    read_results,
    results_path,
    seed_range,
    write_results,
)

from fedcausal_flwr.appconfig import glue, view
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.robust import CLIP_PASSES, CLIP_RADIUS, screen_ratios
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers import faults as T

#: algorithm -> (extra run config, the accuracy metric, lower is better)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "fdbnl": ({"dbn.num-rounds": 50}, "shd_w"),
    "pfdbnl": ({"dbn.heterogeneous": True, "dbn.num-rounds": 50}, "shd_w"),
    "fediv": ({}, "test_mse_selected"),
}
LIAR = 1


def run_one(alg: str, k: int, seed: int, attack: str | None, screen: bool) -> dict[str, Any]:
    """One in-process App run; its screen ratios, flags, accuracy and costs."""
    extra, metric = CASES[alg]
    rc = {"algorithm": alg, "seed": seed, "round-timeout-s": 600.0, **extra,
          f"{glue_section(alg)}.byzantine-screen": screen}
    strategy = glue(alg).strategy(alg, view(alg, rc))
    ratios: list[dict[int, float]] = []
    cost = {"s": 0.0, "n": 0}
    filters = strategy.reply_filters
    at = next((i for i, f in enumerate(filters) if getattr(f, "flags", False)), None)
    flag = filters[at] if at is not None else (lambda phase, replies: {})

    def watched(phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        t = time.perf_counter()
        out = flag(phase, replies)
        cost["s"] += time.perf_counter() - t
        cost["n"] += 1
        views = {c: v for c, a in replies.items()
                 if (v := strategy.robust_view(phase, c, a)) is not None}
        if views:
            ratios.append(screen_ratios(views, strategy.settings.byzantine_floor))
        return out

    watched.flags = True  # type: ignore[attr-defined]
    if at is None:  # the screen is off: watch the replies all the same
        filters.append(watched)
    else:
        filters[at] = watched
    app = client_app if attack is None else T.lying_app(client_app, attack, [LIAR])
    t0 = time.perf_counter()
    res = strategy.start(grid=InProcessGrid(app, k, rc))
    wall = time.perf_counter() - t0
    return {"algorithm": alg, "k": k, "seed": seed, "attack": attack, "screen": screen,
            "value_honest": honest_value(strategy, res.estimates, metric),
            "status": res.status, "rounds": len(res.history), "metric": metric,
            "value": res.metrics.get(metric), "flagged": res.metrics.get("flagged", {}),
            "ratios": [{str(c): r for c, r in d.items()} for d in ratios],
            "flag_s": cost["s"], "flag_calls": cost["n"], "wall_s": wall,
            "factor": strategy.settings.byzantine_factor,
            "floor": strategy.settings.byzantine_floor}


def adaptive_liar(strategy: Any, liars: list[int], pull: float = 1.0) -> Any:
    """A reply filter run before the screens that plays the adaptive liar (issue 35): the
    ``liars`` (colluding) see every honest reply of the exchange and all send
    ``m - t pull m`` (m: the coordinate-wise median of the honest replies' float arrays, so
    every entry is pulled toward zero: an emptied graph), t the largest (bisection) that keeps
    each liar's screen ratio (``screen_ratios`` on the protocol's own ``robust_view``) under
    ``byzantine-factor``: an upper bound on a liar who knows the rule. Drops nothing."""
    factor, floor = strategy.settings.byzantine_factor, strategy.settings.byzantine_floor

    def lie(phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        bad = [c for c in liars if c in replies]
        honest = [c for c in replies if c not in bad]
        if not bad or not honest:
            return {}
        med = [np.median(np.stack([np.asarray(replies[c][i]) for c in honest]), axis=0)
               if np.asarray(replies[honest[0]][i]).dtype.kind == "f" else None
               for i in range(len(replies[honest[0]]))]

        def put(t: float) -> float:
            for c in bad:
                replies[c][:] = [a if m is None else m - t * pull * m
                                 for a, m in zip(replies[c], med, strict=True)]
            views = {c: v for c, a in replies.items()
                     if (v := strategy.robust_view(phase, c, a)) is not None}
            r = screen_ratios(views, floor)
            return max((r.get(c, 0.0) for c in bad), default=0.0)

        lo, hi = 0.0, 4.0
        for _ in range(30):
            t = (lo + hi) / 2
            lo, hi = (t, hi) if put(t) < 0.98 * factor else (lo, t)
        put(lo)
        return {}

    return lie


def run_adaptive_honest(alg: str, k: int, seed: int, rule: str) -> dict[str, Any]:
    """:func:`run_adaptive` with nobody lying."""
    return run_adaptive(alg, k, seed, rule, honest=True)


def run_adaptive(alg: str, k: int, seed: int, rule: str, screen: bool = True,
                 honest: bool = False) -> dict[str, Any]:
    """One run with the adaptive liar(s): partitions 1 (K = 5) or 1 and 2 (K = 10, colluding),
    under ``robust-rule`` ``rule`` (None: honest run with that rule); the accuracy, flags and
    the rule's cost (seconds in the server round beside the mean's)."""
    extra, metric = CASES[alg]
    sec = glue_section(alg)
    rc = {"algorithm": alg, "seed": seed, "round-timeout-s": 600.0, **extra,
          f"{sec}.byzantine-screen": screen, f"{sec}.robust-rule": rule}
    strategy = glue(alg).strategy(alg, view(alg, rc))
    liars = [LIAR] if k < 10 else [LIAR, LIAR + 1]
    attacked = [] if honest else liars
    strategy.reply_filters.insert(0, adaptive_liar(strategy, attacked))
    t0 = time.perf_counter()
    res = strategy.start(grid=InProcessGrid(client_app, k, rc))
    value = (honest_value(strategy, res.estimates, metric, liars)  # PFDBNL: honest clients'
             if "W_local" in res.estimates else None)
    return {"algorithm": alg, "k": k, "seed": seed, "rule": rule, "liars": attacked,
            "status": res.status, "rounds": len(res.history), "metric": metric,
            "value": res.metrics.get(metric) if value is None else value,
            "robustness": res.metrics.get("robustness"),
            "wall_s": time.perf_counter() - t0,
            "round_s": float(np.mean([h.get("seconds", 0.0) for h in res.history] or [0])),
            **({"clip_radius": CLIP_RADIUS, "clip_passes": CLIP_PASSES}
               if rule == "clipped-mean" else {})}


#: The robust-rule study's cases (issue 35): algorithm -> (extra run config, metric); FedGC at
#: the App's defaults (two clients, A21: the honest client 2's coupling to the liar's states).
ROBUST_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "fediv": ({}, "test_mse_selected"),
    "fedgc": ({}, "err_A21"),
}
#: The attacks of the robust-rule study: ``ATTACKS``' sign flip and zeros from round 1 on;
#: FedGC also the sign flip begun in round 2 ("-late": a lie that changes, after an honest
#: first answer for the same window).
ROBUST_ATTACKS = {"fediv": ("sign-flip", "zeros"), "fedgc": ("sign-flip", "zeros",
                                                              "sign-flip-late")}


def run_robust(alg: str, k: int, seed: int, rule: str, attack: str | None) -> dict[str, Any]:
    """One run of the robust-rule study: partition 1 applies ``attack`` (``ATTACKS``; None:
    nobody lies) to every ``train.*`` reply from round 1 on, under ``robust-rule`` ``rule``
    (FedGC: "screen" for its state screen, "mean" without it); the result's metric, status,
    ``metrics["robustness"]`` and the seconds per round."""
    extra, metric = ROBUST_CASES[alg]
    sec = glue_section(alg)
    rc: dict[str, Any] = {"algorithm": alg, "seed": seed, "round-timeout-s": 600.0, **extra}
    if alg == "fedgc":
        rc[f"{sec}.ss-clients"] = k
        rc[f"{sec}.ss-state-screen"] = rule == "screen"
    else:
        rc[f"{sec}.robust-rule"] = rule
    strategy = glue(alg).strategy(alg, view(alg, rc))
    app = client_app if attack is None else T.lying_app(
        client_app, attack.removesuffix("-late"), [LIAR], start=2 if attack.endswith("-late")
        else 1)
    t0 = time.perf_counter()
    res = strategy.start(grid=InProcessGrid(app, k, rc))
    out = {"algorithm": alg, "k": k, "seed": seed, "rule": rule, "attack": attack,
           "status": res.status, "rounds": len(res.history), "metric": metric,
           "value": res.metrics.get(metric), "robustness": res.metrics.get("robustness"),
           "wall_s": time.perf_counter() - t0,
           "round_s": float(np.mean([h.get("seconds", 0.0) for h in res.history] or [0]))}
    pv = res.estimates.get("A_offdiag_pvalue")
    if pv is not None:  # FedGC: the Granger test of the block A21 (client 2 <- client 1)
        P = strategy.P
        out["a21_pvalue_min"] = float(np.min(np.asarray(pv)[P[0]:P[0] + P[1], :P[0]]))
    return out


def summarize_robust(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (algorithm, K, rule, attack) of the robust-rule study: the metric over the seeds,
    the runs that stopped naming the liar, what was flagged, the Granger test of A21 (FedGC)
    and the seconds per round."""
    rows = []
    keys = sorted({(r["algorithm"], r["k"], r["rule"], r["attack"] or "") for r in records},
                  key=lambda x: (list(ROBUST_CASES).index(x[0]), x[1], x[2], x[3] != "", x[3]))
    for alg, k, rule, attack in keys:
        runs = sorted((r for r in records if (r["algorithm"], r["k"], r["rule"],
                                              r["attack"] or "") == (alg, k, rule, attack)),
                      key=lambda r: r["seed"])
        stopped = [r for r in runs if r["status"].startswith("stopped")
                   and f"client {LIAR}" in r["status"]]
        done = [r for r in runs if r["status"] == "completed"]
        pv = [r["a21_pvalue_min"] for r in done if r.get("a21_pvalue_min") is not None]
        rows.append({
            "algorithm": alg, "k": k, "rule": rule, "attack": attack or None,
            "seeds": [r["seed"] for r in runs], "metric": runs[0]["metric"],
            "values": [r["value"] for r in runs], "value": mean_sd([r["value"] for r in runs]),
            "completed": len(done), "stopped_naming_liar": len(stopped),
            "flagged": sorted({c for r in runs for c in (r["robustness"] or {}).get("flagged",
                                                                                  {})}),
            "rule_reported": sorted({(r["robustness"] or {}).get("rule", "?") for r in runs}),
            "a21_found": sum(p < 0.05 for p in pv) if pv else None, "a21_tested": len(pv),
            "round_s": float(np.mean([r["round_s"] for r in runs]))})
    return {"rows": rows}


def table_robust(name: str = "byzantine_robust") -> str:
    """Issue 35's rows (``name``.json): FedIV under each robust rule and FedGC with and
    without its state screen, honest and with one liar (partition 1)."""
    r = read_results(name)
    rows = r["rows"]
    seeds = seed_range(sorted({s for x in rows for s in x["seeds"]}))
    head = (f"**Robust rule and state screen, one liar (partition {LIAR}) of K, evaluation "
            f"seeds {seeds} (n = {max(len(x['seeds']) for x in rows)} per cell).** "
            f"Made by `{r['meta']['script']}` on {r['meta']['finished']}.\n\n")
    honest = {(x["algorithm"], x["k"], x["rule"]): x for x in rows if x["attack"] is None}
    base = {(x["algorithm"], x["k"]): x for x in rows if x["attack"] is None
            and x["rule"] == "mean"}

    def cell(x: dict[str, Any]) -> str:
        if x["stopped_naming_liar"] == len(x["seeds"]):
            return f"stopped, names client {LIAR} ({x['stopped_naming_liar']}/{len(x['seeds'])})"
        out = fmt(*x["value"], digits=3)
        b = base.get((x["algorithm"], x["k"]))
        if x["algorithm"] == "fediv" and b and b["value"][0]:
            out += f" ({x['value'][0] / b['value'][0]:.2f}x)"
        if x["a21_found"] is not None:
            out += f"; A21 found {x['a21_found']}/{x['a21_tested']}"
        if x["stopped_naming_liar"]:
            out += f"; stopped naming client {LIAR} in {x['stopped_naming_liar']}"
        return out

    table = []
    for x in rows:
        if x["attack"] is None:
            continue
        h = honest[(x["algorithm"], x["k"], x["rule"])]
        rule = {"mean": "none (mean)" if x["algorithm"] == "fediv" else "no state screen",
                "screen": "state screen"}.get(x["rule"], x["rule"])
        table.append([x["algorithm"], x["k"], rule, x["attack"], f"{x['metric']} {cell(h)}",
                      cell(x), ", ".join(x["flagged"]) or "-", f"{x['round_s']:.2f} s"])
    return head + markdown(["algorithm", "K", "rule", "attack", "honest run (x the rule-off "
                            "honest mean)", "with the liar", "flagged", "round (attacked)"],
                           table)


def summarize_adaptive(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (algorithm, K, rule) of the adaptive-liar study (one file's records: one set of
    seeds): the metric of the honest and of the attacked runs over the seeds, their statuses,
    what was flagged and the seconds per round of the attacked runs."""
    def rule_of(r: dict[str, Any]) -> str:
        tau = r.get("clip_radius")
        return r["rule"] if tau is None else f"{r['rule']} (tau {tau:g})"

    rows = []
    for alg, k, rule in sorted({(r["algorithm"], r["k"], rule_of(r)) for r in records},
                               key=lambda x: (list(CASES).index(x[0]), x[1], x[2] != "mean",
                                              x[2])):
        cell = {h: sorted((r for r in records if (r["algorithm"], r["k"], rule_of(r),
                                                  r["honest"]) == (alg, k, rule, h)),
                          key=lambda r: r["seed"]) for h in (True, False)}
        honest, attacked = cell[True], cell[False]
        rows.append({
            "algorithm": alg, "k": k, "rule": rule, "metric": (honest or attacked)[0]["metric"],
            "liars": attacked[0]["liars"] if attacked else [],
            "seeds": sorted({r["seed"] for r in honest + attacked}),
            "honest_values": [r["value"] for r in honest],
            "attacked_values": [r["value"] for r in attacked],
            "honest": mean_sd(r["value"] for r in honest),
            "attacked": mean_sd(r["value"] for r in attacked),
            "not_completed": sum(r["status"] != "completed" for r in honest + attacked),
            "flagged": sorted({c for r in attacked
                               for c in (r["robustness"] or {}).get("flagged", {})}),
            "round_s": float(np.mean([r["round_s"] for r in attacked] or [0.0]))})
    return {"rows": rows}


def table_adaptive() -> str:
    """Issue 35's adaptive-liar rows (adaptive.json): honest and attacked runs per rule."""
    r = read_results("adaptive")
    rows = r["rows"]
    head = (f"**Adaptive liar(s), evaluation seeds (mean ± sample sd over the seeds).** Made by "
            f"`{r['meta']['script']}` on {r['meta']['finished']}.\n\n")
    base = {(x["algorithm"], x["k"], seed_range(x["seeds"])): x["honest"][0] for x in rows
            if x["rule"] == "mean"}

    def cell(x: dict[str, Any], which: str) -> str:
        out = fmt(*x[which], digits=3 if x["algorithm"] == "fediv" else 1)
        b = base.get((x["algorithm"], x["k"], seed_range(x["seeds"])))
        if x["algorithm"] == "fediv" and b:
            out += f" ({x[which][0] / b:.2f}x)"
        return out

    table = [[x["algorithm"], f"{x['k']} ({len(x['liars'])})", seed_range(x["seeds"]),
              "mean (rule off, default)" if x["rule"] == "mean" else x["rule"],
              f"{x['metric']} {cell(x, 'honest')}", cell(x, "attacked"),
              ", ".join(map(str, x["flagged"])) or "-", x["not_completed"],
              f"{1000 * x['round_s']:.0f} ms"] for x in rows]
    return head + markdown(["algorithm", "K (liars)", "seeds", "rule",
                            "honest (x the rule-off honest mean)", "adaptive liar", "flagged",
                            "runs not completed", "server round (attacked)"], table)


def honest_value(strategy: Any, est: Mapping[str, Any], metric: str,
                 liars: Sequence[int] = (LIAR,)) -> float | None:
    """The metric over the clients other than ``liars`` (PFDBNL scores each client's
    personalized graph; a liar's own graph is not what the screen protects); others: the
    run's value."""
    if strategy.evaluate_fn is None or not est:
        return None
    cids = sorted(strategy.nodes)
    if "W_local" in est:
        keep = [i for i, c in enumerate(cids) if c not in liars]
        est = {k: (np.asarray(v)[keep] if k.startswith(("W_local", "A_local", "client_ids"))
                   else v) for k, v in est.items()}
        cids = [c for c in cids if c not in liars]
    return strategy.evaluate_fn(est, cids).get(metric)


def glue_section(alg: str) -> str:
    """The run-config section of ``alg``."""
    from fedcausal_flwr.registry import get

    return get(alg).section


def jobs(algs: list[str], ks: list[int], seeds: list[int]) -> list[tuple]:
    """(alg, k, seed, attack, screen) of every run: the honest runs first (they set the
    threshold), then the attacks with the screen, then without it."""
    cases = [(alg, k, seed) for alg in algs for k in ks for seed in seeds]
    honest = [(*c, None, False) for c in cases]
    screened = [(*c, a, True) for c in cases for a in T.ATTACKS]
    unscreened = [(*c, a, False) for c in cases if c[1] == 5 for a in T.ATTACKS]
    return honest + screened + unscreened


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (algorithm, K): honest ratios and false flags; per attack: detection, accuracy."""
    out: dict[str, Any] = {"rows": [], "honest": []}
    keys = sorted({(r["algorithm"], r["k"]) for r in records},
                  key=lambda x: (list(CASES).index(x[0]), x[1]))
    for alg, k in keys:
        runs = [r for r in records if r["algorithm"] == alg and r["k"] == k]
        honest = [r for r in runs if r["attack"] is None]
        factor = next((r["factor"] for r in runs if r["screen"]), None)
        hr = [x for r in honest for d in r["ratios"] for x in d.values()]
        base = [r["value_honest"] for r in honest]
        flag_s = [r["flag_s"] / max(r["flag_calls"], 1) for r in runs if r["screen"]]
        round_s = [r["wall_s"] / max(r["rounds"], 1) for r in runs]
        out["honest"].append({
            "algorithm": alg, "k": k, "seeds": sorted({r["seed"] for r in honest}),
            "replies": len(hr), "max_ratio": max(hr, default=0.0),
            "p99_ratio": float(np.quantile(hr, 0.99)) if hr else 0.0,
            "false_flags": int(sum(x > factor for x in hr)) if factor else None,
            "value": mean_sd(base), "flag_ms": 1e3 * float(np.mean(flag_s)) if flag_s else 0,
            "round_s": float(np.mean(round_s)) if round_s else 0.0})
        for attack in T.ATTACKS:
            on = [r for r in runs if r["attack"] == attack and r["screen"]]
            off = [r for r in runs if r["attack"] == attack and not r["screen"]]
            if not on:
                continue
            liar_replies = sum(len(r["ratios"]) for r in on)
            caught = sum(r["flagged"].get(f"client {LIAR}", 0) for r in on)
            wrong = sum(n for r in on for c, n in r["flagged"].items() if c != f"client {LIAR}")
            out["rows"].append({
                "algorithm": alg, "k": k, "attack": attack, "runs": len(on),
                "detected": caught / max(liar_replies, 1), "liar_replies": liar_replies,
                "first_caught": sum(r["flagged"].get(f"client {LIAR}", 0) > 0 for r in on),
                "honest_flagged": wrong,
                "liar_ratio_median": float(np.median([d.get(str(LIAR), np.nan) for r in on
                                                      for d in r["ratios"]])),
                "honest": mean_sd(base), "screened": mean_sd([r["value_honest"] for r in on]),
                "unscreened": mean_sd([r["value_honest"] for r in off]) if off else None,
                "status": sorted({r["status"].split(":")[0] for r in on + off})})
    return out


def print_summary(s: dict[str, Any]) -> None:
    """The tables of :func:`summarize`."""
    log("honest runs: screen ratios of every reply (flagged above byzantine-factor)")
    for h in s["honest"]:
        log(f"  {h['algorithm']:7s} K={h['k']:2d} seeds {h['seeds']} replies {h['replies']:5d} "
            f"max {h['max_ratio']:.2f} p99 {h['p99_ratio']:.2f} false flags {h['false_flags']} "
            f"metric {h['value'][0]:.4g}  flag {h['flag_ms']:.2f} ms/exchange, "
            f"round {h['round_s']:.2f} s")
    log("attacks (1 liar): detected = flagged replies / liar's replies")
    for r in s["rows"]:
        un = r["unscreened"]
        log(f"  {r['algorithm']:7s} K={r['k']:2d} {r['attack']:9s} detected {r['detected']:.2f} "
            f"({r['first_caught']}/{r['runs']} runs) honest flagged {r['honest_flagged']} "
            f"liar ratio {r['liar_ratio_median']:.3g}  metric honest {r['honest'][0]:.4g} "
            f"screened {r['screened'][0]:.4g} "
            + (f"unscreened {un[0]:.4g}" if un else "") + f" {r['status']}")


def runs_in(path: Path | None, *keys: str) -> set[tuple]:
    """(algorithm, k, seed, *keys) of every run already in the JSONL ``path`` (resume)."""
    if not path or not path.exists():
        return set()
    return {(r["algorithm"], r["k"], r["seed"], *(r[x] for x in keys)) for r in read_jsonl(path)}


def main() -> None:
    ap = parser(__doc__, seeds=[0, 1, 2])
    ap.add_argument("--algorithms", nargs="+", default=list(CASES))
    ap.add_argument("--clients", nargs="+", type=int, default=[5, 10])
    ap.add_argument("--jsonl", type=Path, default=None, help="append each run here (resume)")
    ap.add_argument("--honest", action="store_true",
                    help="only the honest runs (what the thresholds are chosen on)")
    ap.add_argument("--summarize", nargs="+", type=Path, default=None,
                    help="summarize these JSON-lines files and write results/byzantine.json")
    ap.add_argument("--adaptive", nargs="+", default=None, metavar="RULE",
                    help="the adaptive liar study under these robust rules (mean: the rule "
                         "off), honest (no liar) runs beside; prints a line per run")
    ap.add_argument("--robust", nargs="+", default=None, metavar="RULE",
                    help="the robust-rule study (issue 35: FedIV, FedGC; sign flip and zeros "
                         "by partition 1, and honest runs) under these rules (FedIV: "
                         "robust-rule values; FedGC: screen or mean)")
    ap.add_argument("--robust-summary", action="store_true",
                    help="with --summarize: the robust-rule study's records, written to "
                         "results/byzantine_robust.json")
    ap.add_argument("--adaptive-summary", action="store_true",
                    help="with --summarize: the adaptive-liar study's records, written to "
                         "results/adaptive.json")
    args = ap.parse_args()
    if args.robust:
        logging.getLogger("flwr").setLevel(logging.ERROR)
        done = runs_in(args.jsonl, "rule", "attack")
        clock = Clock()
        for alg in args.algorithms:
            for k in args.clients:
                for seed in args.seeds:
                    for rule in args.robust:
                        for attack in (None, *ROBUST_ATTACKS[alg]):
                            if (alg, k, seed, rule, attack) in done:
                                continue
                            rec = run_robust(alg, k, seed, rule, attack)
                            if args.jsonl:
                                append_jsonl(args.jsonl, rec)
                            rob = rec["robustness"] or {}
                            log(f"[{clock():.0f}s] {alg} K={k} seed={seed} rule={rule} "
                                f"attack={attack}: {rec['status'][:60]} {rec['metric']}="
                                f"{rec['value']} flagged={rob.get('flagged')} "
                                f"round {rec['round_s']:.3f}s")
        return
    if args.adaptive:
        logging.getLogger("flwr").setLevel(logging.ERROR)
        done = runs_in(args.jsonl, "rule", "honest")
        for alg in args.algorithms:
            for k in args.clients:
                for seed in args.seeds:
                    for rule in args.adaptive:
                        for honest in (True, False):
                            if (alg, k, seed, rule, honest) in done:
                                continue
                            rec = run_adaptive(alg, k, seed, rule) if not honest else \
                                run_adaptive_honest(alg, k, seed, rule)
                            rec["honest"] = honest
                            if args.jsonl:
                                append_jsonl(args.jsonl, rec)
                            log(f"{alg} K={k} seed={seed} rule={rule} honest={honest}: "
                                f"{rec['status'][:30]} {rec['metric']}={rec['value']} "
                                f"flagged={rec['robustness'] and rec['robustness']['flagged']}"
                                f" round {rec['round_s']:.3f}s")
        return
    if args.summarize and args.adaptive_summary:
        s = {"rows": [x for p in args.summarize
                      for x in summarize_adaptive(read_jsonl(p))["rows"]]}
        for x in s["rows"]:
            log(f"  {x['algorithm']:6s} K={x['k']:2d} {x['rule']:13s} {x['metric']} honest "
                f"{fmt(*x['honest'], digits=3)} attacked {fmt(*x['attacked'], digits=3)}")
        write_results("byzantine", {"files": [str(p) for p in args.summarize], **s},
                      args.out or results_path("adaptive"))
        return
    if args.summarize and args.robust_summary:
        s = summarize_robust([r for p in args.summarize for r in read_jsonl(p)])
        for x in s["rows"]:
            log(f"  {x['algorithm']:6s} K={x['k']:2d} {x['rule']:13s} {str(x['attack']):15s} "
                f"{x['metric']} {x['value'][0]:.4g} ± {x['value'][1]:.2g} completed "
                f"{x['completed']} stopped(liar) {x['stopped_naming_liar']} flagged "
                f"{x['flagged']} A21 found {x['a21_found']}/{x['a21_tested']}")
        write_results("byzantine", {"files": [str(p) for p in args.summarize], **s},
                      args.out or results_path("byzantine_robust"))
        return
    if args.summarize:
        records = [r for p in args.summarize for r in read_jsonl(p)]
        s = summarize(records)
        print_summary(s)
        write_results("byzantine", {"files": [str(p) for p in args.summarize], **s}, args.out)
        return
    logging.getLogger("flwr").setLevel(logging.ERROR)
    done = runs_in(args.jsonl, "attack", "screen")
    clock, records = Clock(), []
    todo = [j for j in jobs(args.algorithms, args.clients, args.seeds) if j not in done
            and (j[3] is None or not args.honest)]
    for i, job in enumerate(todo, 1):
        rec = run_one(*job)
        records.append(rec)
        if args.jsonl:
            append_jsonl(args.jsonl, rec)
        log(f"[{i}/{len(todo)} {clock():.0f}s] {job}: {rec['status'][:40]} "
            f"{rec['metric']}={rec['value']} flagged={rec['flagged']} "
            f"max ratio={max((x for d in rec['ratios'] for x in d.values()), default=0):.3g}")
    if not args.jsonl:
        print_summary(summarize(records))


# ----------------------------------------------------------------------------- tables
def table_byzantine() -> str:
    """Issue 20's Byzantine rows (byzantine.json): false flags and margins of honest runs, then
    per attack the detection rate and the result beside the honest and unscreened runs."""
    r = read_results("byzantine")
    seeds = seed_range(sorted({s for h in r["honest"] for s in h["seeds"]}))
    metric = {a: m for a, (_, m) in CASES.items()}
    head = (f"**Byzantine screen, one liar (partition {LIAR}) of K, evaluation seeds {seeds}.** "
            f"Made by `{r['meta']['script']}` on {r['meta']['finished']}.\n\n")
    honest = markdown(
        ["algorithm", "K", "honest replies", "largest honest ratio", "flagged honestly",
         "screen per exchange", "round"],
        [[h["algorithm"], h["k"], h["replies"], f"{h['max_ratio']:.2f}", h["false_flags"],
          f"{h['flag_ms']:.2f} ms", f"{h['round_s']:.2f} s"] for h in r["honest"]])
    rows = [[x["algorithm"], x["k"], x["attack"],
             f"{x['detected']:.2f} ({x['first_caught']}/{x['runs']} runs)",
             x["honest_flagged"], f"{x['liar_ratio_median']:.3g}",
             f"{metric[x['algorithm']]} {fmt(*x['honest'], digits=3)}",
             fmt(*x["screened"], digits=3),
             fmt(*x["unscreened"], digits=3) if x["unscreened"] else "-"]
            for x in r["rows"]]
    attacks = markdown(["algorithm", "K", "attack", "liar's replies flagged (runs caught)",
                        "honest replies flagged", "liar's median ratio", "result, honest run",
                        "with the liar, screened", "with the liar, no screen"], rows)
    return head + honest + "\n\n" + attacks


#: this script's table in results/reliability.md (``simulations/tables.py`` renders it)
TABLES = {"byzantine": table_byzantine, "robust": table_robust,
          "robust_fresh": lambda: table_robust("byzantine_robust_fresh"),
          "adaptive": table_adaptive}


if __name__ == "__main__":
    main()
