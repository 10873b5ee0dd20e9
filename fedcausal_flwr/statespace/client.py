"""FedGC client: proprietary Kalman filter plus the private augmentation ``theta_m y_m``.

Phases: ``train.ss_setup`` returns ``A_mm`` once; ``train.ss_window`` applies the server's
gradient ``g~_m`` of the previous window (one Jacobi step of ``theta_m``, eq 24) and returns
``[hhat_a^{t-1}, hhat_c^{t-1}]`` of the next window with ``hhat_a = hhat_c + theta_m y_m``
(clipped and noised when the settings ask for DP; the local loss is then not reported).
``y_m``, ``C_mm``, ``K_m`` and ``theta_m`` stay here; ``theta_m`` persists between messages in
the node's ``context.state``. The client's share of the settings comes with every window from
the strategy (:meth:`~fedcausal_flwr.settings.Settings.to_wire`, read back by ``from_wire``).

A user's own ClientApp: ``register(app, "fedgc", lambda ctx: {"A": A_mm, "C": C_mm, "K": K_m,
"y": y_m})`` (FedCF adds ``"B"`` and ``"u"``).

FedCF client: FedGC's client with inputs, the constant ``phi_m`` and counterfactual answers.

Phases: ``ss_setup`` returns ``[A_mm, B_mm]``; ``ss_window`` returns
``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]`` of the next window (the target per
``FedCFSettings.target``) after the Jacobi step on ``(theta_m, phi_m)`` (eqs 9-10) with the
server's ``[g, g~]``; ``ss_query`` turns the server's ``delta_h = B_hat_mn delta_u_n`` into
the answer ``C_mm delta_h`` (the change of ``E[y_m]``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from flwr.app import ArrayRecord, Context, RecordDict

from fedcausal_flwr.federation.client import CausalClient, Fit, check_shapes
from fedcausal_flwr.names import checked_names, joined
from fedcausal_flwr.statespace import kalman
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.model import FedCFSettings, FedGCSettings, StateSpaceSettings
from fedcausal_flwr.statespace.settings import WindowInputs
from fedcausal_flwr.statespace.wire import PHASES, layout, shapes


class FedGCClient(CausalClient):
    """Holds ``(A_mm, C_mm, K_m, y_m)`` (and known inputs ``B_mm, u_m``); answers the windows.

    Parameters
    ----------
    A, C, K : array
        The local blocks ``A_mm`` (P x P), ``C_mm`` (D x P) and the filter gain ``K_m``.
    y : array
        The measurements ``y_m`` (T x D).
    B, u : array, optional
        Known inputs ``u_m`` (T x U) of the local filter and their ``B_mm`` (P x U).
    Q, R : array, optional
        The noise covariances of the local filter (P x P, D x D), needed when ``y`` or ``u``
        has missing values (NaN cells): the filter then skips them (see
        :mod:`fedcausal_flwr.statespace.kalman`). Only the share of missing cells is told to
        the server (property ``missing``), which drops a client above ``ss-max-missing``.
    state : RecordDict, optional
        Where ``theta_m`` persists between messages (the node's ``context.state``).
    names : sequence of str, optional
        Labels of this client's D measurements (the columns of ``y``; default ``y0, y1,
        ...``). Clients measure different things, so they need not agree; the server
        records each client's names and labels the learned states ``c<client>.s<i>``.
    """

    phases: ClassVar[dict[str, str]] = {"ss_setup": "setup", "ss_window": "window"}
    algorithm: ClassVar[str] = "fedgc"
    settings_class: ClassVar[type[StateSpaceSettings]] = FedGCSettings

    def __init__(self, A: np.ndarray, C: np.ndarray, K: np.ndarray, y: np.ndarray,
                 B: np.ndarray | None = None, u: np.ndarray | None = None,
                 partition_id: int = 0, num_partitions: int = 1,
                 state: RecordDict | None = None,
                 names: Sequence[str] | None = None, Q: np.ndarray | None = None,
                 R: np.ndarray | None = None) -> None:
        self.who = f"client {partition_id}"
        T, p = np.shape(y)[0], np.shape(A)[0]
        B = np.zeros((p, 0)) if B is None else B
        u = np.zeros((T, 0)) if u is None else u
        self.data = kalman.checked_client(A, B, C, K, y, u, self.who, Q, R)
        self.names = checked_names(names, self.data.dims[2], self.who, "y", "measurements")
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.state = state if state is not None else RecordDict()

    @classmethod
    def context_arguments(cls, context: Context) -> dict[str, Any]:
        """``theta_m`` lives in the node's state."""
        return {"state": context.state}

    # ---- private parameters in context.state ----------------------------------------------
    def params(self, s: WindowInputs) -> ss.ClientParams:
        """``theta_m, phi_m`` (their seeded start before the first window)."""
        if "ss_params" not in self.state.array_records:
            return ss.initial_client(self.data, s.init_std, s.seed, self.partition_id)
        theta, phi = self.state["ss_params"].to_numpy_ndarrays()
        curv = float(self.state["ss_curv"].to_numpy_ndarrays()[0])
        return ss.ClientParams(theta, phi, curv)

    def store(self, par: ss.ClientParams) -> None:
        """Keep ``theta_m, phi_m`` and the running curvature bound in the node's state."""
        self.state["ss_params"] = ArrayRecord([par.theta, par.phi])
        self.state["ss_curv"] = ArrayRecord([np.asarray(par.curv)])

    # ---- hooks FedCF overrides -------------------------------------------------------------
    def local_blocks(self) -> dict[str, np.ndarray]:
        """What is sent once, by name: ``A_mm``."""
        return {"A_mm": self.data.A}

    def gradients(self, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(g, g~)`` from what the server sent (FedGC sends no ``g``: 0)."""
        got = layout(self.algorithm, "ss_window", "down").unpack(arrays)
        return got.get("g", np.zeros_like(got["g_tilde"])), got["g_tilde"]

    def states(self, par: ss.ClientParams, ts: np.ndarray, target: str) -> list[np.ndarray]:
        """What the server model needs of window ``ts`` (eq 15)."""
        return ss.fedgc_states(self.data, par, ts, target)

    # ---- phases ----------------------------------------------------------------------------
    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, its sizes, its measurement names and its share of missing
        cells (no data)."""
        p, u, d = self.data.dims
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "t": int(self.data.y.shape[0]), "p": p, "u": u, "d": d,
                "names": joined(self.names), "missing": float(self.data.missing)}

    def setup(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``ss_setup``: the local blocks."""
        return layout(self.algorithm, "ss_setup", "up").pack(self.local_blocks()), 0, {}

    def check(self, phase: str, parameters: list[np.ndarray], W_prev: int = 0) -> None:
        """The server's arrays of ``phase`` fit this client (:data:`PHASES`) and are finite."""
        names = PHASES[self.algorithm][phase].down
        check_shapes(self.who, parameters, shapes(names, P=self.data.dims[0], W_prev=W_prev),
                     list(names))
        for a, name in zip(parameters, names, strict=True):
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{self.who}: server sent a non-finite {name}")

    def window(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``ss_window``: a step on the previous window's gradients, the next window's states
        (the settings it reads: :class:`~fedcausal_flwr.statespace.settings.WindowInputs`)."""
        s: WindowInputs = self.settings_class.from_wire(config, self.who)
        T = self.data.y.shape[0]
        prev = np.arange(int(config["prev-start"]), int(config["prev-stop"]))
        ts = np.arange(int(config["start"]), int(config["stop"]))
        if (prev.size and (prev[0] < 1 or prev[-1] >= T)) or (ts.size and (ts[0] < 1
                                                                          or ts[-1] >= T)):
            raise ValueError(f"{self.who}: window outside t = 1..{T - 1}")
        par = self.params(s)
        if prev.size:
            self.check("ss_window", parameters, prev.size)
            g, g_tilde = self.gradients(parameters)
            par = ss.client_step(self.data, par, prev, g, g_tilde, lr_client=s.lr_client,
                                 eta1=s.eta1, eta2=s.eta2, lambda_l=s.lambda_l, xi=s.xi,
                                 learn_phi=s.learn_phi, target=s.target,
                                 alg1_literal=s.alg1_literal, difference=s.difference)
            self.store(par)
        sent = ss.private(self.states(par, ts, s.target), self.partition_id,
                          int(config.get("dp-key", config.get("window-index", 0))),
                          noise_multiplier=self.noise_multiplier(s, config),
                          clip=s.dp_clip_msg, seed=s.seed)
        loss = ss.local_loss(self.data, par, ts) if ts.size and not s.dp else 0.0
        up = layout(self.algorithm, "ss_window", "up")
        states = dict(zip((n for n in up.names if n != "loss"), sent, strict=True))
        return up.pack({**states, "loss": np.asarray(loss)}), int(ts.size), {"loss": loss}


    @staticmethod
    def noise_multiplier(s: WindowInputs, config: dict[str, Any]) -> float:
        """The server's ``dp-noise`` (``-1``: clip only, ``inf``); NaN with DP off. A DP run
        without it is an error (the client never sends its states unnoised)."""
        if not s.dp:
            return math.nan
        if "dp-noise" not in config:
            raise ValueError("ss-dp is on but the server sent no 'dp-noise'")
        z = float(config["dp-noise"])
        return math.inf if z < 0 else z


class FedCFClient(FedGCClient):
    """Answers ``ss_setup``, ``ss_window`` and ``ss_query``."""

    phases: ClassVar[dict[str, str]] = {**FedGCClient.phases, "ss_query": "query"}
    algorithm: ClassVar[str] = "fedcf"
    settings_class: ClassVar[type[StateSpaceSettings]] = FedCFSettings

    def local_blocks(self) -> dict[str, np.ndarray]:
        """``A_mm``, ``B_mm``, sent once."""
        return {"A_mm": self.data.A, "B_mm": self.data.B}

    def states(self, par: ss.ClientParams, ts: np.ndarray, target: str) -> list[np.ndarray]:
        """``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``."""
        return ss.client_states(self.data, par, ts, target)

    def query(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``ss_query``: ``[delta_h] -> [C_mm delta_h]``."""
        self.check("ss_query", parameters)
        dh = layout(self.algorithm, "ss_query", "down").unpack(parameters)["delta_h"]
        return layout(self.algorithm, "ss_query", "up").pack({"delta_y": self.data.C @ dh}), 0, {}
