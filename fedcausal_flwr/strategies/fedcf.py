"""FedCF strategy: FedGC's protocol with inputs ``B_mn``, the residual term and counterfactuals.

Mohamed, Mohanty, Gebraeel, federated counterfactual learning in LTI state space. Every
setting and its default lives in :class:`~fedcausal_flwr.core.statespace.FedCFSettings`.

``ss_setup`` brings ``[A_mm, B_mm]``; each ``ss_window`` sends client m ``[g, g~]`` of the
previous window (gradients of ``L_s`` w.r.t. the target ``h_a^t`` and ``hhat_a^{t-1}``,
eqs 12-13) and receives ``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``; the server steps
``A_hat, B_hat`` on ``L_s = mean_t sum_m ||h_s - target||^2 + xi ||D_m||^2`` (eqs 11, 14-15)
and each client ``(theta_m, phi_m)`` (eqs 9-10). Rounds, ``num_rounds`` and the final
gradient delivery are FedGC's; ``start(initial_arrays=[A_hat, B_hat])`` warm-starts both.

After training, when ``cf_delta`` is set, one ``ss_query`` asks client ``cf_client`` (m) what
``y_m`` would change by if client ``cf_source`` (n) changed its input by ``delta_u``: the
server sends ``delta_h = B_hat_mn delta_u``, the client answers ``C_mm delta_h``; the answer
goes to ``result.json`` under ``metrics["counterfactual"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.core import statespace as ss
from fedcausal_flwr.core.statespace import FedCFSettings
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies.base import NodeInfo, Shape
from fedcausal_flwr.strategies.fedgc import FedGC

__all__ = ["FedCF", "FedCFSettings"]


class FedCF(FedGC):
    """Federated counterfactual learning in LTI state space (Mohamed, Mohanty, Gebraeel).

    Parameters
    ----------
    settings : FedCFSettings
        FedGC's settings plus ``xi``, ``phi``, the target and the query (default: the App's).
    query : tuple (m, n, delta_u), optional
        The counterfactual query answered after training (default: the settings' ``cf_*``).
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change.
    """

    algorithm = "fedcf"
    settings_class = FedCFSettings
    progress_keys = ("L_s", "penalty", "residual", "err_A", "err_B", "n_clients", "seconds")

    def __init__(self, settings: FedCFSettings | None = None, *,
                 query: tuple[int, int, np.ndarray] | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        s = self.settings
        du = s.delta_u()
        self.query = query if query is not None else (
            (s.cf_client, s.cf_source, du) if du.size else None)
        if self.query is not None:
            self.query = (int(self.query[0]), int(self.query[1]),
                          np.asarray(self.query[2], dtype=float))
        self.answer: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        """Settings and the query."""
        q = None if self.query is None else [self.query[0], self.query[1],
                                             list(map(float, self.query[2]))]
        return {**super().config(), "query": q}

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """FedGC's sizes plus the measurement sizes (for the query's answer)."""
        super().setup(nodes)
        self.D = [int(nodes[c].props["d"]) for c in self.cids]

    def input_sizes(self, nodes: Mapping[int, NodeInfo]) -> list[int]:
        """Every client's input size ``U_m``."""
        return [int(nodes[c].props["u"]) for c in self.cids]

    def setup_shapes(self, i: int) -> list[Shape]:
        """``A_mm`` and ``B_mm``."""
        return [(self.P[i], self.P[i]), (self.P[i], self.U[i])]

    def local_blocks(self, arrays: list[np.ndarray], i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(A_mm, B_mm)``."""
        return arrays[0], arrays[1]

    def state_shapes(self, i: int, W: int) -> list[Shape]:
        """Target, ``hhat_a^{t-1}``, ``hhat_c^{t-1}``, ``u^{t-1}`` and the local loss."""
        p = self.P[i]
        return [(W, p)] * 3 + [(W, self.U[i]), ()]

    def empty_grads(self, i: int) -> list[np.ndarray]:
        """``[g, g~]`` of no window."""
        return [np.zeros((0, self.P[i]))] * 2

    def grads(self, win: ss.ServerWindow, i: int) -> list[np.ndarray]:
        """``[g, g~]``: w.r.t. the target and ``hhat_a^{t-1}`` (eqs 12-13)."""
        return [win.g[i], win.g_tilde[i]]

    def server_update(self, msgs: list[list[np.ndarray]]
                      ) -> tuple[ss.ServerWindow, ss.ServerParams]:
        """FedCF's loss and the ``A_hat, B_hat`` steps."""
        return ss.fedcf_server_update(self.A_diag, self.B_diag, self.server, msgs,
                                      self.settings)

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start from ``[A_hat, B_hat]`` (their off-diagonal blocks)."""
        self.server = self._warm(arrays, ["A_hat", "B_hat"])

    def estimates(self) -> dict[str, np.ndarray]:
        """FedGC's estimates plus ``B_hat``."""
        out = super().estimates()
        if out:
            out["B_hat"] = self.server.B_hat
        return out

    def after_training(self, grid, result: RunResult) -> None:
        """Answer the counterfactual query through one ``ss_query`` exchange (one client)."""
        if self.query is None or self.server is None:
            return
        m, n, du = self.query
        if m not in self.cids or n not in self.cids or m == n:
            self.drop(f"query ({m}, {n})", "needs two different participating clients")
            return
        i, j = self.cids.index(m), self.cids.index(n)
        if du.shape != (self.U[j],):
            self.drop(f"query ({m}, {n})", f"delta_u has {du.size} values, client {n} has "
                      f"{self.U[j]} inputs")
            return
        self._round += 1
        dh = ss.block(self.server.B_hat, self.P, self.U, i, j) @ du
        reply = self.exchange(grid, "ss_query", {m: ([dh], {})}, [(self.D[i],)], need=1)
        self.answer = {"client": m, "source": n, "delta_u": du, "delta_h": dh,
                       "delta_y": reply[m][0]}

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)
        if self.answer is not None:
            result.metrics["counterfactual"] = self.answer
