"""FedPC's client: sums over its rows (moments, likelihood-ratio sums), never the rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.constraint import model
from fedcausal_flwr.constraint.settings import ClientInputs
from fedcausal_flwr.federation.client import CausalClient, Fit
from fedcausal_flwr.federation.sites import federation_window, sent_variables
from fedcausal_flwr.names import default_names, joined

#: Fewest rows a client answers with (its sums of fewer rows would say too much of them).
MIN_ROWS = 10


class FedPCClient(CausalClient):
    """Answers ``train.moments`` (the pairwise moments of its window rows) and
    ``train.ratio`` (the likelihood-ratio sums of its standardised residuals).

    Parameters
    ----------
    Z : (rows, d (p + 1)) array
        The node's rows: its d variables (i.i.d. rows), or the window ``[x_t, x_{t-1}, ...,
        x_{t-p}]`` of a time series (``fedcausal_flwr.data.lagged`` gives ``Xt, Xlag``:
        ``np.hstack([Xt, Xlag])``); NaN cells are missing values. At least 10 rows.
    d : int, optional
        Variables per time slice (default: every column, p = 0).
    names : sequence of str, optional
        The d variable names (the federation matches them; default ``x0, x1, ...``). Sites
        may hold different variables in any order: the server sends the federation's
        ``variables`` to a site whose list differs, and the site answers over them, its
        window placed in the federation's columns with no rows where it lacks a variable.
    """

    phases = {"moments": "moments", "ratio": "ratio"}

    def __init__(self, Z: np.ndarray, d: int | None = None, names: Sequence[str] | None = None,
                 partition_id: int = 0, num_partitions: int = 1) -> None:
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 2 or not Z.size:
            raise ValueError(f"client {partition_id}: data must be a non-empty rows x columns "
                             f"matrix, got shape {Z.shape}")
        if np.isinf(Z).any():
            raise ValueError(f"client {partition_id}: data holds inf values")
        if len(Z) < MIN_ROWS:
            raise ValueError(f"client {partition_id}: {len(Z)} rows; FedPC needs at least "
                             f"{MIN_ROWS}")
        self.d = int(Z.shape[1] if d is None else d)
        if Z.shape[1] % self.d:
            raise ValueError(f"client {partition_id}: {Z.shape[1]} columns is not a window "
                             f"of {self.d} variables")
        self.Z, self.partition_id, self.num_partitions = Z, partition_id, num_partitions
        self.p = Z.shape[1] // self.d - 1
        self.names = list(names) if names is not None else default_names(self.d)
        self.placed: tuple[str, np.ndarray] | None = None

    def window(self, config: dict[str, Any]) -> np.ndarray:
        """The window rows over the federation's variables (config ``variables``; none: the
        site's own, in its order)."""
        who = f"client {self.partition_id}"
        variables = sent_variables(config, self.names, who)
        if variables is None:
            return self.Z
        if self.placed is None or self.placed[0] != config["variables"]:
            self.placed = (config["variables"],
                           federation_window(self.Z, self.names, variables, self.p))
        return self.placed[1]

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who it is, the shape of its window and its variable names (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": len(self.Z), "d": self.d, "p": self.p, "names": joined(self.names)}

    def moments(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """The four arrays of :data:`~fedcausal_flwr.constraint.model.MOMENTS`; with R
        replicas, the same four of each half sample of its rows stacked (R, m, m)."""
        from fedcausal_flwr.stability import complementary_halves

        msg = ClientInputs.from_wire(config)
        Z = self.window(config)
        out = model.moments(Z).arrays()
        if msg.replicas:
            halves = [model.moments(Z[complementary_halves(len(Z), r,
                                                            msg.replica_seed)]).arrays()
                      for r in range(1, msg.replicas + 1)]
            out += [np.stack([h[k] for h in halves]) for k in range(len(model.MOMENTS))]
        return out, len(self.Z), {}

    def ratio(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``[pairwise rows, sum e tanh(e)^T, sum e e^T]`` of its residuals given the
        server's ``[B, intercept, sd]``."""
        msg = ClientInputs.from_wire(config)
        if msg.lags != self.p:
            raise ValueError(f"client {self.partition_id}: the server asks for {msg.lags} lags, "
                             f"this client holds {self.p}")
        B, c, sd = (np.asarray(a, float) for a in parameters)
        Z = self.window(config)
        d = Z.shape[1] // (self.p + 1)
        if B.shape != (d * self.p, d) or c.shape != (d,) or sd.shape != (d,) or \
                not (np.isfinite(B).all() and np.isfinite(c).all() and (sd > 0).all()):
            raise ValueError(f"client {self.partition_id}: malformed regression from the server")
        E = model.residuals(Z, B, c, sd, np.arange(d), np.arange(d, Z.shape[1]))
        return list(model.tanh_moments(E)), len(E), {}
