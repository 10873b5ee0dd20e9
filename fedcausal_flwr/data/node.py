"""Public readers of a node's own CSV, for a user's own ClientApp.

``make(context)`` of :func:`fedcausal_flwr.clients.register` returns a node's data as the
client's arguments; these functions build them from the CSV the SuperNode names with
``--node-config data-path=...``, or that ``launch simulate --node-data`` gives a virtual node
(layout and error messages: :mod:`fedcausal_flwr.data.csvdata`)::

    from fedcausal_flwr.data import node_data
    register(app, "fdbnl", lambda context: node_data("fdbnl", context))

or step by step for the time-series algorithms::

    from fedcausal_flwr.data import lagged, node_csv
    table = node_csv(context)                      # Table: .names, .values
    Xt, Xlag = lagged(table, lags=1)
    return {"Xt": Xt, "Xlag": Xlag, "names": table.names}
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.data.csvdata import Table, node_data_path, read_csv, segments
from fedcausal_flwr.data.nodefiles import adopt_node_config, node_limits

__all__ = ["Table", "read_csv", "node_csv", "lagged", "node_data"]


def _who(context: Context, party: bool = False) -> str:
    return f"{'party' if party else 'client'} {int(context.node_config.get('partition-id', 0))}"


def node_csv(context: Context, *, min_rows: int = 2, segment_column: str | None = None,
             id_column: str | None = None, allow_missing: bool = False) -> Table:
    """The checked CSV of this node's node config ``data-path`` (a ValueError naming node,
    file, row and column on a bad file; also when the node config has no ``data-path``).
    ``segment_column`` defaults to the node config's ``segment-column``; ``allow_missing``:
    empty or NaN cells are missing values (NaN) for an algorithm that handles them (FDBNL,
    PFDBNL) instead of an error. A simulated node's own node config
    (``$FEDCAUSAL_NODE_CONFIGS``, :func:`~fedcausal_flwr.data.nodefiles.own_node_config`)
    counts as its node config."""
    adopt_node_config(context.node_config)
    who = _who(context)
    path = node_data_path(context.node_config, who)
    if path is None:
        raise ValueError(f"{who}: this SuperNode has no node config data-path (its own CSV): "
                         "start it with --node-config 'data-path=\"/path/to/file.csv\"'")
    seg = segment_column or str(context.node_config.get("segment-column", "") or "") or None
    with node_limits(context.node_config):
        return read_csv(path, who, min_rows=min_rows, segment_column=seg, id_column=id_column,
                        allow_missing=allow_missing)


def lagged(table: Table, lags: int = 1, who: str = "client") -> tuple[np.ndarray, np.ndarray]:
    """``(Xt, Xlag)`` of a time-series table: rows t and their ``lags`` predecessors
    ``[x_{t-1}, ..., x_{t-p}]``, within each segment (the first ``lags`` rows of a segment are
    dropped). The arguments FDBNL/PFDBNL clients take; missing cells stay NaN."""
    from fedcausal_flwr.data.timeseries import lagged_segments

    return lagged_segments(segments(table, lags + 1, who), lags, pad="drop",
                           missing=bool(np.isnan(table.values).any()))


def node_data(algorithm: str, context: Context) -> dict[str, Any]:
    """This node's client arguments (variable names included) from its own CSV, exactly as
    the App's own ClientApp builds them: any of ``fdbnl``, ``pfdbnl`` (run config ``dbn.lags``),
    ``fedgc``, ``fedcf`` (``statespace.ss-p``), ``fediv`` (``iv.iv-treatment``,
    ``iv.iv-outcome``, ``iv.iv-instrument``), ``vfedcd`` (node config ``id-key`` or
    ``$FEDCAUSAL_ID_KEY`` for keyed hashes, else private set intersection; ``columns`` or
    run config ``vertical.parts``); a run config in
    sections or one section's keys alone. See the README's "Your own data" section."""
    from fedcausal_flwr import registry
    from fedcausal_flwr.federation.client import section_context

    alg = registry.get(algorithm)
    adopt_node_config(context.node_config)
    who = _who(context)
    path = node_data_path(context.node_config, who)
    if path is None:
        node_csv(context)  # raises the message naming the missing data-path
    own = section_context(context, alg.section)
    with node_limits(context.node_config):
        return alg.app().node_data(alg.name, own, path, who)
