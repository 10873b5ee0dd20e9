"""FDBNL client: the closed-form local ADMM step on the client's own time series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.clients.base import CausalClient, Fit, check_shapes, checked_lagged
from fedcausal_flwr.core import dbn
from fedcausal_flwr.names import checked_names, joined


class FDBNLClient(CausalClient):
    """Holds ``(Xt, Xlag)``; answers ``train.local`` with ``(B_k, D_k)``.

    Only the second moments of the data are used, and only d x d / pd x d matrices leave.
    ``names`` labels the d variables (default ``x0, x1, ...``); every node must report the
    same names in the same order, or the server drops it.
    """

    phases = {"local": "local_step"}

    def __init__(self, Xt: np.ndarray, Xlag: np.ndarray, partition_id: int = 0,
                 num_partitions: int = 1, names: Sequence[str] | None = None) -> None:
        self.who = f"client {partition_id}"
        Xt, Xlag = checked_lagged(Xt, Xlag, self.who)
        self.n, self.d = Xt.shape
        self.names = checked_names(names, self.d, self.who)
        self.p = Xlag.shape[1] // self.d
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.mom = dbn.moments(Xt, Xlag)

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, the shape of its data and its variable names (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": self.n, "d": self.d, "p": self.p, "names": joined(self.names)}

    def shapes(self) -> list[tuple[int, int]]:
        """Shapes of W-like and A-like matrices for this client's data."""
        return [(self.d, self.d), (self.p * self.d, self.d)]

    def local_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.local``: [W, A, beta_k, gamma_k] -> [B_k, D_k]."""
        check_shapes(self.who, parameters, self.shapes() * 2, ["W", "A", "beta", "gamma"])
        B, D = dbn.admm_local_step(self.mom, *parameters, rho2=float(config["rho2"]))
        return [B, D], self.n, {"loss": dbn.squared_loss(B, D, self.mom)}
