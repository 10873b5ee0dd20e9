"""FedDeepGMM-GDA divergence (issue 13, item 2): the old default vs the new one.

Old default: Algorithm 1's raw gradients (``grad_clip = 0``); new default: f's local
gradient clipped to L2 norm 2 (the App's default until the clip study of ``fediv_rounds.py``
raised it to 5). Both
use Table 1's FedDeepGMM-GDA setting otherwise (10 clients, Dirichlet(0.3), n = 20000,
lr 0.02 / 0.2, R = 10, T = 200) and the reference loop, which stops a run whose global players
diverge (non-finite or exploding, ``core.deepgmm.divergence``) and leaves out a client whose
local game gives a non-finite loss, as the Flower strategy does.

Per scenario and variant it reports how many runs diverged (stopped), how many had a client
dropped for a non-finite local game in some round, and the selected-round test MSE (mean ± sample
sd, ddof = 1), with the paper's Table 1 value beside ours. Design choices were made on
development seeds (step 100-119, abs and linear 100-109: compute); evaluation seeds
3000-3004 (of the 3000-3009 range set aside) were run once, after the choice.

    nice -n 10 python simulations/studies/fediv_divergence.py --scenarios step --seeds 100..119 \\
        --variants new --jsonl simulations/results/fediv_runs/divergence_dev.jsonl
    python simulations/studies/fediv_divergence.py --summarize \\
        simulations/results/fediv_runs/divergence_dev.jsonl \\
        simulations/results/fediv_runs/divergence_eval.jsonl
"""

from __future__ import annotations

import json
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
import torch
from fediv_table1 import PAPER, run
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

METHOD = "FedDeepGMM-GDA"
#: "new" is the default of this study, 2 (the App default is 5 since fediv_rounds.py's clip
#: study); pinned so that the committed runs stay reproducible
VARIANTS = {"old": {"grad_clip": 0.0}, "new": {"grad_clip": 2.0}}
DEV, EVAL = range(100, 120), range(3000, 3010)


def phase(seed: int) -> str:
    """``dev`` (100-119), ``eval`` (3000-3009) or ``other``."""
    return "dev" if seed in DEV else "eval" if seed in EVAL else "other"


def summarize(rows: list[dict]) -> dict:
    """Per ``phase/scenario/variant``: runs, diverged, runs with drops, MSE mean and sd."""
    out: dict[str, dict] = {}
    for r in rows:
        key = f"{phase(r['seed'])}/{r['scenario']}/{r['variant']}"
        out.setdefault(key, []).append(r)  # type: ignore[arg-type]
    summary = {}
    for key, rs in sorted(out.items()):
        seeds = [r["seed"] for r in rs]
        if len(seeds) != len(set(seeds)):
            raise ValueError(f"{key}: a seed twice: {sorted(seeds)}")
        sel = mean_sd(r["mse_selected"] for r in rs)
        summary[key] = {
            "runs": len(rs), "seeds": [min(seeds), max(seeds)],
            "diverged": sum(bool(r["stopped"]) for r in rs),
            "diverged_rounds": [r["diverged_round"] for r in rs if r["stopped"]],
            "with_drops": sum(r["rounds_with_drops"] > 0 for r in rs),
            "mse_selected": sel, "mse_last": mean_sd(r["mse_last"] for r in rs),
            "crit_selected": mean_sd(r["crit_selected"] for r in rs),
            "grad_clip": rs[0]["grad_clip"],
            "paper": PAPER[rs[0]["scenario"]][METHOD]}
    return summary


def lines(summary: dict) -> list[str]:
    """A text table: phase, scenario, variant, diverged / N, drops, MSE, paper."""
    rows = [[k.split("/")[0], k.split("/")[1], f"{k.split('/')[2]} (clip {v['grad_clip']:g})",
             f"{v['diverged']} / {v['runs']}", f"{v['with_drops']} / {v['runs']}",
             f"{v['mse_selected'][0]:.4f} ± {v['mse_selected'][1]:.4f}", f"{v['paper']:g}"]
            for k, v in summary.items()]
    return table(["seeds", "scenario", "variant", "diverged", "client dropped",
                  "selected MSE", "paper"], rows).splitlines()


def main() -> None:
    """Run the grid (one JSON line per run) or summarise JSON lines; write the result JSON."""
    ap = parser(__doc__, seeds=list(DEV))
    ap.add_argument("--scenarios", nargs="+", default=["abs", "step", "linear"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--summarize", nargs="*", default=None, help="only summarise JSONL files")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows: list[dict] = []
    if a.summarize is not None:
        for path in a.summarize:
            rows += read_jsonl(Path(path))
    else:
        for sc in a.scenarios:
            for v in a.variants:
                for seed in a.seeds:
                    r = {"variant": v, **run(sc, METHOD, seed, 10, "paper", 20000,
                                             **VARIANTS[v])}
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                    if a.jsonl:
                        append_jsonl(a.jsonl, r)
    summary = summarize(rows)
    out = lines(summary)
    print("\n".join(out))
    if a.summarize is not None:
        write_results("fediv_divergence", {"settings": settings(a), "summary": summary,
                                           "runs": rows, "table": out}, a.out)


# ----------------------------------------------------------------------------- tables
def table_fediv_divergence() -> str:
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


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"fediv_divergence": table_fediv_divergence}


if __name__ == "__main__":
    main()
