"""PFDBNL strategy: personalized DBNs by proximal ADMM; exact averaging on the server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.core import dbn
from fedcausal_flwr.strategies.base import Payload, Shape
from fedcausal_flwr.strategies.fdbnl import FDBNL, strategy_kwargs


class PFDBNL(FDBNL):
    """Personalized FDBNL (Algorithm 2 of Chen, Ma, Yue 2025).

    Client k gets ``[W, A, W~_k, A~_k, beta_k, gamma_k]`` with alpha, rho1, rho2, mu and the
    lambdas, and returns its copies ``W~_k, A~_k``, its personalized ``W_k, A_k`` (derivable
    from the copies and duals, so nothing new is revealed) and ``h(W_k)``.
    """

    algorithm = "pfdbnl"
    phase = "personal"

    def payload(self, cid: int) -> Payload:
        """Anchors, duals and the round's scalars."""
        s, st = self.settings, self.state
        return dbn.pfdbnl_client_payload(st, cid), {
            "alpha": float(st.alpha), "rho1": float(st.rho1), "rho2": float(st.rho2),
            "mu": float(s.mu), "lambda-w": float(s.lambda_w), "lambda-a": float(s.lambda_a),
            "code-compat": bool(s.code_compat)}

    def reply_shapes(self) -> list[Shape]:
        """``W~_k, A~_k, W_k, A_k`` and the scalar ``h(W_k)``."""
        return [(self.d, self.d), (self.p * self.d, self.d)] * 2 + [()]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Exact average, duals, alpha (mean h) and rho."""
        self._replies = dict(replies)
        self.state = dbn.pfdbnl_server_round(self.state, replies, self.settings)

    def estimates(self) -> dict[str, np.ndarray]:
        """Global W, A and every client's personalized ``W_k, A_k`` (stacked by client id)."""
        st = self.state
        ids = sorted(self.nodes)
        zero_w, zero_a = np.zeros_like(st.W), np.zeros_like(st.A)
        W_loc = np.stack([st.W_local.get(c, zero_w) for c in ids])
        A_loc = np.stack([st.A_local.get(c, zero_a) for c in ids])
        return {"W": st.W, "A": st.A, "W_local": W_loc, "A_local": A_loc,
                "W_local_thresholded": dbn.threshold(W_loc, self.tau_w),
                "A_local_thresholded": dbn.threshold(A_loc, self.tau_a),
                "client_ids": np.array(ids)}


from fedcausal_flwr.strategies.fdbnl import truth_for_plots  # noqa: E402,F401


def from_run_config(rc: Mapping[str, Any]) -> PFDBNL:
    """The App's strategy for ``algorithm = "pfdbnl"``."""
    from fedcausal_flwr.evaluation import dbn_evaluator

    kw = strategy_kwargs(rc)
    return PFDBNL(**kw, evaluate_fn=dbn_evaluator(rc, kw["tau_w"], kw["tau_a"]))
