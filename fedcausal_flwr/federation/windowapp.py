"""App glue shared by the families that learn from window rows of a time series or i.i.d.
rows (FedPC, FedTrees): settings from the family's run-config section, the built-in sets of
:mod:`fedcausal_flwr.data.series` or a node's own CSV, the truth and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import numpy as np

from fedcausal_flwr.data.series import SeriesData


def _named(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class WindowApp:
    """A family's App functions (``strategy``, ``client``, ``node_data``, ``truth``: the
    registry's contract) from its section, data keys, the settings class holding its ``lags``
    and its strategy class (``"module:Class"``, imported on use: a client never loads it)."""

    section: str
    keys: type[SeriesData]
    lags_class: str
    strategy_class: str

    def lags(self, rc: Mapping[str, Any]) -> int:
        """The run config's lags, checked by the family's settings."""
        cls = _named(self.lags_class)
        return cls.from_run_config({"lags": rc.get("lags", cls.lags)}).lags

    def strategy(self, algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG002
        """The family's strategy with the run config's settings, scored against the built-in
        truth."""
        from fedcausal_flwr.data.series import evaluator
        from fedcausal_flwr.settings import section_view

        cls = _named(self.strategy_class)
        rc = section_view(self.section, rc)
        s = cls.settings_class.from_run_config(rc)
        self.keys.from_run_config(rc)  # the data keys fail here, before any node is asked
        return cls(s, evaluate_fn=evaluator(rc, s.lags, self.keys))

    def client(self, algorithm: str, context: Any):
        """This node's client on the run config's data set, or on its own CSV (node config
        ``data-path``: :meth:`node_data`)."""
        from fedcausal_flwr.data.series import window_arguments
        from fedcausal_flwr.federation.client import client_class, section_context

        context = section_context(context, self.section)
        args = window_arguments(context, self.section, self.keys, self.lags(context.run_config))
        return client_class(algorithm).from_context(context, args)

    def node_data(self, algorithm: str, context: Any, path, who: str  # noqa: ARG002
                  ) -> dict[str, Any]:
        """The client arguments of a node's own CSV (:func:`fedcausal_flwr.data.series.
        node_window` at the run config's lags)."""
        from fedcausal_flwr.data.series import node_window

        return node_window(context, path, who, self.lags(context.run_config))

    def truth(self, algorithm: str, rc: Mapping[str, Any]) -> dict[str, np.ndarray]:  # noqa: ARG002
        """The true summary graph of a synthetic run (for the PNG), else nothing."""
        from fedcausal_flwr.data.series import client_series
        from fedcausal_flwr.settings import section_view

        rc = section_view(self.section, rc)
        if str(rc.get("data", "synthetic")) != "synthetic":
            return {}
        _, _, T = client_series(rc, self.lags(rc), 1, self.keys)
        return {"graph": T}
