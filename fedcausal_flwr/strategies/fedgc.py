"""FedGC strategy: the server model of the off-diagonal blocks ``A_mn`` (Granger causality).

Protocol (one ``train.ss_window`` exchange per window of W time steps, plus one setup):

``ss_setup``   client m -> ``A_mm`` (once).
``ss_window``  server -> client m: the gradient w.r.t. ``hhat_a^{t-1}`` of the previous window
               (``W_prev x P_m``) and the window bounds; client m -> ``[hhat_a^{t-1},
               hhat_c^{t-1}]`` of the next window (``W x P_m`` each) and its local loss.
               A last exchange only delivers the final gradients.

Every window needs every client (the server model of each client uses all the others'
states), so a missing or invalid reply stops the run with the finished windows kept.

Run-config keys (defaults here; a ``.json`` at ``data-path`` may set them, see
``data/statespace.py`` for the data keys): ``ss-window`` (1000), ``ss-epochs`` (30),
``ss-lr-server`` (1.5), ``ss-lr-client`` (1.5), ``ss-eta1`` (1), ``ss-eta2`` (1),
``ss-lambda-g`` (0), ``ss-lambda-l`` (0), DP: ``ss-dp`` (false), ``ss-dp-epsilon`` (0.5),
``ss-dp-delta`` (1e-5), ``ss-dp-clip-msg`` (5), ``ss-dp-clip-grad`` (1) (noise seeded by
``seed``; per-release and composed epsilon in ``metrics["privacy"]``); FedCF adds
``ss-xi`` (10), ``ss-learn-phi`` (true), ``ss-init-std`` (0.1; FedGC 0),
``ss-target`` ("predicted" | "refined" | "innovation"), ``ss-alg1-literal`` (false) and the
query keys ``ss-cf-client``, ``ss-cf-source``, ``ss-cf-delta`` (comma-separated floats;
empty: no query).
``num-rounds`` is not used: the schedule is ``epochs * ceil((T - 1) / W) + 1`` exchanges.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from fedcausal_flwr.core import statespace as ss
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies.base import CausalStrategy, NodeInfo, TooFewReplies


def settings_from_run_config(rc: Mapping[str, Any], model: str = "fedgc") -> ss.Settings:
    """:class:`ss.Settings` from hyphenated run-config keys (FedGC: no xi, no phi)."""
    cf = model == "fedcf"
    target = str(rc.get("ss-target", "predicted")) if cf else "predicted"
    if target not in ss.TARGETS:
        raise ValueError(f"ss-target {target!r}: use one of {', '.join(ss.TARGETS)}")
    return ss.Settings(
        window=int(rc.get("ss-window", 1000)), epochs=int(rc.get("ss-epochs", 30)),
        lr_server=float(rc.get("ss-lr-server", 1.5)),
        lr_client=float(rc.get("ss-lr-client", 1.5)), eta1=float(rc.get("ss-eta1", 1.0)),
        eta2=float(rc.get("ss-eta2", 1.0)), lambda_g=float(rc.get("ss-lambda-g", 0.0)),
        lambda_l=float(rc.get("ss-lambda-l", 0.0)),
        xi=float(rc.get("ss-xi", 10.0)) if cf else 0.0,
        learn_phi=bool(rc.get("ss-learn-phi", True)) if cf else False,
        target=target,
        alg1_literal=bool(rc.get("ss-alg1-literal", False)) if cf else False,
        dp=bool(rc.get("ss-dp", False)), dp_epsilon=float(rc.get("ss-dp-epsilon", 0.5)),
        dp_delta=float(rc.get("ss-dp-delta", 1e-5)),
        dp_clip_msg=float(rc.get("ss-dp-clip-msg", 5.0)),
        dp_clip_grad=float(rc.get("ss-dp-clip-grad", 1.0)), seed=int(rc.get("seed", 0)),
        init_std=float(rc.get("ss-init-std", 0.1 if cf else 0.0)))


class FedGC(CausalStrategy):
    """Federated Granger causality with state-space clients (Mohanty et al.).

    Parameters
    ----------
    settings : ss.Settings
        Window, epochs, step sizes; the client share is sent with every window.
    """

    algorithm = "fedgc"
    model = "fedgc"
    progress_keys = ("L_s", "penalty", "err_A", "n_clients", "seconds")

    def __init__(self, settings: ss.Settings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or ss.Settings()
        self.server: ss.ServerParams | None = None
        self.cids: list[int] = []

    def config(self) -> dict[str, Any]:
        """Settings recorded in ``result.json``."""
        return {**super().config(), **asdict(self.settings), "model": self.model}

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Clients must agree on the number of time steps ``t`` (sizes may differ)."""
        ts = [i.props.get("t") for i in infos]
        return {"t": Counter(ts).most_common(1)[0][0]} if ts else {}

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Sizes of every client."""
        self.cids = sorted(nodes)
        self.T = int(nodes[self.cids[0]].props["t"])
        self.P = [int(nodes[c].props["p"]) for c in self.cids]
        self.U = [int(nodes[c].props["u"]) if self.model == "fedcf" else 0 for c in self.cids]

    def client_config(self) -> dict[str, Any]:
        """The client's hyper-parameters, sent with every window."""
        s = self.settings
        return {"lr-client": s.lr_client, "eta1": s.eta1, "eta2": s.eta2,
                "lambda-l": s.lambda_l, "xi": s.xi, "learn-phi": s.learn_phi,
                "target": s.target, "alg1-literal": s.alg1_literal, "dp": s.dp,
                "dp-epsilon": s.dp_epsilon, "dp-delta": s.dp_delta,
                "dp-clip-msg": s.dp_clip_msg, "seed": s.seed, "init-std": s.init_std}

    # ---- the protocol -----------------------------------------------------------------------
    def setup_shapes(self, i: int) -> list[tuple[int, ...]]:
        """``A_mm``."""
        return [(self.P[i], self.P[i])]

    def state_shapes(self, i: int, W: int) -> list[tuple[int, ...]]:
        """``[hhat_a^{t-1}, hhat_c^{t-1}]`` and the local loss."""
        return [(W, self.P[i])] * 2 + [()]

    n_grads = 1

    def grads_down(self, win: ss.ServerWindow | None, i: int, k: int) -> list[np.ndarray]:
        """Gradients of window k for the i-th client (FedGC: w.r.t. ``hhat_a^{t-1}``, eq 22)."""
        if win is None:
            return [np.zeros((0, self.P[i]))] * self.n_grads
        return ss.private(ss.grads_down(win, i, self.model), self.settings, 2, self.cids[i], k)

    def _all(self, replies: Mapping[int, list[np.ndarray]], phase: str) -> None:
        missing = [c for c in self.cids if c not in replies]
        if missing:
            raise TooFewReplies(f"round {self._round}: clients {missing} gave no valid reply "
                                f"to train.{phase}; every window needs every client")

    def run_rounds(self, grid, result: RunResult) -> None:
        """Setup, then one exchange per window, then the final gradients."""
        self._round = 1
        replies = self.exchange(grid, "ss_setup", {c: ([], {}) for c in self.cids},
                                {c: self.setup_shapes(i) for i, c in enumerate(self.cids)})
        self._all(replies, "ss_setup")
        self.A_diag = [replies[c][0] for c in self.cids]
        self.B_diag = [replies[c][1] if self.model == "fedcf" else np.zeros((p, 0))
                       for c, p in zip(self.cids, self.P, strict=True)]
        for m, A in enumerate(self.A_diag):
            if ss.spectral_radius(A) >= 1:
                raise TooFewReplies(f"client {self.cids[m]}: A_mm is unstable")
        self.server = ss.initial_server_for(self.P, self.U, self.settings)
        self.on_setup(result)
        plan = ss.windows(self.T, self.settings.window, self.settings.epochs)
        prev, win = np.arange(0), None
        for k, ts in enumerate([*plan, np.arange(0)]):
            self._round = k + 2
            self._bytes = {"up": 0, "down": 0}
            t0 = time.time()
            cfg = {**self.client_config(), "start": int(ts[0]) if ts.size else 0,
                   "stop": int(ts[-1]) + 1 if ts.size else 0,
                   "prev-start": int(prev[0]) if prev.size else 0,
                   "prev-stop": int(prev[-1]) + 1 if prev.size else 0, "window-index": k + 1}
            payloads = {c: (self.grads_down(win, i, k), cfg) for i, c in enumerate(self.cids)}
            shapes = {c: self.state_shapes(i, ts.size) for i, c in enumerate(self.cids)}
            replies = self.exchange(grid, "ss_window", payloads, shapes)
            self._all(replies, "ss_window")
            if not ts.size:
                break
            msgs = [replies[c][:-1] for c in self.cids]
            _, win, self.server = ss.server_update(self.A_diag, self.B_diag, self.server, msgs,
                                                   self.settings, self.model)
            prev = ts
            rec = {**ss.history_row(k + 1, win, [float(replies[c][-1]) for c in self.cids]),
                   "n_clients": len(replies), "bytes_up": self._bytes["up"],
                   "bytes_down": self._bytes["down"]}
            if self.evaluate_fn is not None:
                rec.update(self.evaluate_fn(self.estimates(), self.cids))
            rec["seconds"] = time.time() - t0
            self.record_round(result, rec, show=k % max(1, len(plan) // 20) == 0
                              or k == len(plan) - 1)
        self.after_training(grid, result)

    def privacy(self, windows: int) -> dict[str, Any]:
        """Per-release and composed (epsilon, delta) per client over ``windows`` exchanges."""
        from fedcausal_flwr.privacy import GaussianRelease, composed

        s = self.settings
        msg = GaussianRelease(s.dp_epsilon, s.dp_delta, s.dp_clip_msg)
        grad = GaussianRelease(s.dp_epsilon, s.dp_delta, s.dp_clip_grad)
        eps, delta = composed([(s.dp_epsilon, s.dp_delta)] * (2 * windows))
        return {"per_release_epsilon": s.dp_epsilon, "per_release_delta": s.dp_delta,
                "sigma_msg": msg.sigma, "sigma_grad": grad.sigma, "clip_msg": s.dp_clip_msg,
                "clip_grad": s.dp_clip_grad, "releases_per_client": 2 * windows,
                "composed_epsilon": eps, "composed_delta": delta,
                "composition": "basic sequential over the client's state and gradient releases"}

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)  # resets metrics to the final evaluation
        if self.settings.dp:
            result.metrics["privacy"] = self.privacy(len(result.history))

    def on_setup(self, result: RunResult) -> None:
        """Hook after the local blocks arrived."""

    def after_training(self, grid, result: RunResult) -> None:
        """Hook after the last window (FedCF answers its counterfactual query here)."""

    def estimates(self) -> dict[str, np.ndarray]:
        """Learned off-diagonal blocks, the full estimate with the known diagonal blocks."""
        if self.server is None:
            return {}
        return {"A_hat": self.server.A_hat,
                "A_full": ss.full_estimate(self.A_diag, self.server.A_hat),
                "client_ids": np.array(self.cids)}


def synthetic_evaluator(rc: Mapping[str, Any], model: str):
    """``evaluate_fn`` against the synthetic truth (the server regenerates the system)."""
    from fedcausal_flwr.data.statespace import merged_config, synthetic_system

    full = merged_config(rc, model)
    if str(full.get("ss-data", "synthetic")) != "synthetic":
        return None
    sys = synthetic_system(full)

    def evaluate(est: Mapping[str, np.ndarray], cids: Sequence[int]) -> dict[str, Any]:
        if len(cids) != len(sys.P) or "A_hat" not in est:
            return {}
        off = ss._off_diagonal(sys.A, sys.B, sys.P, sys.U)[0]
        out = {"err_A": float(np.linalg.norm(est["A_hat"] - off))}
        if len(sys.P) >= 2:
            out["err_A21"] = ss.block_error(est["A_hat"], sys.A, sys.P, sys.P, 1, 0)
            out["norm_A12"] = ss.block_error(est["A_hat"], 0 * sys.A, sys.P, sys.P, 0, 1)
        if "B_hat" in est and np.size(est["B_hat"]):
            offB = ss._off_diagonal(sys.A, sys.B, sys.P, sys.U)[1]
            out["err_B"] = float(np.linalg.norm(est["B_hat"] - offB))
            C21 = sys.block(sys.C, sys.D, sys.P, 1, 1)
            out["cf_error_21"] = ss.counterfactual_error(
                C21, sys.block(est["B_hat"], sys.P, sys.U, 1, 0),
                sys.block(sys.B, sys.P, sys.U, 1, 0))
        return out

    return evaluate


def strategy_kwargs(rc: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Keyword arguments from the run config (merged with a ``.json`` at ``data-path``)."""
    from fedcausal_flwr.data.statespace import merged_config

    full = merged_config(rc, model)
    return {"settings": settings_from_run_config(full, model),
            "min_nodes": int(full.get("min-nodes", 2)),
            "node_wait_s": float(full.get("node-wait-s", 60.0)),
            "timeout_s": float(full.get("round-timeout-s", 600.0)),
            "evaluate_fn": synthetic_evaluator(full, model)}


def from_run_config(rc: Mapping[str, Any]) -> FedGC:
    """The App's strategy for ``algorithm = "fedgc"``."""
    return FedGC(**strategy_kwargs(rc, "fedgc"))
