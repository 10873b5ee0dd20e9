"""FedIV strategy: FedGDA on the DeepGMM moment game (Geetika, Tyagi, Chatterjee 2025).

Round t sends every client ``[theta_t..., tau_t...]`` (g and f) with the wire settings
(:meth:`~fedcausal_flwr.settings.Settings.to_wire`), and receives
``[dtheta_i..., dtau_i..., psi_sum_i, C_sum_i, [U_i]]`` (:data:`~fedcausal_flwr.iv.wire.PHASES`):
both players' deltas after R local epochs (Algorithm 1) and the validation sums of theta_t. The
server averages the deltas (uniformly, eq. 20, or n_i-weighted; with ``robust-rule`` set, their
coordinate-wise trimmed mean or median, :mod:`~fedcausal_flwr.federation.robust`, which then
also centres the clients' validation means) and scores theta_t by the
pooled validation criterion psi' C^-1 psi over random Fourier features of z (Lemma 1 on a
fixed class), computed from the clients' sums only; the round with the lowest score is the
selected model. A last ``train.validate`` exchange scores the final global theta.

Bootstrap replicas (``replicas`` R > 0): the same messages carry R more copies of both
players, stacked (:mod:`~fedcausal_flwr.iv.wire`); client i trains replica r on a bootstrap
resample of its own rows that it draws from ``[seed, r, i]``, and the server averages each
replica on its own (:func:`~fedcausal_flwr.iv.model.replicas_round`). The replicas follow the
main run's selected round; their g's give the pointwise interval (:meth:`FedIV.interval`, and
``interval_*`` estimates on ``interval_x``). A replica that diverges stops alone.

Divergence: a round whose averaged players are non-finite or exploding
(:func:`~fedcausal_flwr.iv.model.divergence`), or in which every client's local game went
non-finite, ends the run with status ``"stopped: round t: diverged, <what>; keeping round s"``
and ``metrics["diverged"]``/``["diverged_round"]``; the finished rounds, the last accepted
global and the selected round are kept (never a plain ``"completed"``).

Settings, their run-config keys and the App's defaults: :class:`FedIVSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.federation.strategy import CausalStrategy, Diverged, NodeInfo, TooFewReplies
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.iv.settings import FedIVSettings
from fedcausal_flwr.iv.wire import PHASES, pack, shapes, unpack
from fedcausal_flwr.names import default_names, split
from fedcausal_flwr.results import RunResult

__all__ = ["FedIV", "FedIVSettings"]


def _shape(tag: str) -> tuple[int, ...]:
    """A per-sample shape from its wire tag, e.g. ``"1x8x8"`` (see the client's shape_tag)."""
    return tuple(int(s) for s in str(tag).split("x") if s)


class FedIV(CausalStrategy):
    """Federated DeepGMM by FedGDA (Algorithm 1), with federated model selection.

    ``start(initial_arrays=theta + tau)`` (g's parameters, then f's, in network order) or
    ``start(initial_arrays=theta)`` (f starts from the seed) warm-starts the networks;
    ``start(num_rounds=T)`` bounds the rounds together with ``settings.rounds``.

    Parameters
    ----------
    settings : FedIVSettings
        Rates, mode (GDA/SGDA), local epochs, optimizer, weighting, rounds, seed, validation
        features (default: the App's).
    interval_x : array, optional
        Rows of x (n x dx, or n values when dx = 1) at which the result's estimates carry g
        and its bootstrap interval (``interval_x``, ``interval_g``, ``interval_lower``,
        ``interval_upper``) when ``replicas`` >= 2. The App gives the built-in data's
        evaluation grid; :meth:`interval` computes the band at any x afterwards.
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change (see
        :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`).
    """

    robust_aggregate = ("the players' deltas dtheta_i, dtau_i (and each replica's) and the "
                        "validation means psi_i, C_i that select the round")

    algorithm = "fediv"
    settings_class = FedIVSettings
    progress_keys = ("loss", "val_criterion", "selected_round", "test_mse",
                     "test_mse_selected", "n_clients", "dropped", "seconds")

    def __init__(self, settings: FedIVSettings | None = None, interval_x: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.state: dg.FedState | None = None
        self.reps: list[dg.FedState] = []
        self.interval_x = None if interval_x is None else np.asarray(interval_x, dtype=float)

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Clients must agree on the input shapes of x and z."""
        from collections import Counter

        from fedcausal_flwr.federation.strategy import majority_props

        keys = ("x-shape", "z-shape")
        ok = [i for i in infos if all(k in i.props for k in keys)]
        if not ok:
            return {}
        common = Counter(tuple(i.props[k] for k in keys) for i in ok).most_common(1)[0][0]
        want = dict(zip(keys, common, strict=True))
        agree = [i for i in ok if all(i.props[k] == v for k, v in want.items())]
        return {**want, **majority_props(agree, ("names", "y-name"))}

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Initial g and f from the seed; SGDA clients smaller than a minibatch are dropped."""
        s = self.settings
        if s.mode == "sgda":
            for cid in [c for c, i in nodes.items() if int(i.props["n"]) < s.batch_size]:
                self.recorder.drop(f"client {cid}", f"{nodes[cid].props['n']} train samples, "
                                   f"fewer than one minibatch of {s.batch_size}")
                del self.nodes[cid]
            if len(self.nodes) < self.settings.min_nodes:
                raise TooFewReplies(f"{len(self.nodes)} clients with a full minibatch, "
                                    f"min-nodes={self.settings.min_nodes}")
        info = next(iter(self.nodes.values())).props
        self.x_shape, self.z_shape = _shape(info["x-shape"]), _shape(info["z-shape"])
        g, f = dg.networks(self.x_shape, self.z_shape, s.seed)
        self.theta_shapes, self.tau_shapes = dg.shapes(g), dg.shapes(f)
        self.state = dg.FedState(dg.get_params(g), dg.get_params(f))
        self._start_replicas()
        self.weights = dg.client_weights({c: int(i.props["n"]) for c, i in self.nodes.items()},
                                         s.weighting)

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start from ``theta + tau`` (g's then f's parameters) or ``theta`` alone."""
        th, ta = self.theta_shapes, self.tau_shapes
        got = [tuple(np.shape(a)) for a in arrays]
        if got not in (th + ta, th):
            raise ValueError(f"{type(self).__name__} warm start takes g's parameters {th} "
                             f"followed by f's {ta} (or g's alone), got shapes {got}")
        arrays = [np.array(a, dtype=np.float64) for a in arrays]
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError(f"{type(self).__name__} warm start: non-finite parameters")
        n = len(th)
        self.state = dg.FedState(arrays[:n], arrays[n:] or self.state.tau)
        self._start_replicas()

    def _start_replicas(self) -> None:
        """Every replica starts from the main run's players."""
        st = self.state
        self.reps = [dg.FedState([a.copy() for a in st.theta], [a.copy() for a in st.tau])
                     for _ in range(self.settings.replicas)]

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray] | None:
        """The Byzantine screen compares the players' deltas of ``train.local`` (the
        validation sums scale with a client's sample count; they only score rounds)."""
        if phase != "local":
            return None
        got = self._unpack(phase, arrays)
        main = [np.concatenate([np.ravel(a) for a in got["dtheta"] + got["dtau"]])]
        reps = got["dtheta_r"] + got["dtau_r"]  # each replica is a group of its own
        return main + [np.concatenate([np.ravel(a[r]) for a in reps])
                       for r in range(self.settings.replicas)]

    def _unpack(self, phase: str, arrays: Sequence[np.ndarray]
                ) -> dict[str, np.ndarray | list[np.ndarray]]:
        """A reply's arrays by name (:func:`~fedcausal_flwr.iv.wire.unpack`)."""
        return unpack(phase, "up", arrays, self.theta_shapes, self.tau_shapes,
                      self.settings.val_features + 1, self.settings.replicas)

    def _criterion(self, sums: Mapping[int, Sequence[np.ndarray]]) -> float:
        """Pooled validation criterion from the clients' ``(psi_sum, C_sum)``."""
        return dg.pooled_criterion([(s[0], s[1], int(self.nodes[c].props["n-val"]))
                                    for c, s in sums.items()], self.combine())

    def done(self) -> bool:
        """``settings.rounds`` rounds are done (``start(num_rounds=...)`` may stop earlier)."""
        return self.state.round >= self.settings.rounds

    def run_rounds(self, grid: Any, result: RunResult) -> None:
        """Rounds of ``train.local``, then ``train.validate`` of the final global model."""
        s = self.settings
        m, R = s.val_features + 1, s.replicas
        up = {p: shapes(ph.up, self.theta_shapes, self.tau_shapes, m, R)
              for p, ph in PHASES.items()}
        st, wire = self.state, s.to_wire()
        for rec in self.rounds(result):
            down = (pack("local", "down", {"theta": st.theta, "tau": st.tau,
                                           "theta_r": self._stack("theta"),
                                           "tau_r": self._stack("tau")}), wire)
            replies = {c: self._unpack("local", r) for c, r in self._exchange_or_stop(
                grid, "local", {c: down for c in self.select()}, up["local"]).items()}
            score = self._criterion({c: (r["psi_sum"], r["C_sum"])
                                     for c, r in replies.items()})
            dg.select(st, score, st.theta, st.round)
            dg.select_replicas(self.reps, st, st.round)
            self._replicas_round(replies)
            combine = self.combine()
            theta = dg.server_update(st.theta, {c: r["dtheta"] for c, r in replies.items()},
                                     self.weights, combine)
            tau = dg.server_update(st.tau, {c: r["dtau"] for c, r in replies.items()},
                                   self.weights, combine)
            loss = float(np.mean([r["U"][0] for r in replies.values()]))
            why = dg.divergence(theta, tau, st, self.settings.diverge_factor)
            if why is not None:
                self._diverged(f"round {self.recorder.round}: diverged, {why}; keeping round "
                               f"{st.best_round}")
            st.theta, st.tau, st.round = theta, tau, self.recorder.round
            st.peak = max(st.peak, dg.peak(theta + tau))
            rec.update({"loss": loss, "val_criterion": score, "val_round": st.round - 1,
                        "selected_round": st.best_round, "peak": st.peak})
        replies = self._exchange_or_stop(grid, "validate", {
            c: (st.theta, wire) for c in self.select()}, up["validate"])
        score = self._criterion(replies)
        dg.select(st, score, st.theta, st.round)
        dg.select_replicas(self.reps, st, st.round)
        result.metrics["final_val_criterion"] = score

    def _stack(self, player: str) -> list[np.ndarray]:
        """The replicas' ``player`` (``"theta"`` or ``"tau"``) stacked: one ``(R, *shape)``
        array per parameter (R = 0: empty stacks)."""
        shapes = self.theta_shapes if player == "theta" else self.tau_shapes
        return [np.array([getattr(r, player)[i] for r in self.reps]).reshape(len(self.reps), *sh)
                for i, sh in enumerate(shapes)]

    def _replicas_round(self, replies: Mapping[int, Mapping[str, Any]]) -> None:
        """Each replica's server step from the clients' stacked deltas and ``ok_r``."""
        deltas = {c: (r["dtheta_r"], r["dtau_r"], r["ok_r"]) for c, r in replies.items()}
        dg.replicas_round(self.reps, deltas, self.weights, self.settings.diverge_factor,
                          min(self.settings.min_nodes, len(replies)), self.recorder.round,
                          self.combine())

    def _exchange_or_stop(self, grid: Any, phase: str, payloads: Mapping[int, Any],
                          shapes: list[tuple[int, ...]]) -> dict[int, list[np.ndarray]]:
        """``channel.run`` (:meth:`Exchange.run`); when every client diverged, stop saying
        so."""
        n = len(self.recorder.dropped)
        try:
            return self.channel.run(phase, payloads, shapes)
        except TooFewReplies as e:
            if any("diverged" in d for d in self.recorder.dropped[n:]):
                self._diverged(f"round {self.recorder.round}: the local games diverged "
                               f"(non-finite loss); keeping round {self.state.best_round}",
                               cause=e)
            raise

    def _diverged(self, why: str, cause: BaseException | None = None) -> None:
        """End the run: ``state.stopped`` and the status say ``why`` (a :class:`Diverged`)."""
        self.state.stopped, self.state.diverged_round = why, self.recorder.round
        raise Diverged(why) from cause

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)
        if self.state is not None:
            result.metrics.update({"selected_round": self.state.best_round,
                                   "val_criterion_selected": self.state.best_score,
                                   "diverged": bool(self.state.stopped),
                                   "diverged_round": self.state.diverged_round})
            if self.reps:
                result.metrics.update({
                    "replicas_used": sum(bool(r.best_theta) for r in self.reps),
                    "replicas_stopped": sum(bool(r.stopped) for r in self.reps)})

    def estimates(self) -> dict[str, Any]:
        """Last global g and f, and the g of the selected round."""
        st = self.state
        if st is None:
            return {}
        best = st.best_theta or st.theta
        out = {"g_params": st.theta, "f_params": st.tau, "g_params_selected": best,
               "selected_round": st.best_round, "rounds": st.round,
               "x_shape": list(self.x_shape), "z_shape": list(self.z_shape)}
        if self.reps:
            reps = [r.best_theta for r in self.reps if r.best_theta]
            out["g_params_replicas"] = reps
            if self.interval_x is not None and len(reps) >= 2:
                out.update(self._interval(best, reps))
        return out

    def _interval(self, theta: dg.Params, reps: list[dg.Params]) -> dict[str, Any]:
        """g and its bootstrap interval on :attr:`interval_x` (the ``interval_*``
        estimates)."""
        from fedcausal_flwr.iv.view import rows

        s = self.settings
        x = rows(self.interval_x, self.x_shape)
        g, _ = dg.networks(self.x_shape, self.z_shape, 0)
        main, lo, hi = dg.g_interval(g, theta, reps, x, s.interval_level, s.interval_method)
        return {"interval_x": x, "interval_g": main, "interval_lower": lo,
                "interval_upper": hi, "interval_level": s.interval_level,
                "interval_method": s.interval_method}

    def result_names(self) -> dict[str, Any]:
        """Names of the columns of x, z and of y (informational: g is a function of x)."""
        if self.state is None:
            return {}
        dx, dz = int(np.prod(self.x_shape)), int(np.prod(self.z_shape))
        xs, zs, y = default_names(dx, "x"), default_names(dz, "z"), "y"
        for info in self.nodes.values():
            both = split(info.props.get("names"))
            if both is not None and len(both) == dx + dz:
                xs, zs, y = both[:dx], both[dx:], str(info.props.get("y-name", "y"))
                break
        out: dict[str, Any] = {"x": xs, "z": zs, "y": y}
        if self.interval_x is not None and self.reps and len(self.x_shape) == 1:
            out["interval_x"] = {"rows": default_names(len(self.interval_x), "p"), "cols": xs}
        return out

    @staticmethod
    def predict(result: Any, x: Any, selected: bool = True) -> np.ndarray:
        """The learned g at ``x``: one value per row (``x``: n x dx, or n values when
        dx = 1; images n x C x H x W). ``result``: a :class:`RunResult` or a loaded
        result.json (dict or path). ``selected`` (default): g of the round the federated
        validation selected; False: g of the last round."""
        from fedcausal_flwr.iv.view import predict

        return predict(result, x, selected)

    @staticmethod
    def interval(result: Any, x: Any, level: float | None = None,
                 method: str | None = None) -> dict[str, np.ndarray]:
        """g of the selected round at ``x`` and its pointwise bootstrap interval from the
        run's replicas: ``{"g", "lower", "upper"}`` (``x`` as for :meth:`predict`; ``level``,
        ``method``: default the run's ``interval_level``, ``interval_method``). Needs a run
        with ``replicas`` >= 2."""
        from fedcausal_flwr.iv.view import interval

        return interval(result, x, level, method)
