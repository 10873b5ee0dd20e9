"""FDBNL client: the closed-form local ADMM step on the client's own time series.

PFDBNL client: personalized (W_k, A_k) by the proximal local step, then its copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.federation.client import CausalClient, Fit, check_shapes, checked_lagged
from fedcausal_flwr.names import checked_names, joined


class FDBNLClient(CausalClient):
    """Holds ``(Xt, Xlag)``; answers ``train.local`` with ``(B_k, D_k)``.

    Only the second moments of the data are used, and only d x d / pd x d matrices leave.

    Parameters
    ----------
    Xt : array (n x d)
        The rows ``x_t`` of this client's series (``fedcausal_flwr.data.lagged`` makes both).
    Xlag : array (n x p*d)
        Their lags ``[x_{t-1}, ..., x_{t-p}]``, row by row.
    names : sequence of str, optional
        Labels of the d variables (default ``x0, x1, ...``); every node must report the
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


class PFDBNLClient(FDBNLClient):
    """Answers ``train.personal`` with ``[W~_k, A~_k, W_k, A_k, h(W_k)]``."""

    phases = {"personal": "personal_step"}

    def personal_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.personal``: [W, A, W~_k, A~_k, beta_k, gamma_k] -> copies and W_k, A_k.

        lambda, mu and the code-compatibility flag come from the server with the message.
        """
        check_shapes(self.who, parameters, self.shapes() * 3,
                     ["W", "A", "W_tilde", "A_tilde", "beta", "gamma"])
        s = dbn.PFDBNLSettings(lambda_w=float(config["lambda-w"]),
                               lambda_a=float(config["lambda-a"]), mu=float(config["mu"]),
                               code_compat=bool(config["code-compat"]),
                               restarts=int(config["restarts"]))
        out = dbn.pfdbnl_client_step(self.mom, parameters, float(config["alpha"]),
                                     float(config["rho1"]), float(config["rho2"]), s)
        return out, self.n, {"loss": dbn.squared_loss(out[2], out[3], self.mom)}
