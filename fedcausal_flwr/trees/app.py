"""App glue of FedTrees: the ``trees`` section's settings and data keys on the shared glue of
the window families (:class:`~fedcausal_flwr.federation.windowapp.WindowApp`)."""

from __future__ import annotations

from fedcausal_flwr.federation.windowapp import WindowApp
from fedcausal_flwr.trees.data import TreesData

SECTION = "trees"
GLUE = WindowApp(SECTION, TreesData, "fedcausal_flwr.trees.settings:Forest",
                 "fedcausal_flwr.trees.strategy:FedTrees")
strategy, client, node_data, truth = GLUE.strategy, GLUE.client, GLUE.node_data, GLUE.truth

__all__ = ["client", "node_data", "strategy", "truth"]
