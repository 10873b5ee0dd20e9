"""FedCF client: FedGC's client with inputs, the constant ``phi_m`` and counterfactual answers.

Phases: ``ss_setup`` returns ``[A_mm, B_mm]``; ``ss_window`` returns
``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]`` of the next window (the target per
``FedCFSettings.target``) after the Jacobi step on ``(theta_m, phi_m)`` (eqs 9-10) with the
server's ``[g, g~]``; ``ss_query`` turns the server's ``delta_h = B_hat_mn delta_u_n`` into
the answer ``C_mm delta_h`` (the change of ``E[y_m]``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.clients.base import Fit
from fedcausal_flwr.clients.fedgc import FedGCClient
from fedcausal_flwr.core import statespace as ss
from fedcausal_flwr.core.statespace import FedCFSettings, StateSpaceSettings


class FedCFClient(FedGCClient):
    """Answers ``ss_setup``, ``ss_window`` and ``ss_query``."""

    phases: ClassVar[dict[str, str]] = {**FedGCClient.phases, "ss_query": "query"}
    settings_class: ClassVar[type[StateSpaceSettings]] = FedCFSettings

    def local_blocks(self) -> list[np.ndarray]:
        """``[A_mm, B_mm]``, sent once."""
        return [self.data.A, self.data.B]

    n_grads = 2  # [g, g~]: w.r.t. the target and hhat_a^{t-1}

    def gradients(self, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(g, g~)`` as the server sent them."""
        return arrays[0], arrays[1]

    def states(self, par: ss.ClientParams, ts: np.ndarray, s: StateSpaceSettings
               ) -> list[np.ndarray]:
        """``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``."""
        return ss.client_states(self.data, par, ts, s)

    def query(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``ss_query``: ``[delta_h] -> [C_mm delta_h]``."""
        p = self.data.dims[0]
        if len(parameters) != 1 or parameters[0].shape != (p,):
            raise ValueError(f"{self.who}: a counterfactual query needs one delta_h of shape "
                             f"({p},), got {[a.shape for a in parameters]}")
        return [self.data.C @ parameters[0]], 0, {}
