"""What a result.json checkpoint per round costs over a long run (issue 20).

The strategy base checkpoints after every round (:meth:`Recorder.record_round` hands the
result to the ServerApp's ``checkpoint``). Rewriting result.json whole (``RunResult.save``, as
before issue 20) costs O(rounds) per round, O(rounds^2) per run; ``RunResult.checkpoint``
(what the ServerApp calls now) appends the round to ``history.jsonl`` and rewrites a summary,
O(1) per round. For a cheap strategy (a stub with the App's round record and a d x d estimate,
no federation: the checkpoint is all the cost) over ``--rounds`` rounds this times

* ``none``: no checkpoint (the floor);
* ``save``: result.json rewritten whole each round (before);
* ``checkpoint``: the summary plus one appended line each round (after);

and reports rounds/s over the whole run and over its last 10 %, the bytes written by the last
round's checkpoint, and whether a reader (``load_result``) of the running file sees every round.

    python simulations/bench/checkpoint_cost.py [--rounds 3000] [--d 10] [--quick]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, check, finish, log, parser, script_name, table

from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.results import HISTORY_FILE, RunResult, load_result

SCRIPT = script_name(__file__)


class Stub:
    """What :class:`Recorder` checkpoints: a d x d estimate."""

    def __init__(self, d: int) -> None:
        self.W = np.random.default_rng(0).normal(size=(d, d))

    def snapshot(self, result: RunResult) -> None:
        result.estimates, result.names = {"W": self.W, "A1": self.W}, {}


def run(mode: str, rounds: int, d: int, out: Path) -> dict[str, Any]:
    """``rounds`` rounds of the stub with checkpoints of kind ``mode``."""
    write = {"none": None, "save": lambda r: r.save(out),
             "checkpoint": lambda r: r.checkpoint(out)}[mode]
    recorder = Recorder("fdbnl", checkpoint=write, snapshot=Stub(d).snapshot)
    result = RunResult("fdbnl", {"run_config": {"dbn.num-rounds": rounds}})
    stamps = [time.perf_counter()]
    for i in range(1, rounds + 1):
        rec = {"round": i, "loss": 1.0 / i, "primal_residual": 0.5 / i, "n_clients": 5,
               "dropped": 0, "bytes_up": 40_000, "bytes_down": 20_000, "exchanges": 1,
               "seconds": 0.001}
        recorder.record_round(result, rec, show=False)
        stamps.append(time.perf_counter())
    tail = max(rounds // 10, 1)
    row = {"mode": mode, "rounds": rounds,
           "rounds_per_s": rounds / (stamps[-1] - stamps[0]),
           "last10_rounds_per_s": tail / (stamps[-1] - stamps[-1 - tail]),
           "seconds": stamps[-1] - stamps[0]}
    if write is not None:
        side = out / HISTORY_FILE
        row["result_json_bytes"] = (out / "result.json").stat().st_size
        row["history_jsonl_bytes"] = side.stat().st_size if side.exists() else 0
        doc = load_result(out)
        row["reader_sees_every_round"] = [h["round"] for h in doc["history"]] == \
            list(range(1, rounds + 1))
        result.status = "completed"
        result.checkpoint(out)  # the end: whole, as save writes it
        row["final_has_history"] = len(load_result(out)["history"]) == rounds
    return row


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--d", type=int, default=10, help="variables (the estimate is d x d)")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 300
    clock = Clock()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("none", "save", "checkpoint"):
            rows.append(run(mode, args.rounds, args.d, Path(tmp) / mode))
            r = rows[-1]
            log(f"{mode:10s} {r['rounds_per_s']:9.1f} rounds/s, last 10 % "
                f"{r['last10_rounds_per_s']:9.1f} rounds/s ({r['seconds']:.1f} s)")
    log("\n" + table(["mode", "rounds", "rounds/s", "rounds/s (last 10 %)", "result.json B"],
                     [[r["mode"], r["rounds"], f"{r['rounds_per_s']:.1f}",
                       f"{r['last10_rounds_per_s']:.1f}", r.get("result_json_bytes", "-")]
                      for r in rows]))
    by = {r["mode"]: r for r in rows}
    first = run("checkpoint", max(args.rounds // 10, 10), args.d, Path(tempfile.mkdtemp()))
    checks = {
        "checkpoint: last 10 % of the rounds as fast as the first run's (within 2x)":
            check(by["checkpoint"]["last10_rounds_per_s"] * 2 >= first["last10_rounds_per_s"]),
        "checkpoint: result.json does not grow with the rounds (within 1 KB)":
            check(by["checkpoint"]["result_json_bytes"] <= first["result_json_bytes"] + 1024),
        "checkpoint: faster than save over the run":
            check(by["checkpoint"]["rounds_per_s"] > by["save"]["rounds_per_s"]),
        "a running file's reader sees every round; the end is whole":
            check(all(r.get("reader_sees_every_round", True) and r.get("final_has_history", True)
                      for r in rows)),
    }
    finish(SCRIPT, args, clock, checks, f"checkpoint cost over {args.rounds} rounds",
           {"rows": rows, "short_run": first,
            "speedup": by["checkpoint"]["rounds_per_s"] / by["save"]["rounds_per_s"]})


if __name__ == "__main__":
    main()
