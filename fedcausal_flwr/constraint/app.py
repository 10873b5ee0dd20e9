"""App glue of FedPC: settings from the run config's ``constraint`` section, the built-in data
or a node's own CSV, the truth and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.constraint.data import ConstraintData, client_series, windows
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
    ``data-path``)."""
    context = section_context(context, SECTION)
    from fedcausal_flwr.data.csvdata import node_data_path
    from fedcausal_flwr.data.nodefiles import allow_run_config_paths

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    path = node_data_path(context.node_config, f"client {pid}")
    cls = client_class(algorithm)
    if path is not None:
        return cls.from_context(context, node_data(algorithm, context, path, f"client {pid}"))
    rc, p = context.run_config, _lags(context.run_config)
    if str(rc.get("data", "synthetic")) != "synthetic":
        allow_run_config_paths(rc, context.node_config, {"data-path": f"{SECTION}.data-path"},
                               f"client {pid}", pid)
    try:
        series, names, _ = client_series(rc, p, max(k, pid + 1))
        Z = np.vstack(windows(series[pid], p))
    except ValueError as e:
        raise ValueError(f"client {pid}: {e}") from e
    return cls.from_context(context, {"Z": Z, "d": len(names), "names": names})


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:  # noqa: ARG001
    """The client arguments of a node's own CSV: one column per variable (header names
    them), rows in time order when ``constraint.lags`` >= 1 (split at the node config's
    ``segment-column``); empty or NaN cells are missing values; columns are put in the
    order of their names, so sites agree whatever their files' order."""
    from fedcausal_flwr.data.csvdata import SEGMENT_COLUMN, read_csv, segments

    p = _lags(context.run_config)
    seg = str(context.node_config.get(SEGMENT_COLUMN, "") or "") or None
    table = read_csv(path, who, min_rows=p + 2, segment_column=seg, allow_missing=True)
    order = sorted(range(len(table.names)), key=lambda j: table.names[j])  # match by name
    Z = np.vstack(windows([s[:, order] for s in segments(table, p + 2, who)], p))
    return {"Z": Z, "d": len(order), "names": [table.names[j] for j in order]}


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
