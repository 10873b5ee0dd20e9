"""PFDBNL strategy: personalized DBNs by proximal ADMM; exact averaging on the server."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fedcausal_flwr.core import dbn
from fedcausal_flwr.core.dbn import PFDBNLSettings
from fedcausal_flwr.strategies.base import Payload, Shape
from fedcausal_flwr.strategies.fdbnl import FDBNL

__all__ = ["PFDBNL", "PFDBNLSettings"]


class PFDBNL(FDBNL):
    """Personalized FDBNL (Algorithm 2 of Chen, Ma, Yue 2025).

    Client k gets ``[W, A, W~_k, A~_k, beta_k, gamma_k]`` with alpha, rho1, rho2, mu and the
    lambdas, and returns its copies ``W~_k, A~_k``, its personalized ``W_k, A_k`` (derivable
    from the copies and duals, so nothing new is revealed) and ``h(W_k)``.
    """

    algorithm = "pfdbnl"
    settings_class = PFDBNLSettings
    phase = "personal"

    def payload(self, cid: int) -> Payload:
        """Anchors, duals and the round's scalars."""
        s, st = self.settings, self.state
        return dbn.pfdbnl_client_payload(st, cid), {
            "alpha": float(st.alpha), "rho1": float(st.rho1), "rho2": float(st.rho2),
            "mu": float(s.mu), "lambda-w": float(s.lambda_w), "lambda-a": float(s.lambda_a),
            "code-compat": bool(s.code_compat), "restarts": int(s.restarts)}

    def reply_shapes(self) -> list[Shape]:
        """``W~_k, A~_k, W_k, A_k`` and the scalar ``h(W_k)``."""
        return [(self.d, self.d), (self.p * self.d, self.d)] * 2 + [()]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Exact average, duals, alpha (mean h) and rho."""
        self.state = dbn.pfdbnl_server_round(self.state, replies, self.settings)

    def estimates(self) -> dict[str, np.ndarray]:
        """Global W, A and every client's personalized ``W_k, A_k`` (stacked by client id)."""
        st, ids, s = self.state, sorted(self.nodes), self.settings
        if st is None:
            return {}
        zero_w, zero_a = np.zeros_like(st.W), np.zeros_like(st.A)
        W_loc = np.stack([st.W_local.get(c, zero_w) for c in ids])
        A_loc = np.stack([st.A_local.get(c, zero_a) for c in ids])
        return {"W": st.W, "A": st.A, "W_local": W_loc, "A_local": A_loc,
                "W_local_thresholded": dbn.threshold(W_loc, s.tau_w),
                "A_local_thresholded": dbn.threshold(A_loc, s.tau_a),
                "client_ids": np.array(ids)}

