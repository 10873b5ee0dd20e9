"""How a FedPC result reads as a graph: one layer ``graph`` (the summary i -> j at some lag,
weighted by its ranking score), with replicas each edge's selection frequency beside it."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.results import Layer, RunResult, labels_or_default


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``graph``, rows cause, columns effect, weights the edges' scores."""
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


def thresholds(r: RunResult) -> dict[str, float]:
    """0: every edge of the graph (its tests decided it)."""
    return {"graph": 0.0}
