"""ServerApp memory over the App's default 700 VFedCD epochs (issue 11, item 9).

Runs the App's own strategy (``app.vertical.strategy``, the App's defaults but
``he-backend="mock"``, a small ``d`` and ``n``) against the App's ClientApp on the in-process
Grid, with a per-epoch ``result.json`` checkpoint as the ServerApp writes it, and records the
process's resident set size (``/proc/self/status`` VmRSS, or ``resource`` peak RSS elsewhere)
every ``--every`` epochs, plus the wire log's message count and the number of full entries it
keeps. The parties run in the same process (their memory is in the RSS too); the in-process
Grid's own lists of every message (test scaffolding a real SuperLink does not keep) are
cleared after each epoch. ``--audit`` keeps every message in ``wire_log`` (what the strategy
did before it was bounded); to measure older code, run this script with its checkout first
on ``PYTHONPATH``. The mini-batch steps per epoch, not ``d``, set the wire log's growth (30
messages a step with 3 parties): the default ``n=125`` (100 train rows, 7 steps of 16, 0.36 s
an epoch on the shared 2-core machine) runs 700 epochs in about 4 minutes; the App's
``n=1000`` has 50 steps.

    python simulations/bench/vfedcd_memory.py [--epochs 700] [--n 125] [--d 6] [--every 25]
        [--audit] [--out results/vfedcd_memory.json]
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import _sims  # noqa: F401 - simulations/ on sys.path
from flwr.common.config import flatten_dict
from harness import Clock, log, parser, settings, write_results

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical import app as vertical

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                                        .read_text())["tool"]["flwr"]["app"]["config"])


def rss_mb() -> float:
    """Resident set size of this process in MB (VmRSS; peak RSS where /proc is absent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def code_version() -> str:
    """The checkout the measured package was imported from, with its commit."""
    root = Path(sys.modules["fedcausal_flwr"].__file__).resolve().parents[1]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    return f"{root} @ {head or '?'}"


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--epochs", type=int, default=700, help="epochs (App default 700)")
    ap.add_argument("--n", type=int, default=125, help="samples (80%% train rows)")
    ap.add_argument("--d", type=int, default=6, help="variables (3 parties)")
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--every", type=int, default=25, help="record RSS every N epochs")
    ap.add_argument("--audit", action="store_true",
                    help="keep every message in wire_log (the unbounded behaviour)")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.n, args.every = 20, 100, 5
    rc = {**APP_CONFIG, "algorithm": "vfedcd", "vertical.he-backend": "mock",
          "vertical.d": args.d, "vertical.n": args.n, "vertical.num-epochs": args.epochs,
          "node-wait-s": 5.0,
          "vertical.vfedcd-accept-backends": "mock"}  # the parties consent to the mock backend
    grid = InProcessGrid(client_app, args.parties, rc)
    strategy = vertical.strategy("vfedcd", view("vfedcd", rc))
    if args.audit:
        strategy.wire_log.audit = True
    series: list[dict] = []
    clock = Clock()
    out_dir = Path(tempfile.mkdtemp(prefix="vfedcd_memory_"))

    def sample(epoch: int) -> None:
        gc.collect()
        row = {"epoch": epoch, "rss_mb": round(rss_mb(), 1), "seconds": round(clock(), 1),
               "wire_messages": len(strategy.wire_log),
               "wire_entries": len(getattr(strategy.wire_log, "entries", strategy.wire_log))}
        series.append(row)
        log(f"epoch {epoch:4d}  RSS {row['rss_mb']:8.1f} MB  wire messages "
            f"{row['wire_messages']:8d}  kept entries {row['wire_entries']:8d}  "
            f"{row['seconds']:7.1f} s")

    def checkpoint(result) -> None:  # what the ServerApp does after every epoch
        result.checkpoint(out_dir)
        grid.sent.clear()
        grid.received.clear()
        epoch = len(result.history)
        if result.status == "running" and epoch and (epoch % args.every == 0 or epoch == 1):
            sample(epoch)

    strategy.checkpoint = checkpoint
    sample(0)
    result = strategy.start(grid=grid)
    train = round(args.n * (1 - float(rc["vertical.test-fraction"])))
    steps = -(-train // int(rc["vertical.batch"]))
    rss = [r["rss_mb"] for r in series if r["epoch"] >= 1]
    first_half = [r["rss_mb"] for r in series if 1 <= r["epoch"] <= args.epochs // 2]
    summary = {
        "status": result.status, "epochs": len(result.history), "steps_per_epoch": steps,
        "seconds_per_epoch": round(clock() / max(len(result.history), 1), 3),
        "rss_epoch1_mb": rss[0], "rss_last_mb": rss[-1], "rss_max_mb": max(rss),
        "growth_after_epoch1_mb": round(rss[-1] - rss[0], 1),
        "growth_second_half_mb": round(rss[-1] - max(first_half), 1),
        "growth_per_100_epochs_mb": round(100 * (rss[-1] - rss[0])
                                          / max(series[-1]["epoch"] - 1, 1), 2),
        "wire_messages": len(strategy.wire_log), "audit": args.audit,
        "code": code_version(),
    }
    log(f"\n{summary}")
    write_results("vfedcd_memory" + ("_audit" if args.audit else ""),
                  {"settings": settings(args), "summary": summary, "series": series},
                  args.out)
    for p in out_dir.iterdir():
        p.unlink()
    os.rmdir(out_dir)
    log(f"done in {time.strftime('%M:%S', time.gmtime(clock()))}")


if __name__ == "__main__":
    main()
