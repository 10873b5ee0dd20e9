"""The ServerApp: run config ``algorithm`` selects the family's App glue through the registry;
the run config is checked (:func:`fedcausal_flwr.appconfig.check`) and the glue builds the
strategy from its section with validated settings before any node is contacted."""

from __future__ import annotations

import traceback
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.appconfig import check, glue, outputs_root, run_dir, view
from fedcausal_flwr.plots import plots_failed, save_with_plots
from fedcausal_flwr.results import RunResult, inside
from fedcausal_flwr.threads import limit_blas_threads

app = ServerApp()


def output_dir(rc: dict[str, Any], algorithm: str) -> Path:
    """``<outputs>/<run-name>``; run-name defaults to ``<algorithm>-<timestamp>``.

    A ``run-name`` that is not a plain folder name (``/``, ``..``, absolute, a leading dot)
    raises a ValueError naming the key (:func:`fedcausal_flwr.appconfig.run_dir`): nothing is
    ever written outside ``outputs``.
    """
    return run_dir(rc, algorithm)


def run(grid: Grid, rc: dict[str, Any]) -> RunResult:
    """The App's run: build the strategy, run it, save ``result.json`` and the plots.

    Every failure after the run config is read (bad settings or data, a strategy crash) still
    writes result.json with ``status`` ``"failed: <error>"`` before it is raised; plot and
    truth failures are recorded in ``errors`` and never lose the result. A bad ``run-name``
    is recorded the same way, under ``<outputs>/<algorithm>-<timestamp>`` (never where it
    points), then raised. Every write is checked to lie under the resolved ``outputs``.
    """
    algorithm = str(rc.get("algorithm", "fdbnl"))
    root = outputs_root(rc)
    name_error: ValueError | None = None
    try:
        out = output_dir(rc, algorithm)
    except ValueError as e:  # the failure record goes to <outputs>/<algorithm>-<timestamp>
        name_error, out = e, output_dir({**rc, "run-name": ""}, algorithm)
    try:
        if name_error is not None:
            raise name_error
        module = glue(algorithm)
        check(algorithm, rc)  # a key without its section, or of another section, fails here
        section = view(algorithm, rc)
        strategy = module.strategy(algorithm, section)  # validates settings: before any node
    except BaseException as e:
        status = (f"failed: {type(e).__name__}: {e}" if isinstance(e, Exception)
                  else f"interrupted: {type(e).__name__}")
        RunResult(algorithm, {"run_config": rc}, status=status).save(out, within=root)
        log(ERROR, "%s %s; saved to %s", algorithm, status, out / "result.json")
        raise

    def checkpoint(res: RunResult) -> None:
        res.config = {"run_config": rc, "strategy": strategy.config()}
        res.checkpoint(out, within=root)  # running: O(1) per round (history.jsonl); the end: whole

    strategy.checkpoint = checkpoint
    result = strategy.start(grid=grid)  # on an exception it has saved "failed: ..." first
    result.config = {"run_config": rc, "strategy": strategy.config()}
    if hasattr(module, "truth"):
        try:
            result.truth = module.truth(algorithm, section)
        except Exception as e:  # noqa: BLE001 - the truth only feeds the plot
            result.errors.append(f"truth for the plot: {type(e).__name__}: {e}")
            log(ERROR, "truth for the plot failed: %s", traceback.format_exc())
    path = save_with_plots(result, inside(out, root))
    if hasattr(module, "save_plots"):  # an algorithm's own figures, beside result.json
        if plots_failed(result, [("save_plots", lambda: module.save_plots(algorithm, section,
                                                                            result, out))]):
            path = result.save(out, within=root)
    log(INFO, "%s %s after %d rounds in %.1fs", algorithm, result.status,
        result.timing.get("rounds", 0), result.timing.get("wall_s", 0.0))
    log(INFO, "final metrics: %s", {k: v for k, v in result.metrics.items() if k != "dropped"})
    log(INFO, "result saved to %s", path)
    return result


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Build the configured strategy, run it, save ``result.json`` and plots (:func:`run`)."""
    limit_blas_threads()
    run(grid, dict(context.run_config))
