"""Labelled views of a result's learned graph: layers, edges, pandas and networkx.

:class:`ResultViews` holds the views :class:`~fedcausal_flwr.results.RunResult` offers
(:meth:`~ResultViews.edges` in pure Python, :meth:`~ResultViews.to_pandas`,
:meth:`~ResultViews.to_networkx`, :meth:`~ResultViews.threshold`, FedIV's
:meth:`~ResultViews.predict`); they read only the result's ``algorithm``, ``config``,
``estimates`` and ``names``, and lay the estimates out through the family's ``view`` module
(the registry names it).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, NamedTuple, Self

import numpy as np


class ResultViews:
    """The labelled views of a run's result (the base of
    :class:`~fedcausal_flwr.results.RunResult`, whose fields they read)."""

    algorithm: str
    config: dict[str, Any]
    estimates: dict[str, Any]
    names: dict[str, Any]

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

    def threshold(self, tau: float) -> Self:
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


def _view(r: ResultViews) -> Any:
    """The family module that lays out ``r``'s estimates (``<family>.view``)."""
    from fedcausal_flwr import registry

    alg = registry.ALGORITHMS.get(r.algorithm)
    if alg is None or not alg.has_module("view"):
        raise ValueError(f"no graph layout known for algorithm {r.algorithm!r}")
    return alg.module("view")


def _graph_keys(r: ResultViews) -> list[str]:
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


def run_setting(r: ResultViews, name: str) -> Any:
    """Field ``name`` of the settings ``r`` ran with: ``config["strategy"]`` (the App's
    result.json), else ``config`` itself (what a strategy's ``start`` returns), else the
    default of the algorithm's settings class."""
    for where in (r.config.get("strategy"), r.config):
        if isinstance(where, dict) and where.get(name) is not None:
            return where[name]
    from fedcausal_flwr import registry

    return getattr(registry.get(r.algorithm).settings_class()(), name)


def labels_or_default(r: ResultViews, key: str, shape: tuple[int, ...]
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


def summary_layers(r: Any, client: int | None = None) -> list[Layer]:
    """A summary graph's one layer ``graph`` (FedPC, FedTrees): rows cause, columns effect,
    weights the edges' ``score``, with ``graph_frequency`` beside it when there is one."""
    if client is not None:
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    if "graph" not in r.estimates:
        return []
    G = np.asarray(r.estimates["graph"], dtype=float)
    S = np.asarray(r.estimates.get("score", G), dtype=float)
    v, _ = labels_or_default(r, "graph", G.shape)
    F = r.estimates.get("graph_frequency")
    return [Layer("graph", 0, np.where(G != 0, np.maximum(S, 1e-12), 0.0), v, v,
                  None if F is None else np.asarray(F, dtype=float))]


def summary_thresholds(r: Any) -> dict[str, float]:
    """0: every edge of the graph (its tests decided it)."""
    return {"graph": 0.0}
