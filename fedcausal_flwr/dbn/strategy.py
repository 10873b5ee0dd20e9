"""FDBNL strategy: ADMM consensus on (W, A); the server keeps the duals by client id.

PFDBNL strategy: personalized DBNs by proximal ADMM; exact averaging on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.model import FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.dbn.wire import PHASES, shapes
from fedcausal_flwr.federation.strategy import CausalStrategy, NodeInfo, Payload, Shape
from fedcausal_flwr.names import lagged_names


class FDBNL(CausalStrategy):
    """Federated DBN structure learning (Algorithm 1 of Chen, Ma, Yue 2025).

    Each round sends client k ``[W, A, beta_k, gamma_k]`` with ``rho2`` and the wire settings
    and receives its local solution ``[B_k, D_k]`` (:data:`~fedcausal_flwr.dbn.wire.PHASES`).
    The duals are a deterministic function of what the server receives, so the server keeps
    them (by partition id) and clients stay stateless: a client left out of a round keeps its
    duals, a restarted SuperNode loses nothing.
    ``start(initial_arrays=[W, A])`` warm-starts the consensus graph.

    Parameters
    ----------
    settings : FDBNLSettings
        Penalties, lambdas, stop rule, participation, thresholds (default: the App's).
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change (see
        :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`).
    """

    algorithm = "fdbnl"
    settings_class = FDBNLSettings
    phase = "local"
    progress_keys = ("h", "rho1", "primal_residual", "shd_w", "tpr_w", "fdr_w", "shd_a",
                     "tpr_a", "fdr_a", "auroc", "aupr", "n_clients", "dropped", "seconds")

    def __init__(self, settings: FDBNLSettings | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.state: dbn.ServerState | None = None

    def expected_props(self, infos):
        """Clients must agree on d and p (the configured ones when given)."""
        want = super().expected_props(infos)
        s = self.settings
        want.update({k: v for k, v in (("d", s.d), ("p", s.p)) if v})
        return want

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """W = A = 0 for the agreed d, p."""
        info = next(iter(nodes.values())).props
        self.d, self.p = int(info["d"]), int(info["p"])
        self.variables = self.agreed_names(self.d)
        self.state = dbn.initial_state(self.d, self.p, self.settings.rho1, self.settings.rho2)
        self.rng = np.random.default_rng(self.settings.seed)

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start the consensus from ``[W, A]`` instead of zeros."""
        if len(arrays) != 2:
            raise ValueError(f"{type(self).__name__} warm start takes [W, A], got "
                             f"{len(arrays)} arrays")
        s = self.settings
        self.state = dbn.initial_state(self.d, self.p, s.rho1, s.rho2, (arrays[0], arrays[1]))

    def select(self) -> list[int]:
        """All clients, or ``clients_per_round`` sampled uniformly without replacement."""
        return dbn.participants(sorted(self.nodes), self.settings.clients_per_round, self.rng)

    def payload(self, cid: int) -> Payload:
        """``[W, A, beta_k, gamma_k]``, rho2 and the wire settings."""
        return dbn.fdbnl_client_payload(self.state, cid), {
            "rho2": float(self.state.rho2), **self.settings.to_wire()}

    def reply_shapes(self) -> list[Shape]:
        """The phase's reply (:data:`~fedcausal_flwr.dbn.wire.PHASES`)."""
        return shapes(PHASES[self.phase].up, self.d, self.p)

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray]:
        """The Byzantine screen compares what the server averages of a reply: client k's
        consensus targets ``B_k + beta_k / rho2`` and ``D_k + gamma_k / rho2`` (PFDBNL: of its
        copies ``W~_k, A~_k``). Not ``B_k`` alone: a client back from missed rounds answers
        with its older duals, and its ``B_k`` differs by what they lag, its target does not."""
        st, rho2 = self.state, self.state.rho2
        zW, zA = np.zeros_like(st.W), np.zeros_like(st.A)
        return [np.concatenate([
            np.ravel(dbn.consensus_target(arrays[0], st.beta.get(cid, zW), rho2) - st.W),
            np.ravel(dbn.consensus_target(arrays[1], st.gamma.get(cid, zA), rho2) - st.A)])]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Global step, duals, alpha and rho."""
        local = {c: (a[0], a[1]) for c, a in replies.items()}
        self.state = dbn.fdbnl_server_round(self.state, local,
                                            **self.settings.fdbnl_round_args())

    def record(self) -> dict[str, Any]:
        """h, penalties and the primal residual max_k ||B_k - W|| / max(||W||, 1)."""
        return {"h": self.state.h, "alpha": self.state.alpha, "rho1": self.state.rho1,
                "rho2": self.state.rho2, "primal_residual": self.state.residual}

    def estimates(self) -> dict[str, np.ndarray]:
        """Unthresholded and thresholded W and A."""
        if self.state is None:
            return {}
        W, A, s = self.state.W, self.state.A, self.settings
        return {"W": W, "A": A, "W_thresholded": dbn.threshold(W, s.tau_w),
                "A_thresholded": dbn.threshold(A, s.tau_a)}

    def result_names(self) -> dict[str, Any]:
        """W (and W_k) rows and columns are the d variables; A's rows are ``name(t-k)`` for
        lag k = 1..p, its columns the variables."""
        if self.state is None:
            return {}
        v = self.variables
        lag = {"rows": lagged_names(v, self.p), "cols": list(v)}
        out: dict[str, Any] = {"variables": list(v)}
        for key in self.estimates():
            if key.startswith("W"):
                out[key] = list(v)
            elif key.startswith("A"):
                out[key] = lag
        return out

    def done(self) -> bool:
        """h(W) <= h_tol or the settings' round budget is spent."""
        return dbn.converged(self.state, **self.settings.stop_args())


class PFDBNL(FDBNL):
    """Personalized FDBNL (Algorithm 2 of Chen, Ma, Yue 2025).

    Client k gets ``[W, A, W~_k, A~_k, beta_k, gamma_k]`` with alpha, rho1, rho2 and the wire
    settings (mu, the lambdas, ``code_compat``, ``restarts``), and returns its copies
    ``W~_k, A~_k``, its personalized ``W_k, A_k`` (derivable from the copies and duals, so
    nothing new is revealed) and ``h(W_k)``.
    """

    algorithm = "pfdbnl"
    settings_class = PFDBNLSettings
    phase = "personal"

    def payload(self, cid: int) -> Payload:
        """Anchors, duals, the round's scalars and the wire settings."""
        st = self.state
        return dbn.pfdbnl_client_payload(st, cid), {
            "alpha": float(st.alpha), "rho1": float(st.rho1), "rho2": float(st.rho2),
            **self.settings.to_wire()}

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Exact average, duals, alpha (mean h) and rho."""
        self.state = dbn.pfdbnl_server_round(self.state, replies,
                                             **self.settings.pfdbnl_round_args())

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
