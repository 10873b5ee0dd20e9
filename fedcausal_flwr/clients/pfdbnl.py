"""PFDBNL client: personalized (W_k, A_k) by the proximal local step, then its copies."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedcausal_flwr.clients.base import Fit, check_shapes
from fedcausal_flwr.clients.fdbnl import FDBNLClient
from fedcausal_flwr.core import dbn


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
