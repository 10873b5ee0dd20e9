"""FDBNL strategy: ADMM consensus on (W, A); the server keeps the duals by client id."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from fedcausal_flwr.core import dbn
from fedcausal_flwr.strategies.base import CausalStrategy, NodeInfo, Payload, Shape


class FDBNL(CausalStrategy):
    """Federated DBN structure learning (Algorithm 1 of Chen, Ma, Yue 2025).

    Each round sends client k ``[W, A, beta_k, gamma_k]`` and ``rho2`` and receives its local
    solution ``[B_k, D_k]``. The duals are a deterministic function of what the server
    receives, so the server keeps them (by partition id) and clients stay stateless: a client
    left out of a round keeps its duals, a restarted SuperNode loses nothing.

    Parameters
    ----------
    settings : ADMMSettings
        Penalties, lambdas, stop rule, participation and code-compatibility flags.
    seed : int
        Seed of the client sampling under partial participation.
    tau_w, tau_a : float
        Thresholds of the reported graphs.
    d, p : int, optional
        Expected data shape; by default the majority of what the clients report.
    """

    algorithm = "fdbnl"
    phase = "local"
    progress_keys = ("h", "rho1", "primal_residual", "shd_w", "tpr_w", "fdr_w", "shd_a",
                     "tpr_a", "fdr_a", "auroc", "aupr", "n_clients", "dropped", "seconds")

    def __init__(self, settings: dbn.ADMMSettings | None = None, *, seed: int = 0,
                 tau_w: float = 0.3, tau_a: float = 0.3, d: int | None = None,
                 p: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or dbn.ADMMSettings()
        self.seed, self.tau_w, self.tau_a, self.d, self.p = seed, tau_w, tau_a, d, p
        self.state: dbn.ServerState | None = None
        self._replies: dict[int, list[np.ndarray]] = {}

    def config(self) -> dict[str, Any]:
        """Settings recorded in ``result.json``."""
        return {**super().config(), **asdict(self.settings), "seed": self.seed,
                "tau_w": self.tau_w, "tau_a": self.tau_a}

    def expected_props(self, infos):
        """Clients must agree on d and p (the configured ones when given)."""
        want = super().expected_props(infos)
        want.update({k: v for k, v in (("d", self.d), ("p", self.p)) if v is not None})
        return want

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """W = A = 0 for the agreed d, p."""
        info = next(iter(nodes.values())).props
        self.d, self.p = int(info["d"]), int(info["p"])
        self.state = dbn.initial_state(self.d, self.p, self.settings)
        self.rng = np.random.default_rng(self.seed)

    def select(self) -> list[int]:
        """All clients, or ``clients_per_round`` sampled uniformly without replacement."""
        return dbn.participants(sorted(self.nodes), self.settings.clients_per_round, self.rng)

    def payload(self, cid: int) -> Payload:
        """``[W, A, beta_k, gamma_k]`` and rho2."""
        return dbn.fdbnl_client_payload(self.state, cid), {"rho2": float(self.state.rho2)}

    def reply_shapes(self) -> list[Shape]:
        """``B_k`` (d x d) and ``D_k`` (pd x d)."""
        return [(self.d, self.d), (self.p * self.d, self.d)]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Global step, duals, alpha and rho."""
        self._replies = dict(replies)
        local = {c: (a[0], a[1]) for c, a in replies.items()}
        self.state = dbn.fdbnl_server_round(self.state, local, self.settings)

    def record(self) -> dict[str, Any]:
        """h, penalties and the primal residual max_k ||B_k - W|| / ||W||."""
        W = self.state.W
        res = max(np.linalg.norm(a[0] - W) for a in self._replies.values())
        return {"h": self.state.h, "alpha": self.state.alpha, "rho1": self.state.rho1,
                "rho2": self.state.rho2,
                "primal_residual": float(res / max(np.linalg.norm(W), 1e-12))}

    def estimates(self) -> dict[str, np.ndarray]:
        """Unthresholded and thresholded W and A."""
        W, A = self.state.W, self.state.A
        return {"W": W, "A": A, "W_thresholded": dbn.threshold(W, self.tau_w),
                "A_thresholded": dbn.threshold(A, self.tau_a)}

    def done(self) -> bool:
        """h(W) <= h_tol or the round budget is spent."""
        return dbn.converged(self.state, self.settings)


def settings_from_run_config(rc: Mapping[str, Any]) -> dbn.ADMMSettings:
    """ADMMSettings from the App's run config (hyphenated keys, defaults where absent)."""
    s = dbn.ADMMSettings()
    keys = {"lambda_w": "lambda-w", "lambda_a": "lambda-a", "lambda_scale": "lambda-scale",
            "rho1": "rho1", "rho2": "rho2", "phi1": "phi1", "phi2": "phi2",
            "rho_max": "rho-max", "h_tol": "h-tol", "max_rounds": "num-rounds", "mu": "mu",
            "dual_update": "dual-update", "code_compat": "code-compat",
            "clients_per_round": "clients-per-round"}
    values = {f: type(getattr(s, f))(rc[k]) for f, k in keys.items() if k in rc}
    return replace(s, **values)


def strategy_kwargs(rc: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments shared by FDBNL and PFDBNL, from the run config."""
    return {"settings": settings_from_run_config(rc), "seed": int(rc.get("seed", 0)),
            "tau_w": float(rc.get("tau-w", 0.3)), "tau_a": float(rc.get("tau-a", 0.3)),
            "min_nodes": int(rc.get("min-nodes", 2)),
            "node_wait_s": float(rc.get("node-wait-s", 60.0)),
            "timeout_s": float(rc.get("round-timeout-s", 600.0))}


def from_run_config(rc: Mapping[str, Any]) -> FDBNL:
    """The App's strategy for ``algorithm = "fdbnl"``, evaluated against the known truth."""
    from fedcausal_flwr.evaluation import dbn_evaluator

    kw = strategy_kwargs(rc)
    return FDBNL(**kw, evaluate_fn=dbn_evaluator(rc, kw["tau_w"], kw["tau_a"]))


def truth_for_plots(rc: Mapping[str, Any], result: Any) -> dict[str, np.ndarray]:
    """The true W and A of a homogeneous synthetic run (for the PNG), else nothing."""
    if str(rc.get("data", "synthetic")) != "synthetic":
        return {}
    from fedcausal_flwr.data.dbn import ground_truth

    (W, A), (W1, _) = ground_truth(rc, 2)
    return {"W": W, "A": A} if np.array_equal(W, W1) else {}
