"""How a FedPC result reads as a graph: one layer ``graph`` (the summary i -> j at some lag,
weighted by its ranking score), each edge's frequency beside it (replicas or sites)."""

from __future__ import annotations

from fedcausal_flwr.results_views import summary_layers as layers
from fedcausal_flwr.results_views import summary_thresholds as thresholds

__all__ = ["layers", "thresholds"]
