"""FedGC strategy: the server model of the off-diagonal blocks ``A_mn`` (Granger causality).

Mohanty et al., federated Granger causality with state-space clients. Every setting and its
default lives in :class:`~fedcausal_flwr.statespace.model.FedGCSettings`.

Protocol (one setup exchange, then one ``train.ss_window`` exchange per window of W steps):

``ss_setup``   client m -> ``A_mm`` (once).
``ss_window``  server -> client m: the gradient ``g~_m`` w.r.t. ``hhat_a^{t-1}`` of the previous
               window (eq 22, ``W_prev x P_m``), the window bounds and the client's share of
               the settings; client m takes one Jacobi step of ``theta_m`` (eq 24) and
               returns ``[hhat_a^{t-1}, hhat_c^{t-1}]`` of the next window (``W x P_m`` each,
               the inputs of the server model, eq 15) and its local loss. The server takes
               one step of ``A_hat`` on ``L_s = mean_t sum_m ||D_m||^2`` (eqs 15-16).
               A last, unrecorded exchange only delivers the final gradients, so the clients
               end as in the reference loop (:func:`~fedcausal_flwr.statespace.loop.reference`).

Every window needs every client (the server model of each client uses all the others'
states), so a missing or invalid reply stops the run with the finished windows kept. Clients
keep ``theta_m`` in ``context.state``, so a restarted SuperNode cannot rejoin
(``rejoinable = False``): a client that leaves the SuperLink stops the run, named.

One recorded round is one window: ``epochs * ceil((T - 1) / W)`` rounds;
``start(num_rounds=n)`` records the first n windows (then delivers their gradients).
``start(initial_arrays=[A_hat])`` warm-starts the server model: its off-diagonal blocks (the
diagonal blocks are the clients' own ``A_mm``), with the step bounds starting afresh.
With ``dp`` the server derives the noise multiplier from the run's total budget for the
releases the run will make (:func:`~fedcausal_flwr.statespace.model.dp_noise_multiplier`),
sends it with every window (``dp-noise``, ``dp-key``: public numbers, no data), logs it, and
reports the composed (epsilon, delta) in ``metrics["dp"]``.

Known-zero blocks (``ss-known-zero``, clients by partition id) are checked against the
discovered clients at setup (an unknown client is an error naming it, before any window)
and held at exactly 0 in every iterate; the result reports them
(``A_offdiag_known_zero``, ``metrics["knowledge"]``) with NaN standard errors and p-values.
Each client reports its share of missing cells at discovery (property ``missing``, one number:
no cell value); a client above ``ss-max-missing`` is dropped at setup with the reason, the
others' shares go to ``metrics["missing"]``.

FedCF strategy: FedGC's protocol with inputs ``B_mn``, the residual term and counterfactuals.

Mohamed, Mohanty, Gebraeel, federated counterfactual learning in LTI state space. Every
setting and its default lives in :class:`~fedcausal_flwr.statespace.model.FedCFSettings`.

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

from collections import Counter
from collections.abc import Mapping, Sequence
from logging import INFO
from typing import Any

import numpy as np
from flwr.common.logger import log

from fedcausal_flwr.federation.replies import RepeatScreen, ReplyFilter
from fedcausal_flwr.federation.strategy import (
    CausalStrategy,
    NodeInfo,
    ProtocolStopped,
    Shape,
    TooFewReplies,
)
from fedcausal_flwr.names import split
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.statespace import kalman
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.model import FedCFSettings, FedGCSettings
from fedcausal_flwr.statespace.wire import PHASES, layout, shapes


class FedGC(CausalStrategy):
    """Federated Granger causality with state-space clients (Mohanty et al.).

    Parameters
    ----------
    settings : FedGCSettings
        Window, epochs, step sizes, DP (default: the App's); the client's share is sent with
        every window.
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change (see
        :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`).
    """

    unscreened = ("a party's own states told the same way in every window: each client is the "
                  "only source of its states (no robust rule across clients applies), and a "
                  "consistent invertible relabeling of them (a sign flip, a scaling) is, to "
                  "the server, another basis of that client's subsystem: it moves A_hat's "
                  "blocks of that client into the new basis, not the Granger test of any block")

    algorithm = "fedgc"
    settings_class = FedGCSettings
    rejoinable = False  # theta_m lives in the node's context.state: a restarted node lost it
    progress_keys = ("L_s", "penalty", "err_A", "n_clients", "seconds")

    def __init__(self, settings: FedGCSettings | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.server: ss.ServerParams | None = None
        self.cids: list[int] = []
        self.plan: list[np.ndarray] = []
        self.granger: ss.GrangerStats | None = None
        self.missing: dict[int, float] = {}
        self.dp_z = float("nan")  # the run's noise multiplier (NaN: DP off)
        self.window_key: tuple[int, int] | None = None  # the time steps of the exchange

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Clients must agree on the number of time steps ``t`` (sizes may differ)."""
        ts = [i.props.get("t") for i in infos]
        return {"t": Counter(ts).most_common(1)[0][0]} if ts else {}

    # ---- hooks FedCF overrides ----------------------------------------------------------
    def input_sizes(self, nodes: Mapping[int, NodeInfo]) -> list[int]:
        """Sizes of the inputs the server model uses (FedGC: none)."""
        return [0] * len(self.cids)

    def reply_layout(self, phase: str, i: int, W: int = 0) -> list[Shape]:
        """Client i's reply to ``phase`` for a window of W steps (:data:`PHASES`)."""
        return shapes(PHASES[self.algorithm][phase].up, P=self.P[i], U=self.U[i], D=self.D[i],
                      W=W)

    def local_blocks(self, arrays: list[np.ndarray], i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(A_mm, B_mm)`` from the setup reply (FedGC's has no ``B_mm``: no inputs)."""
        got = layout(self.algorithm, "ss_setup", "up").unpack(arrays)
        return got["A_mm"], got.get("B_mm", np.zeros((self.P[i], 0)))

    def empty_grads(self, i: int) -> dict[str, np.ndarray]:
        """What the first window carries instead of gradients, by name."""
        return {"g_tilde": np.zeros((0, self.P[i]))}

    def grads(self, win: ss.ServerWindow, i: int) -> dict[str, np.ndarray]:
        """Client i's gradients of a window by name: ``g~`` (w.r.t. ``hhat_a^{t-1}``, eq 22)."""
        return {"g_tilde": win.g_tilde[i]}

    def fixed_names(self) -> list[str]:
        """The arrays of a window's reply that the client's data fix (the same in every
        epoch): ``hc_prev`` and, with the innovation target, ``ha_prev`` (``C^+ y^t``);
        none when DP draws fresh noise for every window (:func:`~fedcausal_flwr.statespace.
        model.dp_fresh`)."""
        s = self.settings
        if s.dp and ss.dp_fresh(s):
            return []
        return ["hc_prev"] + (["ha_prev"] if s.target == "innovation" else [])

    # ---- the state screen ---------------------------------------------------------------
    def screens(self) -> list[ReplyFilter]:
        """The magnitude screen and, with ``state_screen``, the state screen
        (:class:`~fedcausal_flwr.federation.replies.RepeatScreen`): a window's reply whose
        states ``hhat_c^{t-1}`` are degenerate (:meth:`state_problem`), or whose fixed arrays
        (:meth:`fixed_names`) differ from the client's first answer for the same window,
        stops the run naming the client (every window needs every client). No robust rule
        applies: each client is the only source of its own states."""
        out = super().screens()
        if self.settings.state_screen:
            out.append(RepeatScreen(self.fixed_states, self.state_problem))
        return out

    def fixed_states(self, phase: str, cid: int, arrays: list[np.ndarray]
                     ) -> tuple[str, list[np.ndarray]] | None:
        """``(window, arrays)``: what client ``cid``'s data fix in its reply to this window."""
        names = self.fixed_names()
        if phase != "ss_window" or self.window_key is None or not names:
            return None
        got = layout(self.algorithm, phase, "up").unpack(arrays)
        a, b = self.window_key
        return f"the window t={a}..{b - 1}", [got[n] for n in names]

    def state_problem(self, phase: str, cid: int, arrays: list[np.ndarray]) -> str | None:
        """Why client ``cid``'s states over a window cannot be a Kalman filter's: centred, the
        W x P array ``hhat_c^{t-1}`` has rank below P (all zero, constant, or a state that
        copies another), checked on windows of more than P steps. A filter's states of a
        system with noise in every state span all P (an honest rank deficit would make the
        client's own blocks unidentifiable as well)."""
        if phase != "ss_window" or self.window_key is None:
            return None
        hc = layout(self.algorithm, phase, "up").unpack(arrays)["hc_prev"]
        W, P = hc.shape
        if W <= P or P == 0:
            return None
        sv = np.linalg.svd(hc - hc.mean(axis=0), compute_uv=False)
        rank = int(np.sum(sv > 1e-9 * sv[0])) if sv[0] > 0 else 0
        if rank >= P:
            return None
        return (f"its states hhat_c over the window's {W} steps have rank {rank} < {P} states "
                "(degenerate: all zero, constant or copied): flagged by the state screen")

    def robustness(self, flagged: dict[int, int]) -> dict[str, Any]:
        """The shared report, with the state screen among the screens."""
        out = super().robustness(flagged)
        if self.settings.state_screen:
            out["screens"] = [*out["screens"], "state"]
        return out

    def server_update(self, msgs: list[list[np.ndarray]]
                      ) -> tuple[ss.ServerWindow, ss.ServerParams]:
        """The server's window: FedGC's loss and ``A_hat`` step."""
        s = self.settings
        return ss.fedgc_server_update(self.A_diag, self.server, msgs, target=s.target,
                                      difference=s.difference, lr_server=s.lr_server,
                                      lambda_g=s.lambda_g,
                                      noise_ridge=ss.dp_noise_ridge(s, self.dp_z))

    # ---- the protocol -------------------------------------------------------------------
    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Clients within the missing-value limit (:meth:`within_missing_limit`), sizes of
        every client (states, measurements, inputs), the window plan and the server's start
        with the known-zero blocks (an unknown client is an error here, before any window)."""
        discovered = sorted(nodes)
        nodes = self.within_missing_limit(nodes)
        self.cids = sorted(nodes)
        self.T = int(nodes[self.cids[0]].props["t"])
        self.P = [int(nodes[c].props["p"]) for c in self.cids]
        self.D = [int(nodes[c].props["d"]) for c in self.cids]
        self.U = self.input_sizes(nodes)
        self.plan = ss.windows(self.T, self.settings.window, self.settings.epochs)
        try:
            masks = ss.known_zero_masks(self.settings.zero_blocks(), self.cids, self.P, self.U,
                                        known=discovered)
        except ValueError as e:
            raise ValueError(f"run config {self.settings.app_key('ss-known-zero')!r}: {e}"
                             ) from None
        self.server = ss.initial_server_for(self.P, self.U, self.settings.init_std,
                                            self.settings.seed, masks)
        self.granger = None

    def within_missing_limit(self, nodes: Mapping[int, NodeInfo]) -> dict[int, NodeInfo]:
        """The clients whose share of missing cells (property ``missing``; 0 when a client
        does not report it) is at most ``max_missing``; the others are dropped, named, with
        their share. Every share is kept for ``metrics["missing"]``."""
        self.missing = {c: float(i.props.get("missing", 0.0)) for c, i in sorted(nodes.items())}
        limit = self.settings.max_missing
        for c in [c for c, share in self.missing.items() if share > limit]:
            self.recorder.drop(f"client {c}", f"{self.missing[c]:.1%} of its cells are missing, "
                               f"more than {self.settings.app_key('ss-max-missing')} = {limit:g}")
            del self.nodes[c]
        if len(self.nodes) < self.settings.min_nodes:
            raise TooFewReplies(f"{len(self.nodes)} clients within the missing-value limit, "
                                f"min-nodes={self.settings.min_nodes}")
        return {c: i for c, i in nodes.items() if c in self.nodes}

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start from ``[A_hat]`` (its off-diagonal blocks) instead of the default start."""
        self.server = ss.with_known_zero(self._warm(arrays, ["A_hat"]), self.server.masks)

    def _warm(self, arrays: list[np.ndarray], names: list[str]) -> ss.ServerParams:
        n, k = sum(self.P), sum(self.U)
        shapes = [(n, n), (n, k)][:len(names)]
        got = [tuple(np.shape(a)) for a in arrays]
        if got != shapes:
            raise ValueError(f"{type(self).__name__} warm start takes {names} of shapes "
                             f"{shapes} for these clients, got {got}")
        if not all(np.all(np.isfinite(a)) for a in arrays):
            raise ValueError(f"{type(self).__name__} warm start: non-finite values")
        B = np.asarray(arrays[1], dtype=float) if len(arrays) > 1 else np.zeros((n, 0))
        return ss.ServerParams(*ss.off_diagonal(np.asarray(arrays[0], dtype=float), B,
                                                self.P, self.U))

    def window_config(self, ts: np.ndarray, prev: np.ndarray, k: int) -> dict[str, Any]:
        """Window bounds and the wire settings (with DP: the noise multiplier, ``-1`` for
        none, and the release key)."""
        dp = ({"dp-noise": self.dp_z if np.isfinite(self.dp_z) else -1.0,
               "dp-key": ss.dp_release_key(self.settings, k, self.T)}
              if self.settings.dp else {})
        return {**self.settings.to_wire(),
                "start": int(ts[0]) if ts.size else 0,
                "stop": int(ts[-1]) + 1 if ts.size else 0,
                "prev-start": int(prev[0]) if prev.size else 0,
                "prev-stop": int(prev[-1]) + 1 if prev.size else 0, "window-index": k, **dp}

    def window(self, grid, ts: np.ndarray, prev: np.ndarray, win: ss.ServerWindow | None,
               k: int) -> dict[int, list[np.ndarray]]:
        """One ``ss_window`` exchange: gradients of ``prev`` down, states of ``ts`` up."""
        cfg = self.window_config(ts, prev, k)
        self.window_key = (int(ts[0]), int(ts[-1]) + 1) if ts.size else None
        down = layout(self.algorithm, "ss_window", "down")
        payloads = {c: (down.pack(self.empty_grads(i) if win is None else self.grads(win, i)),
                        cfg) for i, c in enumerate(self.cids)}
        want = {c: self.reply_layout("ss_window", i, ts.size) for i, c in enumerate(self.cids)}
        return self.channel.run("ss_window", payloads, want, every=True)

    def done(self) -> bool:
        """Every planned window is recorded."""
        return self.recorder.round >= len(self.plan)

    def show(self, rec: Mapping[str, Any]) -> bool:
        """About 20 progress lines per run, and the last window."""
        budget = self.recorder.max_rounds
        n = len(self.plan) if budget is None else min(len(self.plan), budget)
        k = int(rec["round"]) - 1
        return k % max(1, len(self.plan) // 20) == 0 or k == n - 1

    def run_rounds(self, grid, result: RunResult) -> None:
        """Setup, then one recorded round per window, then the final gradients."""
        replies = self.channel.run("ss_setup", {c: ([], {}) for c in self.cids},
                                   {c: self.reply_layout("ss_setup", i)
                                    for i, c in enumerate(self.cids)},
                                   every=True)
        blocks = [self.local_blocks(replies[c], i) for i, c in enumerate(self.cids)]
        self.A_diag = [a for a, _ in blocks]
        self.B_diag = [b for _, b in blocks]
        for c, A in zip(self.cids, self.A_diag, strict=True):
            if kalman.spectral_radius(A) >= 1:
                raise ProtocolStopped(f"client {c}: A_mm is unstable")
        prev, win = np.arange(0), None
        budget = self.recorder.max_rounds
        total = len(self.plan) if budget is None else min(len(self.plan), budget)
        self.dp_z = ss.dp_noise_multiplier(self.settings, self.T, total)
        if self.settings.dp:
            rep = ss.dp_report(self.settings, self.T, total, self.dp_z)
            log(INFO, "%s DP: total (epsilon %.4g, delta %.3g) over %d releases per client: "
                "noise multiplier %.4g, clip %.4g, noise std %.4g", type(self).__name__,
                rep["epsilon"], rep["delta"], rep["releases_per_client"], self.dp_z,
                rep["clip"], rep["sigma"])
        for rec in self.rounds(result):
            k = self.recorder.round
            ts = self.plan[k - 1]
            up = layout(self.algorithm, "ss_window", "up")
            replies = self.window(grid, ts, prev, win, k)
            got = [up.unpack(replies[c]) for c in self.cids]
            states = [n for n in up.names if n != "loss"]  # the server model's order
            win, self.server = self.server_update([[g[n] for n in states] for g in got])
            if ss.last_epoch(k, total, self.T, self.settings.window):
                part = ss.granger_window(win.terms, self.settings.granger_lags)
                self.granger = part if self.granger is None else self.granger + part
            prev = ts
            rec.update(ss.history_row(k, win, [float(g["loss"]) for g in got]))
        if win is not None:  # deliver the last window's gradients (unrecorded)
            self.recorder.round += 1
            self.window(grid, np.arange(0), prev, win, self.recorder.round)
        self.after_training(grid, result)

    def after_training(self, grid, result: RunResult) -> None:
        """Hook after the last window (FedCF answers its counterfactual query here)."""

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)  # resets metrics to the final evaluation
        if self.settings.dp:
            result.metrics["dp"] = ss.dp_report(self.settings, self.T, len(result.history),
                                                self.dp_z)
        if self.missing:
            result.metrics["missing"] = {str(c): v for c, v in self.missing.items()}
        if self.server is not None and self.server.masks is not None:
            result.metrics["knowledge"] = self.knowledge()

    def knowledge(self) -> dict[str, Any]:
        """The known-zero blocks as given and as held: ``[[target, source], ...]`` client
        ids of ``A`` (and ``B``)."""
        zA, zB = self.server.masks
        out: dict[str, Any] = {"known_zero": self.settings.known_zero,
                               "A": ss.zero_block_list(zA, self.cids, self.P, self.P)}
        if any(self.U):
            out["B"] = ss.zero_block_list(zB, self.cids, self.P, self.U)
        return out

    def result_names(self) -> dict[str, Any]:
        """The learned matrices are over the clients' latent states: ``c<client>.s<i>``
        (inputs ``c<client>.u<i>``); ``measurements`` keeps each client's own names of its
        measurements (``y`` columns), by client id. ``A_hat[i, j]`` is the effect of state
        j at t-1 on state i at t (rows are targets)."""
        if not self.cids:
            return {}
        states = [f"c{c}.s{j}" for i, c in enumerate(self.cids) for j in range(self.P[i])]
        known = self.server is not None and self.server.masks is not None
        out: dict[str, Any] = {"states": states, "A_hat": states, "A_full": states,
                               "A_offdiag_se": states, "A_offdiag_pvalue": states}
        if known:
            out["A_offdiag_known_zero"] = states
        if any(self.U):
            inputs = [f"c{c}.u{j}" for i, c in enumerate(self.cids) for j in range(self.U[i])]
            B = {"rows": states, "cols": inputs}
            out.update({"inputs": inputs, "B_hat": B, "B_offdiag_se": B,
                        "B_offdiag_pvalue": B})
            if known:
                out["B_offdiag_known_zero"] = B
        meas = {str(c): split(self.nodes[c].props.get("names")) for c in self.cids
                if c in self.nodes}
        out["measurements"] = {c: m for c, m in meas.items() if m is not None}
        return out

    def granger_test(self) -> ss.GrangerTest | None:
        """Standard errors and p-values of the current estimates from the last pass's windows
        (:func:`~fedcausal_flwr.statespace.model.granger_test`; None before that pass)."""
        if self.granger is None or self.server is None:
            return None
        return ss.granger_test(self.granger, self.server.A_hat, self.server.B_hat, self.P,
                               self.U, self.server.masks)

    def estimates(self) -> dict[str, np.ndarray]:
        """Learned off-diagonal blocks, the full estimate with the known diagonal blocks and,
        after a pass over the series, each learned entry's standard error and p-value for
        "no Granger effect" (``A_offdiag_se``, ``A_offdiag_pvalue``: 0 and 1 on the known
        diagonal blocks, NaN on known-zero blocks) and, with known-zero blocks, their mask
        ``A_offdiag_known_zero`` (True: held at 0 by the user's knowledge)."""
        if self.server is None or not hasattr(self, "A_diag"):
            return {}
        out = {"A_hat": self.server.A_hat,
               "A_full": ss.full_estimate(self.A_diag, self.server.A_hat),
               "client_ids": np.array(self.cids)}
        if self.server.masks is not None:
            out["A_offdiag_known_zero"] = self.server.zero_A
        test = self.granger_test()
        if test is not None:
            out.update({"A_offdiag_se": test.se_A, "A_offdiag_pvalue": test.pvalue_A})
        return out


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

    def input_sizes(self, nodes: Mapping[int, NodeInfo]) -> list[int]:
        """Every client's input size ``U_m``."""
        return [int(nodes[c].props["u"]) for c in self.cids]

    def empty_grads(self, i: int) -> dict[str, np.ndarray]:
        """``g``, ``g~`` of no window."""
        return dict.fromkeys(("g", "g_tilde"), np.zeros((0, self.P[i])))

    def grads(self, win: ss.ServerWindow, i: int) -> dict[str, np.ndarray]:
        """``g``, ``g~``: w.r.t. the target and ``hhat_a^{t-1}`` (eqs 12-13)."""
        return {"g": win.g[i], "g_tilde": win.g_tilde[i]}

    def fixed_names(self) -> list[str]:
        """``hc_prev``, ``u_prev`` and, with the innovation target, ``target`` (``C^+ y^t``):
        what the client's data fix (none under DP's fresh noise per window)."""
        s = self.settings
        if s.dp and ss.dp_fresh(s):
            return []
        return ["hc_prev", "u_prev"] + (["target"] if s.target == "innovation" else [])

    def server_update(self, msgs: list[list[np.ndarray]]
                      ) -> tuple[ss.ServerWindow, ss.ServerParams]:
        """FedCF's loss and the ``A_hat, B_hat`` steps."""
        s = self.settings
        return ss.fedcf_server_update(self.A_diag, self.B_diag, self.server, msgs, xi=s.xi,
                                      difference=s.difference, lr_server=s.lr_server,
                                      lambda_g=s.lambda_g)

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start from ``[A_hat, B_hat]`` (their off-diagonal blocks)."""
        self.server = ss.with_known_zero(self._warm(arrays, ["A_hat", "B_hat"]),
                                         self.server.masks)

    def estimates(self) -> dict[str, np.ndarray]:
        """FedGC's estimates plus ``B_hat`` (and ``B_offdiag_se``, ``B_offdiag_pvalue``)."""
        out = super().estimates()
        if out:
            out["B_hat"] = self.server.B_hat
            if self.server.masks is not None:
                out["B_offdiag_known_zero"] = self.server.zero_B
            test = self.granger_test()
            if test is not None:
                out.update({"B_offdiag_se": test.se_B, "B_offdiag_pvalue": test.pvalue_B})
        return out

    def after_training(self, grid, result: RunResult) -> None:
        """Answer the counterfactual query through one ``ss_query`` exchange (one client)."""
        if self.query is None or self.server is None:
            return
        m, n, du = self.query
        if m not in self.cids or n not in self.cids or m == n:
            self.recorder.drop(f"query ({m}, {n})", "needs two different participating clients")
            return
        i, j = self.cids.index(m), self.cids.index(n)
        if du.shape != (self.U[j],):
            self.recorder.drop(f"query ({m}, {n})", f"delta_u has {du.size} values, client {n} has "
                      f"{self.U[j]} inputs")
            return
        self.recorder.round += 1
        dh = ss.block(self.server.B_hat, self.P, self.U, i, j) @ du
        reply = self.channel.run("ss_query", {m: (layout("fedcf", "ss_query", "down").pack(
            {"delta_h": dh}), {})}, self.reply_layout("ss_query", i), need=1)
        self.answer = {"client": m, "source": n, "delta_u": du, "delta_h": dh,
                       "delta_y": layout("fedcf", "ss_query", "up").unpack(reply[m])["delta_y"]}

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)
        if self.answer is not None:
            result.metrics["counterfactual"] = self.answer
