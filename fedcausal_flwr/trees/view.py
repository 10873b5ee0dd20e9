"""How a FedTrees result reads as a graph: the layer ``graph`` (i -> j, weighted by its
importance), each edge's share of sites that keep it beside it."""

from __future__ import annotations

from fedcausal_flwr.constraint.view import layers, thresholds

__all__ = ["layers", "thresholds"]
