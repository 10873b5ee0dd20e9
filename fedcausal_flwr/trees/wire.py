"""What crosses the wire in FedTrees: one phase.

``importance``: nothing down but the settings (:meth:`~fedcausal_flwr.settings.Settings.
to_wire`); up ``importance`` (d p x d), the normalised impurity importances of the client's
forests, column j summing to 1 (0 for a constant target), and its row count.
"""

from __future__ import annotations

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {"importance": Phase(down=(), up=("importance",))}
