"""FedTrees' client: the importances of its forests, never a row, a split or a tree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.federation.client import CausalClient, Fit
from fedcausal_flwr.federation.sites import lag_index, places, sent_variables
from fedcausal_flwr.names import default_names, joined
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.settings import ClientInputs

#: Fewest complete window rows a client grows forests on.
MIN_ROWS = 10


class FedTreesClient(CausalClient):
    """Answers ``train.importance``: the (d p x d) importances of its forests, one forest per
    target x_j(t) on the lags x(t-1) ... x(t-p) (:func:`~fedcausal_flwr.trees.model.
    forest_importance`).

    Parameters
    ----------
    Z : (rows, d (p + 1)) array
        The window ``[x_t, x_{t-1}, ..., x_{t-p}]`` of the node's series, lags within each of
        its segments (``fedcausal_flwr.data.lagged`` gives ``Xt, Xlag``: ``np.hstack([Xt,
        Xlag])``); rows with a NaN cell are left out. At least 10 complete rows.
    d : int
        Variables per time slice.
    names : sequence of str, optional
        The d variable names (the federation matches them; default ``x0, x1, ...``).
    """

    phases = {"importance": "importance"}

    def __init__(self, Z: np.ndarray, d: int, names: Sequence[str] | None = None,
                 partition_id: int = 0, num_partitions: int = 1) -> None:
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 2 or not Z.size or Z.shape[1] % int(d) or Z.shape[1] < 2 * int(d):
            raise ValueError(f"client {partition_id}: data must be window rows of {d} "
                             f"variables and at least one lag, got shape {Z.shape}")
        if np.isinf(Z).any():
            raise ValueError(f"client {partition_id}: data holds inf values")
        self.d, self.p = int(d), Z.shape[1] // int(d) - 1
        self.X, self.Y = model.window_regression(Z, self.d)
        if len(self.X) < MIN_ROWS:
            raise ValueError(f"client {partition_id}: {len(self.X)} complete window rows; "
                             f"FedTrees needs at least {MIN_ROWS}")
        self.partition_id, self.num_partitions = partition_id, num_partitions
        self.names = list(names) if names is not None else default_names(self.d)

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who it is, the shape of its window and its variable names (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": len(self.X), "d": self.d, "p": self.p, "names": joined(self.names)}

    def importance(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``[importance]`` (d p x d) of forests grown as the server's message says; for a
        site whose variables differ from the federation's (config ``variables``), forests of
        its variables in the federation on their lags, placed in the federation's (D p x D),
        zero where it holds no variable."""
        msg = ClientInputs.from_wire(config)
        if msg.lags != self.p:
            raise ValueError(f"client {self.partition_id}: the server asks for {msg.lags} lags, "
                             f"this client holds {self.p}")
        variables = sent_variables(config, self.names, f"client {self.partition_id}")
        if variables is None:
            return [model.forest_importance(self.X, self.Y, msg.trees, msg.max_features,
                                            msg.forest_seed, msg.min_leaf)], len(self.X), {}
        mine, ids = places(self.names, variables)
        imp = model.forest_importance(self.X[:, lag_index(mine, self.d, self.p)],
                                      self.Y[:, mine], msg.trees, msg.max_features,
                                      msg.forest_seed, msg.min_leaf, ids)
        return [model.placed(imp, ids, len(variables))], len(self.X), {}
