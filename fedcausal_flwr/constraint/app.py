"""App glue of FedPC: settings from the run config's ``constraint`` section, the built-in data
or a node's own CSV, the truth and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.constraint.data import ConstraintData, client_series
from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.settings import section_view

SECTION = "constraint"

__all__ = ["client", "evaluator", "node_data", "strategy", "truth"]


def strategy(algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG001
    """FedPC with the run config's settings, scored against the built-in truth."""
    from fedcausal_flwr.constraint.strategy import FedPC

    rc = section_view(SECTION, rc)
    s = FedPC.settings_class.from_run_config(rc)
    ConstraintData.from_run_config(rc)  # the data keys fail here, before any node is asked
    return FedPC(s, evaluate_fn=evaluator(rc, s.lags))


def _lags(rc: Mapping[str, Any]) -> int:
    from fedcausal_flwr.constraint.settings import Search

    return Search.from_run_config({"lags": rc.get("lags", Search.lags)}).lags


def client(algorithm: str, context: Context):
    """This node's client on the run config's data set, or on its own CSV (node config
    ``data-path``: :func:`node_data`)."""
    from fedcausal_flwr.data.series import window_arguments

    context = section_context(context, SECTION)
    args = window_arguments(context, SECTION, ConstraintData, _lags(context.run_config))
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
    _, _, T = client_series(rc, _lags(rc), 1)
    return {"graph": T}


def evaluator(rc: Mapping[str, Any], p: int):
    """``evaluate(estimates, client_ids) -> metrics`` against the built-in truth; None
    without one (:func:`fedcausal_flwr.data.series.evaluator`)."""
    from fedcausal_flwr.data.series import evaluator as series_evaluator

    return series_evaluator(rc, p, ConstraintData)
