"""App glue of FedTrees: settings from the run config's ``trees`` section, the built-in time
series or a node's own CSV, the truth and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.data.series import client_series, evaluator
from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.settings import section_view
from fedcausal_flwr.trees.data import TreesData

SECTION = "trees"

__all__ = ["client", "node_data", "strategy", "truth"]


def _lags(rc: Mapping[str, Any]) -> int:
    from fedcausal_flwr.trees.settings import Forest

    return Forest.from_run_config({"lags": rc.get("lags", Forest.lags)}).lags


def strategy(algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG001
    """FedTrees with the run config's settings, scored against the built-in truth."""
    from fedcausal_flwr.trees.strategy import FedTrees

    rc = section_view(SECTION, rc)
    s = FedTrees.settings_class.from_run_config(rc)
    TreesData.from_run_config(rc)  # the data keys fail here, before any node is asked
    return FedTrees(s, evaluate_fn=evaluator(rc, s.lags, TreesData))


def client(algorithm: str, context: Context):
    """This node's client on the run config's data set, or on its own CSV (node config
    ``data-path``: :func:`node_data`)."""
    from fedcausal_flwr.data.series import window_arguments

    context = section_context(context, SECTION)
    args = window_arguments(context, SECTION, TreesData, _lags(context.run_config))
    return client_class(algorithm).from_context(context, args)


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:  # noqa: ARG001
    """The client arguments of a node's own CSV (:func:`fedcausal_flwr.data.series.
    node_window` at the run config's lags)."""
    from fedcausal_flwr.data.series import node_window

    return node_window(context, path, who, _lags(context.run_config))


def truth(algorithm: str, rc: Mapping[str, Any]) -> dict[str, np.ndarray]:  # noqa: ARG001
    """The true summary graph of a synthetic run (for the PNG), else nothing."""
    rc = section_view(SECTION, rc)
    if str(rc.get("data", "synthetic")) != "synthetic":
        return {}
    _, _, T = client_series(rc, _lags(rc), 1, TreesData)
    return {"graph": T}
