"""App glue of FedPC: the ``constraint`` section's settings and data keys on the shared glue
of the window families (:class:`~fedcausal_flwr.federation.windowapp.WindowApp`)."""

from __future__ import annotations

from fedcausal_flwr.constraint.data import ConstraintData
from fedcausal_flwr.federation.windowapp import WindowApp

SECTION = "constraint"
GLUE = WindowApp(SECTION, ConstraintData, "fedcausal_flwr.constraint.settings:Search",
                 "fedcausal_flwr.constraint.strategy:FedPC")
strategy, client, node_data, truth = GLUE.strategy, GLUE.client, GLUE.node_data, GLUE.truth

__all__ = ["client", "node_data", "strategy", "truth"]
