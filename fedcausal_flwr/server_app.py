"""The ServerApp: run config ``algorithm`` selects the App glue (:mod:`fedcausal_flwr.app`),
which builds the strategy with validated settings before any node is contacted."""

from __future__ import annotations

import time
from logging import INFO
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.app import glue
from fedcausal_flwr.results import RunResult

app = ServerApp()


def output_dir(rc: dict[str, Any], algorithm: str) -> Path:
    """``<outputs>/<run-name>``; run-name defaults to ``<algorithm>-<timestamp>``."""
    name = str(rc.get("run-name") or f"{algorithm}-{time.strftime('%Y%m%d-%H%M%S')}")
    return Path(str(rc.get("outputs", "outputs"))).expanduser().resolve() / name


def save_with_plots(result: RunResult, out: Path) -> Path:
    """Write result.json and the PNGs of learned vs true graphs and of the history."""
    from fedcausal_flwr.plots import plot_graphs, plot_history

    path = result.save(out)
    shown = {k: v for k, v in result.estimates.items() if k in ("W", "A")}
    truth = {k: v for k, v in result.truth.items() if k in shown}
    if shown:
        plot_graphs(shown, truth, out / "graphs.png", title=f"{result.algorithm}: learned vs true")
    if result.history:
        keys = [k for k in ("h", "primal_residual", "shd_w", "shd_a", "auroc", "loss")
                if k in result.history[-1]]
        plot_history(result.history, keys, out / "history.png", title=result.algorithm)
    return path


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Build the configured strategy, run it, save ``result.json`` and plots."""
    rc = dict(context.run_config)
    algorithm = str(rc.get("algorithm", "fdbnl"))
    module = glue(algorithm)
    strategy = module.strategy(algorithm, rc)  # validates the settings: fails before any node
    out = output_dir(rc, algorithm)
    strategy.checkpoint = lambda res: res.save(out)
    result = strategy.start(grid=grid)
    result.config = {"run_config": rc, "strategy": result.config}
    if hasattr(module, "truth"):
        result.truth = module.truth(algorithm, rc)
    path = save_with_plots(result, out)
    if hasattr(module, "save_plots"):  # an algorithm's own figures, beside result.json
        module.save_plots(algorithm, rc, result, out)
    log(INFO, "%s %s after %d rounds in %.1fs", algorithm, result.status,
        result.timing.get("rounds", 0), result.timing.get("wall_s", 0.0))
    log(INFO, "final metrics: %s", {k: v for k, v in result.metrics.items() if k != "dropped"})
    log(INFO, "result saved to %s", path)
