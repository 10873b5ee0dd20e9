"""FedCF strategy: FedGC's server plus ``B_mn``, the penalty ``xi D`` and counterfactuals.

``ss_setup`` brings ``[A_mm, B_mm]``; each ``ss_window`` sends client m ``[g, g~]`` of the
previous window (gradients w.r.t. ``h_a^t`` and ``hhat_a^{t-1}``) and receives
``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``. After training, when ``ss-cf-delta`` is
set, one ``ss_query`` asks client ``ss-cf-client`` (m) what ``y_m`` would change by if client
``ss-cf-source`` (n) changed its input by ``delta_u``: the server sends
``delta_h = B_hat_mn delta_u``, the client answers ``C_mm delta_h``; the answer (and, on
synthetic data, the true ``C_mm B_mn delta_u`` computed by the evaluator) go to
``result.json`` under ``metrics["counterfactual"]``. Keys: see ``strategies/fedgc.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from logging import WARNING
from typing import Any

import numpy as np
from flwr.common.logger import log

from fedcausal_flwr.core import statespace as ss
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies.fedgc import FedGC, strategy_kwargs


def parse_delta(text: Any) -> np.ndarray:
    """``"1,0.5"`` (or a list) -> array; empty -> empty array."""
    if isinstance(text, (list, tuple, np.ndarray)):
        return np.asarray(text, dtype=float)
    parts = [p for p in str(text or "").split(",") if p.strip()]
    return np.array([float(p) for p in parts])


class FedCF(FedGC):
    """Federated counterfactual learning in LTI state space (Mohamed, Mohanty, Gebraeel).

    Parameters
    ----------
    query : tuple (m, n, delta_u), optional
        The counterfactual query answered after training.
    """

    algorithm = "fedcf"
    model = "fedcf"
    progress_keys = ("L_s", "penalty", "residual", "err_A", "err_B", "n_clients", "seconds")

    def __init__(self, settings: ss.Settings | None = None, *,
                 query: tuple[int, int, np.ndarray] | None = None, **kwargs: Any) -> None:
        super().__init__(settings or ss.Settings(xi=10.0, learn_phi=True), **kwargs)
        self.query = query
        self.answer: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        """Settings and the query."""
        q = None if self.query is None else [self.query[0], self.query[1],
                                             list(map(float, self.query[2]))]
        return {**super().config(), "query": q}

    def setup_shapes(self, i: int) -> list[tuple[int, ...]]:
        """``A_mm`` and ``B_mm``."""
        return [(self.P[i], self.P[i]), (self.P[i], self.U[i])]

    def state_shapes(self, i: int, W: int) -> list[tuple[int, ...]]:
        """Target, ``hhat_a^{t-1}``, ``hhat_c^{t-1}``, ``u^{t-1}`` and the local loss."""
        p = self.P[i]
        return [(W, p)] * 3 + [(W, self.U[i]), ()]

    n_grads = 2  # [g, g~]

    def estimates(self) -> dict[str, np.ndarray]:
        """FedGC's estimates plus ``B_hat``."""
        out = super().estimates()
        if self.server is not None:
            out["B_hat"] = self.server.B_hat
        return out

    def after_training(self, grid, result: RunResult) -> None:
        """Answer the configured counterfactual query through one ``ss_query`` exchange."""
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

    def setup(self, nodes) -> None:
        """FedGC's sizes plus the measurement sizes (for the query's answer)."""
        super().setup(nodes)
        self.D = [int(nodes[c].props["d"]) for c in self.cids]


def from_run_config(rc: Mapping[str, Any]) -> FedCF:
    """The App's strategy for ``algorithm = "fedcf"``."""
    from fedcausal_flwr.data.statespace import merged_config

    full = merged_config(rc, "fedcf")
    du = parse_delta(full.get("ss-cf-delta", ""))
    query = (int(full.get("ss-cf-client", 1)), int(full.get("ss-cf-source", 0)), du) \
        if du.size else None
    kw = strategy_kwargs(rc, "fedcf")
    if query is not None and kw["settings"].target == "predicted":
        log(WARNING, "fedcf: a counterfactual query with the paper's literal server target: "
            "with i.i.d. inputs it learns B_hat ~ 0 (spec A5; measured CF error 1.0), set "
            'ss-target="innovation" for an answer that recovers B_mn')
    return FedCF(query=query, **kw)
