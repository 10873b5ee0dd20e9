"""FedCF client: FedGC's client with inputs, the constant ``phi_m`` and counterfactual answers.

Phases: ``ss_setup`` returns ``[A_mm, B_mm]``; ``ss_window`` returns
``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]`` of the next window (target ``h_a^t`` or, in
the refined variant, ``hhat_a^t``) after the Jacobi step on ``(theta_m, phi_m)`` with the
server's ``[g, g~]``; ``ss_query`` turns the server's ``delta_h = B_hat_mn delta_u_n`` into
the answer ``C_mm delta_h`` (the change of ``E[y_m]``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.clients.fedgc import FedGCClient


class FedCFClient(FedGCClient):
    """Answers ``ss_setup``, ``ss_window`` and ``ss_query``."""

    phases = ("ss_setup", "ss_window", "ss_query")
    model = "fedcf"

    def local_blocks(self) -> list[np.ndarray]:
        """``[A_mm, B_mm]``, sent once."""
        return [self.data.A, self.data.B]

    n_grads = 2  # [g, g~]: w.r.t. h_a^t (or hhat_a^t) and hhat_a^{t-1}

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]
            ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        """``ss_query``: ``[delta_h] -> [C_mm delta_h]``; other phases as in FedGC."""
        if config.get("phase") != "ss_query":
            return super().fit(parameters, config)
        p = self.data.dims[0]
        if len(parameters) != 1 or parameters[0].shape != (p,):
            raise ValueError(f"{self.who}: a counterfactual query needs one delta_h of shape "
                             f"({p},), got {[a.shape for a in parameters]}")
        return [self.data.C @ parameters[0]], 0, {}


def from_context(context: Context) -> FedCFClient:
    """The App's entry point for ``algorithm = "fedcf"``."""
    return FedCFClient.from_context(context)
