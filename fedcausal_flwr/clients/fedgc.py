"""FedGC client: proprietary Kalman filter plus the private augmentation ``theta_m y_m``.

Phases: ``train.ss_setup`` returns ``A_mm`` once; ``train.ss_window`` applies the server's
gradients of the previous window (one Jacobi step of ``theta_m``) and returns the states of
the next window with ``hhat_a = hhat_c + theta_m y_m`` (clipped and noised when the strategy
asks for DP; the local loss is then not reported). ``y_m``, ``C_mm``, ``K_m`` and
``theta_m`` stay here; ``theta_m`` persists between messages in the node's ``context.state``.
The client-side hyper-parameters come with every window from the strategy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import ArrayRecord, Context, RecordDict
from flwr.client import NumPyClient

from fedcausal_flwr.core import statespace as ss

MODEL = "fedgc"


def settings_from_config(config: dict[str, Any]) -> ss.Settings:
    """The client's share of :class:`ss.Settings`, as the strategy sends it."""
    return ss.Settings(lr_client=float(config["lr-client"]), eta1=float(config["eta1"]),
                       eta2=float(config["eta2"]), lambda_l=float(config["lambda-l"]),
                       xi=float(config["xi"]), learn_phi=bool(config["learn-phi"]),
                       target=str(config["target"]), alg1_literal=bool(config["alg1-literal"]),
                       dp=bool(config.get("dp", False)),
                       dp_epsilon=float(config.get("dp-epsilon", 0.5)),
                       dp_delta=float(config.get("dp-delta", 1e-5)),
                       dp_clip_msg=float(config.get("dp-clip-msg", 5.0)),
                       seed=int(config.get("seed", 0)),
                       init_std=float(config.get("init-std", 0.0)))


class FedGCClient(NumPyClient):
    """Holds ``(A_mm, C_mm, K_m, y_m)`` (and ``B_mm, u_m`` in FedCF); answers the windows."""

    phases = ("ss_setup", "ss_window")
    model = MODEL

    def __init__(self, A: np.ndarray, C: np.ndarray, K: np.ndarray, y: np.ndarray,
                 B: np.ndarray | None = None, u: np.ndarray | None = None,
                 partition_id: int = 0, num_partitions: int = 1,
                 state: RecordDict | None = None) -> None:
        self.who = f"client {partition_id}"
        T, p = np.shape(y)[0], np.shape(A)[0]
        B = np.zeros((p, 0)) if B is None else B
        u = np.zeros((T, 0)) if u is None else u
        self.data = ss.checked_client(A, B, C, K, y, u, self.who)
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.state = state if state is not None else RecordDict()

    @classmethod
    def from_context(cls, context: Context) -> FedGCClient:
        """This node's client from the run config (synthetic system or plant data)."""
        from fedcausal_flwr.data.statespace import client_data, merged_config

        pid = int(context.node_config.get("partition-id", 0))
        k = int(context.node_config.get("num-partitions", 1))
        try:
            c = client_data(merged_config(context.run_config, cls.model), pid)
        except ValueError as e:
            raise ValueError(f"client {pid}: {e}") from e
        return cls(c.A, c.C, c.K, c.y, c.B, c.u, pid, k, context.state)

    # ---- private parameters in context.state ----------------------------------------------
    def params(self, s: ss.Settings) -> ss.ClientParams:
        """``theta_m, phi_m`` (their seeded start before the first window)."""
        if "ss_params" not in self.state.array_records:
            return ss.initial_client(self.data, s, self.partition_id)
        theta, phi = self.state["ss_params"].to_numpy_ndarrays()
        curv = float(self.state["ss_curv"].to_numpy_ndarrays()[0])
        return ss.ClientParams(theta, phi, curv)

    def store(self, par: ss.ClientParams) -> None:
        """Keep ``theta_m, phi_m`` and the running curvature bound in the node's state."""
        self.state["ss_params"] = ArrayRecord([par.theta, par.phi])
        self.state["ss_curv"] = ArrayRecord([np.asarray(par.curv)])

    # ---- the NumPyClient interface ---------------------------------------------------------
    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is and its sizes (no data)."""
        p, u, d = self.data.dims
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "t": int(self.data.y.shape[0]), "p": p, "u": u, "d": d}

    def local_blocks(self) -> list[np.ndarray]:
        """What is sent once: ``A_mm``."""
        return [self.data.A]

    n_grads = 1  # FedGC receives only the gradient w.r.t. hhat_a^{t-1}

    def gradients(self, parameters: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(g, g~)`` of the previous window."""
        return ss.grads_received(self._checked(parameters, self.n_grads, n), self.model)

    def _checked(self, parameters: list[np.ndarray], count: int, n: int) -> list[np.ndarray]:
        p = self.data.dims[0]
        if len(parameters) != count:
            raise ValueError(f"{self.who}: expected {count} gradient arrays, got "
                             f"{len(parameters)}")
        for a in parameters:
            if a.shape != (n, p) or not np.all(np.isfinite(a)):
                raise ValueError(f"{self.who}: server gradient of shape {a.shape} (need "
                                 f"{(n, p)}, finite)")
        return parameters

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]
            ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        """``ss_setup`` -> local blocks; ``ss_window`` -> step on the old window, new states."""
        phase = config.get("phase")
        if phase == "ss_setup":
            return self.local_blocks(), 0, {}
        if phase != "ss_window":
            raise ValueError(f"{self.who}: unknown {self.model} phase {phase!r}")
        s = settings_from_config(config)
        T = self.data.y.shape[0]
        prev = np.arange(int(config["prev-start"]), int(config["prev-stop"]))
        ts = np.arange(int(config["start"]), int(config["stop"]))
        if (prev.size and (prev[0] < 1 or prev[-1] >= T)) or (ts.size and (ts[0] < 1
                                                                          or ts[-1] >= T)):
            raise ValueError(f"{self.who}: window outside t = 1..{T - 1}")
        par = self.params(s)
        if prev.size:
            g, g_tilde = self.gradients(parameters, prev.size)
            par = ss.client_step(self.data, par, prev, g, g_tilde, s)
            self.store(par)
        sent = ss.private(ss.sent_states(ss.client_states(self.data, par, ts, s), self.model),
                          s, 1, self.partition_id, int(config.get("window-index", 0)))
        loss = ss.local_loss(self.data, par, ts) if ts.size and not s.dp else 0.0
        return [*sent, np.asarray(loss)], int(ts.size), {"loss": loss}


def from_context(context: Context) -> FedGCClient:
    """The App's entry point for ``algorithm = "fedgc"``."""
    return FedGCClient.from_context(context)
