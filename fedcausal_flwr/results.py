"""The result contract: ``<outputs>/<run-name>/result.json`` plus PNG plots beside it.

:class:`RunResult` is what a run produced; its labelled views (edges, pandas, networkx) come
from :class:`~fedcausal_flwr.results_views.ResultViews`, its files (atomic writes, reading a
running checkpoint back, whether the writer is alive) from :mod:`fedcausal_flwr.results_files`,
whose names this module also exports. ``status`` in result.json is one of

- ``"running"``: rounds go on; after every round (a checkpoint, :meth:`RunResult.checkpoint`)
  the round is appended to ``history.jsonl`` and result.json is rewritten as a summary
  without ``history`` (large estimates go to ``arrays.npz``; :func:`load_result` merges
  both back; the end writes it whole);
- ``"completed"``: the run reached its end (stop rule or round budget);
- ``"stopped: <reason>"``: it ended early (too few valid replies, a party the protocol cannot do
  without failed); finished rounds are kept;
- ``"failed: <ExceptionType>: <message>"``: an error after the run config was read (bad
  settings, bad data, a strategy crash); finished rounds are kept;
- ``"interrupted: <ExceptionType>"``: the ServerApp was stopped by KeyboardInterrupt /
  SystemExit and could still write.

Every write stamps ``process`` = ``{pid, host, pid_start, heartbeat, stale_after_s}``: who wrote
the file and when (``heartbeat``, Unix time). A reader (:func:`load_result`, :func:`run_status`)
reports ``"interrupted"`` when the file says ``running`` but its writer is gone: on the same
host, when the pid is not alive (or a zombie, or a different process now has that pid); from
another host, when the heartbeat is older than ``stale_after_s`` (the larger of
:data:`STALE_AFTER_S` and three times the longest finished round). Only ``"completed"`` means
the run finished normally (:func:`is_completed`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.results_files import (
    ARRAYS_FILE,
    HISTORY_FILE,
    INLINE_NUMBERS,
    LATEST,
    STALE_AFTER_S,
    _as_array,
    _numeric,
    _write_json,
    _write_npz,
    inside,
    is_completed,
    jsonable,
    load_result,
    new_run_folder,
    point_latest,
    process_info,
    result_folder,
    run_status,
    stale_after,
    writer_alive,
)
from fedcausal_flwr.results_views import Layer, ResultViews, labels_or_default, run_setting

__all__ = ["ARRAYS_FILE", "HISTORY_FILE", "INLINE_NUMBERS", "LATEST", "STALE_AFTER_S", "Layer",
           "ResultViews", "RunResult", "inside", "is_completed", "jsonable",
           "labels_or_default", "load_result", "new_run_folder", "point_latest",
           "process_info", "result_folder", "run_setting", "run_status", "stale_after",
           "writer_alive"]


def _large_arrays(result: RunResult) -> dict[str, np.ndarray]:
    """The numeric arrays of ``result``'s estimates and truth ("estimates/W", ...) when they
    hold more than :data:`INLINE_NUMBERS` numbers in all, else {}."""
    out = {f"{part}/{k}": np.asarray(v) for part in ("estimates", "truth")
           for k, v in getattr(result, part).items()
           if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.ndim >= 1}
    return out if sum(v.size for v in out.values()) > INLINE_NUMBERS else {}


@dataclass
class RunResult(ResultViews):
    """What one federated (or reference) run produced.

    ``estimates`` maps names to learned matrices; ``truth`` (optional) maps the same names to
    ground truth for plots; ``status`` is ``"completed"`` or says why the run stopped early
    (the module docstring lists every value); ``errors`` holds problems after the run that did
    not change its outcome (a plot that failed); ``process`` says which process writes it.

    ``names`` labels the estimates: ``{estimate: labels}`` where labels is one list (rows and
    columns) or ``{"rows": [...], "cols": [...]}``; ``variables`` (and per algorithm
    ``states``, ``inputs``, ``measurements``, ``x``, ``z``, ``y``) name what the data hold.
    Labelled views: :meth:`edges` (pure Python), :meth:`to_pandas`, :meth:`to_networkx`,
    :meth:`threshold`; FedIV: :meth:`predict`. :meth:`edges` and :meth:`to_networkx` apply
    the algorithm's own thresholds by default (:meth:`thresholds`). Read a saved run with
    :meth:`load`.
    """

    algorithm: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    estimates: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"
    evaluations: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    process: dict[str, Any] = field(default_factory=lambda: process_info())
    names: dict[str, Any] = field(default_factory=dict)
    status_detail: str = ""
    _appended: tuple[Path, int, float] | None = field(default=None, init=False, repr=False,
                                                      compare=False)

    # ---- Flower's ``Result`` interface -----------------------------------------------------
    @property
    def arrays(self) -> Any:
        """The final estimates as Flower's ``ArrayRecord`` (numeric arrays only, by name)."""
        from flwr.app import Array, ArrayRecord

        out = {}
        for name, value in self.estimates.items():
            a = np.asarray(value) if not isinstance(value, list) or _numeric(value) else None
            if a is not None and a.dtype.kind in "biuf" and a.size:
                out[name] = Array(np.ascontiguousarray(a))
        return ArrayRecord(out)

    @property
    def train_metrics_clientapp(self) -> dict[int, Any]:
        """Each round's history row (numbers only) as Flower's ``MetricRecord``."""
        return {int(r.get("round", i + 1)): _metric_record(r)
                for i, r in enumerate(self.history)}

    @property
    def evaluate_metrics_clientapp(self) -> dict[int, Any]:
        """Empty: clients never evaluate on their own data here."""
        return {}

    @property
    def evaluate_metrics_serverapp(self) -> dict[int, Any]:
        """The server-side evaluation (``evaluate_fn``) of each round as ``MetricRecord``."""
        return {r: _metric_record(m) for r, m in self.evaluations.items()}

    def flower_result(self) -> Any:
        """This run as Flower's ``flwr.serverapp.strategy.Result`` (what Flower's own
        ``Strategy.start`` returns), built from :attr:`arrays` and the metrics records above."""
        from flwr.serverapp.strategy import Result

        return Result(arrays=self.arrays, train_metrics_clientapp=self.train_metrics_clientapp,
                      evaluate_metrics_clientapp=self.evaluate_metrics_clientapp,
                      evaluate_metrics_serverapp=self.evaluate_metrics_serverapp)

    def to_dict(self, history: bool = True) -> dict[str, Any]:
        """The JSON document of the result contract (``history=False``: without ``history``
        and its ``stale_after_s`` bound, :meth:`checkpoint`'s summary)."""
        doc = jsonable({
            "algorithm": self.algorithm, "status": self.status, "config": self.config,
            "metrics": self.metrics, "history": self.history if history else None,
            "estimates": self.estimates,
            "timing": self.timing, "truth": self.truth, "errors": self.errors,
            "names": self.names,
            "process": {**self.process, "heartbeat": time.time(),
                        "stale_after_s": stale_after(self.history) if history else None},
            **({"status_detail": self.status_detail} if self.status_detail else {}),
        })
        if not history:
            del doc["history"]
        return doc

    def save(self, directory: str | Path, plots: bool = False,
             within: str | Path | None = None) -> Path:
        """Write ``result.json`` atomically into ``directory`` and return its path.

        ``plots=True`` also draws the App's ``graphs.png`` and ``history.png`` beside it
        (:func:`fedcausal_flwr.plots.save_with_plots`: result.json first; a plot that fails
        is recorded in ``errors``, never raised). ``within`` (the App's resolved ``outputs``):
        a ``directory`` that does not resolve to a folder under it is refused (ValueError)
        before anything is written.
        """
        if within is not None:
            directory = inside(directory, within)
        if plots:
            from fedcausal_flwr.plots import save_with_plots

            return save_with_plots(self, directory)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "result.json"
        _write_json(path, self.to_dict())
        (directory / HISTORY_FILE).unlink(missing_ok=True)  # the full history is in path now
        (directory / ARRAYS_FILE).unlink(missing_ok=True)  # and every array
        self._appended = None
        return path

    def save_run(self, base: str | Path, plots: bool = False,
                 within: str | Path | None = None) -> Path:
        """Write this run into a folder of its own under ``base`` and return its result.json.

        ``base`` is the run-name folder (``<outputs>/<run-name>``); the run gets
        ``<base>/<timestamp>/`` (:func:`~fedcausal_flwr.results_files.new_run_folder`) with
        its result.json and, ``plots=True``, its PNGs (:meth:`save`). Only a completed run
        moves ``<base>/latest`` to its folder, so ``RunResult.load(base)`` reads the newest
        completed run whatever failed or stopped since. ``within``: as in :meth:`save`.
        """
        base = inside(base, within) if within is not None else Path(base)
        folder = new_run_folder(base)
        path = self.save(folder, plots=plots)
        if is_completed(self.status):
            point_latest(base, folder)
        return path

    def checkpoint(self, directory: str | Path, within: str | Path | None = None) -> Path:
        """Keep a running result in ``directory`` at a cost that does not grow with its rounds.

        ``status == "running"``: the rounds finished since the last checkpoint are appended to
        ``history.jsonl`` (one JSON line per round) and ``result.json`` is rewritten as a
        summary without ``history``: ``history_file`` names the side file, ``history_rounds``
        counts its rounds, ``last_round`` is the latest round's record; everything else
        (status, process heartbeat, config, estimates, metrics, timing) as :meth:`save`
        writes it. :func:`load_result` and :meth:`load` merge the side file back, so a
        reader sees the same document as from :meth:`save`. Any other status: :meth:`save`
        (the full result.json, as always at the end; the side file is removed). ``within``:
        as in :meth:`save`.
        """
        if within is not None:
            directory = inside(directory, within)
        if self.status != "running":
            return self.save(directory)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        side = directory / HISTORY_FILE
        state = self._appended
        n = len(self.history)
        if state is None or state[0] != side or state[1] > n:  # a new file: from round 1
            state = (side, 0, STALE_AFTER_S)
            mode = "w"
        else:
            mode = "a"
        new = self.history[state[1]:]
        with side.open(mode) as f:
            f.writelines(json.dumps(jsonable(r)) + "\n" for r in new)
        stale = max([state[2]] + [stale_after([r]) for r in new])
        self._appended = (side, n, stale)
        big = _large_arrays(self)
        if big:
            _write_npz(directory / ARRAYS_FILE, big)
        else:
            (directory / ARRAYS_FILE).unlink(missing_ok=True)
        est, truth = self.estimates, self.truth
        try:  # the summary without what went to the binary file
            self.estimates = {k: v for k, v in est.items() if f"estimates/{k}" not in big}
            self.truth = {k: v for k, v in truth.items() if f"truth/{k}" not in big}
            doc = self.to_dict(history=False)
        finally:
            self.estimates, self.truth = est, truth
        doc["process"]["stale_after_s"] = stale
        doc.update({"history_file": HISTORY_FILE, "history_rounds": n,
                    "last_round": jsonable(self.history[-1]) if n else None})
        if big:
            doc["arrays_file"] = ARRAYS_FILE
        path = directory / "result.json"
        _write_json(path, doc)
        return path


    # ---- reading (the labelled views are ResultViews') -----------------------------------
    @classmethod
    def load(cls, path: str | Path, stale_after_s: float | None = None) -> RunResult:
        """A saved ``result.json`` (its directory or the file) as a :class:`RunResult`.

        Numeric matrices come back as numpy arrays; the status is read as
        :func:`load_result` reads it (``"interrupted"``, with ``status_detail``, when the
        file says running but its writer is gone). ``names`` saved as one list (shared by
        every graph estimate) is kept as it is; :meth:`labels` reads both forms.
        """
        doc = load_result(path, stale_after_s)
        est = {k: _as_array(v) for k, v in (doc.get("estimates") or {}).items()}
        truth = {k: _as_array(v) for k, v in (doc.get("truth") or {}).items()}
        return cls(str(doc.get("algorithm", "")), doc.get("config") or {},
                   metrics=doc.get("metrics") or {}, history=doc.get("history") or [],
                   estimates=est, timing=doc.get("timing") or {}, truth=truth,
                   status=str(doc.get("status", "")), errors=list(doc.get("errors") or []),
                   process=doc.get("process") or {}, names=doc.get("names") or {},
                   status_detail=str(doc.get("status_detail", "")))


def _metric_record(row: dict[str, Any]) -> Any:
    """The int/float entries of ``row`` as a ``MetricRecord``."""
    from flwr.app import MetricRecord

    return MetricRecord({k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                         for k, v in row.items()
                         if isinstance(v, (int, float, np.integer, np.floating))
                         and not isinstance(v, (bool, np.bool_))})


