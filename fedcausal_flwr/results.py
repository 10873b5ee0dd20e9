"""The result contract: ``<outputs>/<run-name>/result.json`` plus PNG plots beside it.

``status`` in result.json is one of

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

import copy
import json
import math
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ARRAYS_FILE = "arrays.npz"
"""A running result's large estimates and truth, binary, beside its summary ``result.json``
(:meth:`RunResult.checkpoint`); merged back by :func:`load_result`."""
INLINE_NUMBERS = 100_000
"""Estimates and truth up to this many numbers in all stay inside a running checkpoint's
``result.json``; beyond, they go to :data:`ARRAYS_FILE` (JSON of a d = 1,000 graph costs
seconds per round, the binary file milliseconds)."""
HISTORY_FILE = "history.jsonl"
"""A running result's rounds, one JSON line each, beside its summary ``result.json``
(:meth:`RunResult.checkpoint`); merged back by :func:`load_result`."""

STALE_AFTER_S = 1800.0
"""Cross-host bound: a ``running`` file whose heartbeat is older than this (or than three times
its longest round, whichever is larger) is read as interrupted."""


def jsonable(x: Any) -> Any:
    """Nested lists/dicts of plain numbers; non-finite floats become None."""
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def inside(directory: str | Path, root: str | Path) -> Path:
    """``directory`` resolved, or a ValueError if it is not strictly under ``root`` (resolved:
    neither ``..`` nor a symbolic link leads a result out of ``outputs``)."""
    d, r = Path(directory).expanduser().resolve(), Path(root).expanduser().resolve()
    if d == r or not d.is_relative_to(r):
        raise ValueError(f"refusing to write results to {d}: not under the outputs directory {r}")
    return d


def _large_arrays(result: RunResult) -> dict[str, np.ndarray]:
    """The numeric arrays of ``result``'s estimates and truth ("estimates/W", ...) when they
    hold more than :data:`INLINE_NUMBERS` numbers in all, else {}."""
    out = {f"{part}/{k}": np.asarray(v) for part in ("estimates", "truth")
           for k, v in getattr(result, part).items()
           if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.ndim >= 1}
    return out if sum(v.size for v in out.values()) > INLINE_NUMBERS else {}


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        np.savez(f, **arrays)
    tmp.replace(path)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically (a reader sees the old file or the new one)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


@dataclass
class RunResult:
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


    # ---- reading and labelled views --------------------------------------------------------
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

    def labels(self, estimate: str) -> tuple[list[str], list[str]] | None:
        """``(row labels, column labels)`` of a 2-D estimate (of each matrix of a stacked
        one, e.g. PFDBNL's ``W_local``), or None when the result has no names for it."""
        names = self.names
        if isinstance(names, list):
            return (list(names), list(names)) if estimate in _graph_keys(self) else None
        lab = names.get(estimate) if isinstance(names, dict) else None
        if isinstance(lab, list):
            return list(lab), list(lab)
        if isinstance(lab, dict) and "rows" in lab and "cols" in lab:
            return list(lab["rows"]), list(lab["cols"])
        return None

    def variables(self) -> list[str]:
        """The node labels of the learned graph (the variables, or FedGC/FedCF's states)."""
        layers = self.layers()
        if not layers:
            return []
        seen: dict[str, None] = {}
        for layer in layers:
            seen.update(dict.fromkeys(layer.sources))
            seen.update(dict.fromkeys(layer.targets))
        return list(seen)

    def layers(self, client: int | None = None) -> list[Layer]:
        """The learned graph as labelled adjacency layers, each oriented ``[source, target]``
        (rows cause, columns effect) with its lag: DBNs ``W`` (lag 0) and ``A1``..``Ap``;
        VFedCD ``B``; FedGC/FedCF ``A_hat`` (lag 1, transposed from the state-space
        convention ``x_t = A x_{t-1}``) and FedCF's ``B_hat`` (inputs -> states, lag 1).
        ``client``: PFDBNL's personalized graph of that client id."""
        return _view(self).layers(self, client)

    def thresholds(self) -> dict[str, float]:
        """``{layer: tau}``: the algorithm's own threshold of each layer of :meth:`layers`,
        which :meth:`edges` and :meth:`to_networkx` apply by default. FDBNL/PFDBNL
        ``tau_w`` (``W``) and ``tau_a`` (``A1``..``Ap``), VFedCD ``tau`` (``B``), FedGC/FedCF
        0 (no graph threshold in their settings): the run's own settings
        (``config["strategy"]`` as the App saves it, or ``config`` as a strategy's ``start``
        returns it), else the defaults of the algorithm's settings class."""
        rule = getattr(_view(self), "thresholds", None)
        return {} if rule is None else {k: float(v) for k, v in rule(self).items()}

    def edges(self, tau: float | None = None, client: int | None = None
              ) -> list[tuple[str, str, float, int]]:
        """``(source, target, weight, lag)`` of every entry with ``|weight| > tau`` (pure
        Python: no pandas or networkx needed). Self-loops at lag 0 are left out, as are
        unidentified entries (NaN); a required edge (prior knowledge) is kept at any ``tau``.

        ``tau`` None (default): each layer's own threshold (:meth:`thresholds`, e.g. FDBNL's
        ``tau_w``/``tau_a``); a number applies to every layer (``tau=0.0``: every nonzero
        entry).
        """
        taus = self.thresholds() if tau is None else {}
        out = []
        for layer, i, j, s, t in self._entries(client):
            cut = float(tau) if tau is not None else taus.get(layer.name, 0.0)
            w = float(layer.matrix[i, j])
            kept = layer.required is not None and bool(layer.required[i, j])
            if np.isfinite(w) and (abs(w) > cut or kept):
                out.append((s, t, w, layer.lag))
        return out

    def _entries(self, client: int | None = None
                 ) -> Iterator[tuple[Layer, int, int, str, str]]:
        """``(layer, i, j, source, target)`` of every entry of :meth:`layers` but the
        self-loops at lag 0."""
        for layer in self.layers(client):
            for i, s in enumerate(layer.sources):
                for j, t in enumerate(layer.targets):
                    if not (layer.lag == 0 and s == t):
                        yield layer, i, j, s, t

    def frequencies(self, client: int | None = None) -> dict[tuple[str, str, int], float]:
        """``{(source, target, lag): frequency}``: the share of a replicated run's
        half-sample replicas whose graph holds each edge (empty for a run without them)."""
        return {(s, t, layer.lag): float(layer.frequency[i, j])
                for layer, i, j, s, t in self._entries(client) if layer.frequency is not None}

    def stable_edges(self, threshold: float | None = None, client: int | None = None
                     ) -> list[tuple[str, str, float, int, float]]:
        """``(source, target, weight, lag, frequency)`` of every edge whose frequency is at
        least ``threshold`` (default the run's ``stability_threshold``): the stable set of
        stability selection, whose expected false edges ``metrics["stability"]`` bounds."""
        pi = float(run_setting(self, "stability_threshold") if threshold is None
                   else threshold)
        if all(layer.frequency is None for layer in self.layers(client)):
            raise ValueError("no selection frequencies: run with replicas (e.g. "
                             "'replicas' = 20) to get them")
        return [(s, t, float(layer.matrix[i, j]), layer.lag, float(layer.frequency[i, j]))
                for layer, i, j, s, t in self._entries(client)
                if layer.frequency is not None and layer.frequency[i, j] >= pi]

    def to_pandas(self, client: int | None = None) -> dict[str, Any]:
        """``{layer: DataFrame}`` of :meth:`layers`: index = sources (cause), columns =
        targets (effect); DBNs: ``"W"`` (lag 0), ``"A1"``..``"Ap"``; a replicated run adds
        ``"<layer>_frequency"`` frames. Needs pandas (``pip install pandas``)."""
        pd = _optional("pandas")
        out = {}
        for layer in self.layers(client):
            frame = {"": layer.matrix}
            if layer.frequency is not None:
                frame["_frequency"] = layer.frequency
            for suffix, m in frame.items():
                out[layer.name + suffix] = pd.DataFrame(m, index=list(layer.sources),
                                                        columns=list(layer.targets))
        return out

    def to_networkx(self, tau: float | None = None, client: int | None = None,
                    multigraph: bool = False) -> Any:
        """The learned graph as a networkx ``DiGraph`` over the variable names (every
        variable is a node, edges from :meth:`edges` at ``tau``: default each layer's own
        threshold, :meth:`thresholds`), with edge attributes ``weight`` and ``lag``. A
        DiGraph holds one edge per pair: where several lags connect the same pair it keeps
        the strongest as ``weight``/``lag`` and all of them in ``weights``
        (``{lag: weight}``); ``multigraph=True`` gives a ``MultiDiGraph`` with one edge per
        lag (key = lag) instead. A replicated run adds ``frequency`` (of the edge's
        ``lag``, :meth:`frequencies`). ``G.graph["tau"]`` is the ``tau`` given, else the
        ``{layer: tau}`` applied. Needs networkx (``pip install networkx``)."""
        nx = _optional("networkx")
        G = nx.MultiDiGraph() if multigraph else nx.DiGraph()
        G.graph.update({"algorithm": self.algorithm,
                        "tau": self.thresholds() if tau is None else tau})
        G.add_nodes_from(self.variables())
        freq = self.frequencies(client)
        for s, t, w, lag in self.edges(tau, client):
            f = {"frequency": freq[(s, t, lag)]} if freq else {}
            if multigraph:
                G.add_edge(s, t, key=lag, weight=w, lag=lag, **f)
            elif G.has_edge(s, t):
                e = G.edges[s, t]
                e["weights"][lag] = w
                if abs(w) > abs(e["weight"]):
                    e.update(weight=w, lag=lag, **f)
            else:
                G.add_edge(s, t, weight=w, lag=lag, weights={lag: w}, **f)
        return G

    def threshold(self, tau: float) -> RunResult:
        """A copy whose graph estimates (those :meth:`layers` reads, and their personalized
        and thresholded variants) have every entry with ``|x| < tau`` set to 0 (required
        edges of prior knowledge kept); everything
        else (FedIV's network parameters, client ids) is kept as it is."""
        if not float(tau) >= 0:
            raise ValueError(f"threshold: tau = {tau!r}, need a number >= 0")
        out = copy.deepcopy(self)
        for key in _graph_keys(self):
            a = np.array(out.estimates[key], dtype=float)
            small = np.abs(a) < tau
            req = out.estimates.get(key.split("_")[0] + "_required")
            if req is not None and np.shape(req) == a.shape[-2:]:
                small &= ~np.asarray(req, dtype=bool)  # required edges stay
            a[small] = 0.0
            out.estimates[key] = a
        return out

    def predict(self, x: Any, selected: bool = True) -> np.ndarray:
        """The learned function at ``x`` (FedIV's g; see ``FedIV.predict``)."""
        view = _view(self)
        if not hasattr(view, "predict"):
            raise ValueError(f"predict is FedIV's (a learned function g); this is a "
                             f"{self.algorithm!r} result, a graph: see edges()/to_pandas()")
        return view.predict(self, x, selected)


class Layer(NamedTuple):
    """One labelled adjacency of a learned graph: ``matrix[i, j]`` is the weight of the edge
    ``sources[i] -> targets[j]`` at ``lag`` (NaN: unidentified, no site informs it);
    ``frequency[i, j]`` (a run with replicas) the share of replicas whose graph holds it;
    ``required[i, j]`` (a run with prior knowledge) an edge kept whatever its weight."""

    name: str
    lag: int
    matrix: np.ndarray
    sources: list[str]
    targets: list[str]
    frequency: np.ndarray | None = None
    required: np.ndarray | None = None


def _view(r: RunResult) -> Any:
    """The family module that lays out ``r``'s estimates (``<family>.view``)."""
    from fedcausal_flwr import registry

    alg = registry.ALGORITHMS.get(r.algorithm)
    if alg is None or not alg.has_module("view"):
        raise ValueError(f"no graph layout known for algorithm {r.algorithm!r}")
    return alg.module("view")


def _graph_keys(r: RunResult) -> list[str]:
    """Every numeric graph estimate of ``r``: the algorithm's graph keys and their variants
    (``W_thresholded``, ``W_local``, ``A_full``, ``dag`` ...)."""
    from fedcausal_flwr import registry

    alg = registry.ALGORITHMS.get(r.algorithm)
    if alg is None:
        return []
    base = alg.graphs
    extra = getattr(_view(r), "VARIANTS", ()) if alg.has_module("view") else ()
    return [k for k, v in r.estimates.items()
            if (k in base or k in extra or any(k.startswith(b + "_") for b in base))
            and not k.endswith(("_frequency", "_stable", "_required", "_forbidden",
                                "_unidentified", "_sites"))
            and np.asarray(v).dtype.kind in "biuf" and np.ndim(v) >= 2]


def run_setting(r: RunResult, name: str) -> Any:
    """Field ``name`` of the settings ``r`` ran with: ``config["strategy"]`` (the App's
    result.json), else ``config`` itself (what a strategy's ``start`` returns), else the
    default of the algorithm's settings class."""
    for where in (r.config.get("strategy"), r.config):
        if isinstance(where, dict) and where.get(name) is not None:
            return where[name]
    from fedcausal_flwr import registry

    return getattr(registry.get(r.algorithm).settings_class()(), name)


def labels_or_default(r: RunResult, key: str, shape: tuple[int, ...]
                      ) -> tuple[list[str], list[str]]:
    """The row and column labels of estimate ``key`` (``x0, x1, ...`` when unnamed)."""
    lab = r.labels(key)
    n, m = shape[-2], shape[-1]
    if lab is None or len(lab[0]) != n or len(lab[1]) != m:
        return [f"x{i}" for i in range(n)], [f"x{j}" for j in range(m)]
    return lab


def _optional(module: str) -> Any:
    """Import an optional dependency, or an ImportError saying how to install it."""
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as e:
        raise ImportError(f"this needs {module}, which fedcausal-flwr does not install by "
                          f"itself: pip install {module} (or pip install "
                          f"'fedcausal-flwr[graphs]'); RunResult.edges() needs nothing") from e


def _as_array(value: Any) -> Any:
    """A loaded estimate: a numpy array when it is a rectangular numeric list."""
    if isinstance(value, list) and value and _numeric(value):
        return np.asarray(value)
    return value


def _numeric(value: list) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except ValueError:  # ragged
        return False


def _metric_record(row: dict[str, Any]) -> Any:
    """The int/float entries of ``row`` as a ``MetricRecord``."""
    from flwr.app import MetricRecord

    return MetricRecord({k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                         for k, v in row.items()
                         if isinstance(v, (int, float, np.integer, np.floating))
                         and not isinstance(v, (bool, np.bool_))})


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks)`` of ``pid`` from ``/proc``, None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return fields[0], int(fields[19])


def process_info() -> dict[str, Any]:
    """This process as a result's writer: pid, host, and its start time (pid reuse check)."""
    stat = _proc_stat(os.getpid())
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "pid_start": stat[1] if stat else None}


def stale_after(history: list[dict[str, Any]]) -> float:
    """Seconds without a heartbeat after which another host reads a running file as dead."""
    rounds = [float(h["seconds"]) for h in history
              if isinstance(h.get("seconds"), (int, float)) and math.isfinite(h["seconds"])]
    return max([STALE_AFTER_S] + [3 * s for s in rounds])


def writer_alive(process: dict[str, Any], stale_after_s: float | None = None,
                 now: float | None = None) -> tuple[bool, str]:
    """Whether the process that wrote a result is still there, and why we think so.

    Same host: the pid must exist, not be a zombie and (where ``/proc`` tells) have the
    recorded start time. Another host (or no pid): the heartbeat must be younger than
    ``stale_after_s`` (default: the file's own ``stale_after_s``, else :data:`STALE_AFTER_S`).
    """
    now = time.time() if now is None else now
    beat = process.get("heartbeat")
    age = f"last heartbeat {now - beat:.0f} s ago" if isinstance(beat, (int, float)) else \
        "no heartbeat"
    pid, host = process.get("pid"), process.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, f"its process {pid} on {host} is gone ({age})"
        except PermissionError:
            pass  # exists, another user's
        stat = _proc_stat(pid)
        if stat is not None and stat[0] in ("Z", "X"):
            return False, f"its process {pid} on {host} has exited ({age})"
        start = process.get("pid_start")
        if stat is not None and start is not None and stat[1] != start:
            return False, f"its process {pid} on {host} is gone; the pid was reused ({age})"
        return True, f"process {pid} on {host} is alive ({age})"
    bound = float(stale_after_s if stale_after_s is not None
                  else process.get("stale_after_s") or STALE_AFTER_S)
    if not isinstance(beat, (int, float)) or now - beat > bound:
        return False, f"written on {host}, {age}, over the {bound:.0f} s bound"
    return True, f"written on {host}, {age}, within the {bound:.0f} s bound"


def run_status(doc: dict[str, Any], stale_after_s: float | None = None) -> str:
    """The status of a loaded result: the file's, or ``"interrupted"`` when it says running
    and its writer is gone (:func:`writer_alive`)."""
    status = str(doc.get("status", ""))
    if status != "running":
        return status
    alive, _ = writer_alive(doc.get("process") or {}, stale_after_s)
    return "running" if alive else "interrupted"


def is_completed(status: str) -> bool:
    """Only ``"completed"`` is a finished run; anything else makes launchers exit non-zero."""
    return status == "completed"


def load_result(path: str | Path, stale_after_s: float | None = None) -> dict[str, Any]:
    """Read a ``result.json`` (a directory or the file itself).

    A file that says ``"running"`` whose writer is gone comes back with ``status``
    ``"interrupted"`` and ``status_detail`` saying why (:func:`writer_alive`); the finished
    rounds are in ``history`` as written. A running checkpoint's summary
    (:meth:`RunResult.checkpoint`) comes back with its ``history.jsonl`` merged in: the
    document :meth:`RunResult.save` writes.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    for _ in range(3):  # the writer may finish (and remove the side files) as we read
        doc = json.loads(path.read_text())
        if "history_file" not in doc:
            break
        rows = _read_history(path.parent / str(doc["history_file"]))
        arrays = _read_arrays(path.parent / str(doc.pop("arrays_file", ""))) \
            if "arrays_file" in doc else {}
        if rows is not None and arrays is not None:
            for key, value in arrays.items():
                part, name = key.split("/", 1)
                doc.setdefault(part, {})[name] = value.tolist()
            doc = _merged(doc, rows)
            break
    if doc.get("status") == "running":
        alive, why = writer_alive(doc.get("process") or {}, stale_after_s)
        if not alive:
            doc["status"] = "interrupted"
            doc["status_detail"] = f"result.json says running but {why}"
    return doc


def _read_arrays(side: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a running checkpoint's binary side file, None when it is gone (a
    checkpoint a round newer than the summary read may have replaced it: the same run)."""
    try:
        with np.load(side, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError):
        return None


def _read_history(side: Path) -> list[dict[str, Any]] | None:
    """The complete JSON lines of a side history file, None when it is gone."""
    try:
        text = side.read_text()
    except FileNotFoundError:
        return None
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return rows


def _merged(summary: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A checkpoint's summary with its side history merged back: :meth:`RunResult.save`'s
    document (the rounds the summary counts; ``stale_after_s`` as the summary computed it)."""
    n = summary.get("history_rounds")
    rows = rows[:n] if isinstance(n, int) else rows
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if key in ("history_file", "history_rounds", "last_round"):
            continue
        out[key] = value
        if key == "metrics":
            out["history"] = rows
    out.setdefault("history", rows)
    return out
