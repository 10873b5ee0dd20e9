"""The ServerApp: run config ``algorithm`` selects the family's App glue through the registry;
the run config is checked (:func:`fedcausal_flwr.appconfig.check`) and the glue builds the
strategy from its section with validated settings before any node is contacted."""

from __future__ import annotations

import os
import tempfile
import traceback
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV, check, glue, outputs_root, run_dir, view
from fedcausal_flwr.plots import plots_failed, save_with_plots
from fedcausal_flwr.results import RunResult, inside
from fedcausal_flwr.threads import limit_blas_threads

app = ServerApp()


class OutputsUnwritable(RuntimeError):
    """The outputs root (or the run's folder under it) cannot be written on this host."""


UNWRITABLE_RECORDS = "fedcausal-flwr-unwritable-outputs"
"""Where, under the system's temporary folder, the status of a run whose outputs root cannot be
written is recorded instead (``<tmp>/<this>/<run folder>/result.json``)."""


def output_dir(rc: dict[str, Any], algorithm: str) -> Path:
    """``<outputs>/<run-name>`` under the operator's outputs root
    (:func:`fedcausal_flwr.appconfig.outputs_root`); run-name defaults to
    ``<algorithm>-<timestamp>``.

    A ``run-name`` that is not a plain folder name (``/``, ``..``, absolute, a leading dot),
    or an ``outputs`` that leads out of the root, raises a ValueError naming the key
    (:func:`fedcausal_flwr.appconfig.run_dir`): nothing is ever written outside the root.
    """
    return run_dir(rc, algorithm)


def writable(out: Path, root: Path) -> None:
    """Make the run's folder ``out``; an :class:`OutputsUnwritable` naming the root and who
    sets it when it cannot be made or written (not an uncaught FileNotFoundError)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(f"no write permission on {out}")
    except OSError as e:
        raise OutputsUnwritable(
            f"the outputs root {root} cannot be written on the ServerApp host "
            f"({type(e).__name__}: {e}); its operator sets it with {OUTPUTS_ROOT_ENV} (default: "
            "./outputs of the ServerApp), the run config only names a folder beneath it"
            ) from None


def record_elsewhere(result: RunResult, out: Path) -> Path | None:
    """Save ``result`` (a failure record) under the temporary folder's
    :data:`UNWRITABLE_RECORDS` when its own folder cannot be written; its path, or None."""
    base = Path(tempfile.gettempdir()) / UNWRITABLE_RECORDS
    try:
        return result.save(base / out.name, within=base)
    except (OSError, ValueError):
        return None


def run(grid: Grid, rc: dict[str, Any]) -> RunResult:
    """The App's run: build the strategy, run it, save ``result.json`` and the plots.

    Every failure after the run config is read (bad settings or data, a strategy crash) still
    writes result.json with ``status`` ``"failed: <error>"`` before it is raised; plot and
    truth failures are recorded in ``errors`` and never lose the result. A bad ``run-name``
    or ``outputs`` is recorded the same way, under ``<root>/<algorithm>-<timestamp>`` (never
    where it points), then raised. Every write is checked to lie under the operator's outputs
    root (:func:`fedcausal_flwr.appconfig.outputs_root`). A root that cannot be written fails
    with :class:`OutputsUnwritable` before any node is asked, its status recorded under the
    temporary folder's :data:`UNWRITABLE_RECORDS` (and logged).
    """
    algorithm = str(rc.get("algorithm", "fdbnl"))
    root = outputs_root()
    name_error: ValueError | None = None
    try:
        out = output_dir(rc, algorithm)
    except ValueError as e:  # the failure record: <outputs>/<algorithm>-<timestamp>, or under
        name_error = e  # the root itself when outputs is the bad key
        try:
            out = run_dir({**rc, "run-name": ""}, algorithm, root)
        except ValueError:
            out = run_dir({"run-name": ""}, algorithm, root)
    try:
        writable(out, root)
    except OutputsUnwritable as e:
        status = f"failed: {type(e).__name__}: {e}"
        where = record_elsewhere(RunResult(algorithm, {"run_config": rc}, status=status), out)
        log(ERROR, "%s %s; %s", algorithm, status, f"status recorded in {where}" if where
            else "the status could not be recorded in any folder")
        raise
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
