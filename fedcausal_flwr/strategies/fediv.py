"""FedIV strategy: FedGDA on the DeepGMM moment game (Geetika, Tyagi, Chatterjee 2025).

Round t sends every client ``[theta_t..., tau_t...]`` (g and f) and the hyper-parameters, and
receives ``[dtheta_i..., dtau_i..., psi_sum_i, C_sum_i, [U_i]]``: both players' deltas after R
local epochs and the validation sums of theta_t. The server averages the deltas (uniform, or
n_i-weighted) and scores theta_t by the pooled validation criterion psi' C^-1 psi over random
Fourier features of z (Lemma 1 on a fixed class), computed from the clients' sums only; the
round with the lowest score is the selected model. A last ``train.validate`` exchange scores
the final global theta.

Run config keys (defaults, those of Table 1's FedDeepGMM-GDA, chosen on development seeds by
the validation criterion): ``num-rounds`` (200; the App's pyproject sets 100 for all
algorithms), ``seed`` (0), ``iv-mode`` ("gda" or "sgda"), ``iv-lr-g`` (0.02), ``iv-lr-f``
(0.2: the max player ten times faster, two-timescale GDA), ``iv-local-epochs`` (R = 10),
``iv-batch-size`` (256), ``iv-optimizer`` ("sgd", "sgdm", "oadam"), ``iv-momentum`` (0.9),
``iv-weighting`` ("uniform" or "n"), ``iv-val-features`` (32), ``iv-device`` ("auto": GPU when
present), and the data keys of :mod:`fedcausal_flwr.data.iv`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.core import deepgmm as dg
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies.base import CausalStrategy, NodeInfo, TooFewReplies

# The App's run-config keys of FedIV with their defaults (``num-rounds`` and ``seed`` are
# shared). ``flwr run`` rejects keys missing from pyproject's [tool.flwr.app.config].
RUN_CONFIG_DEFAULTS: dict[str, Any] = {
    "iv-mode": "gda", "iv-lr-g": 0.02, "iv-lr-f": 0.2, "iv-local-epochs": 10,
    "iv-batch-size": 256, "iv-optimizer": "sgd", "iv-momentum": 0.9, "iv-weighting": "uniform",
    "iv-val-features": 32, "iv-device": "auto", "iv-scenario": "abs", "iv-dgp": "paper",
    "iv-n": 20000, "iv-n-test": 0, "iv-alpha": 0.3,
}


def _shape(tag: str) -> tuple[int, ...]:
    return tuple(int(s) for s in str(tag).split("x") if s)


class FedIV(CausalStrategy):
    """Federated DeepGMM by FedGDA (Algorithm 1), with federated model selection.

    Parameters
    ----------
    settings : GDASettings
        Rates, mode (GDA/SGDA), local epochs, optimizer, weighting, rounds.
    seed : int
        Seed of the network initialisation, the minibatch order and the validation features.
    val_features : int
        Number of random Fourier features of the validation criterion.
    """

    algorithm = "fediv"
    progress_keys = ("loss", "val_criterion", "selected_round", "test_mse",
                     "test_mse_selected", "n_clients", "dropped", "seconds")

    def __init__(self, settings: dg.GDASettings | None = None, *, seed: int = 0,
                 val_features: int = 32, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or dg.GDASettings()
        self.seed, self.val_features = int(seed), int(val_features)
        self.state: dg.FedState | None = None

    def config(self) -> dict[str, Any]:
        """Settings recorded in ``result.json``."""
        return {**super().config(), **asdict(self.settings), "seed": self.seed,
                "val_features": self.val_features}

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Clients must agree on the input shapes of x and z."""
        from collections import Counter

        keys = ("x-shape", "z-shape")
        ok = [i for i in infos if all(k in i.props for k in keys)]
        if not ok:
            return {}
        common = Counter(tuple(i.props[k] for k in keys) for i in ok).most_common(1)[0][0]
        return dict(zip(keys, common, strict=True))

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Initial g and f from the seed; SGDA clients smaller than a minibatch are dropped."""
        s = self.settings
        if s.mode == "sgda":
            for cid in [c for c, i in nodes.items() if int(i.props["n"]) < s.batch_size]:
                self.drop(f"client {cid}", f"{nodes[cid].props['n']} train samples, fewer "
                          f"than one minibatch of {s.batch_size}")
                del self.nodes[cid]
            if len(self.nodes) < self.min_nodes:
                raise TooFewReplies(f"{len(self.nodes)} clients with a full minibatch, "
                                    f"min-nodes={self.min_nodes}")
        info = next(iter(self.nodes.values())).props
        g, f = dg.networks(_shape(info["x-shape"]), _shape(info["z-shape"]), self.seed)
        self.theta_shapes, self.tau_shapes = dg.shapes(g), dg.shapes(f)
        self.state = dg.FedState(dg.get_params(g), dg.get_params(f))
        self.weights = dg.client_weights({c: int(i.props["n"]) for c, i in self.nodes.items()},
                                         s)

    def message_config(self) -> dict[str, Any]:
        """Hyper-parameters sent with every message."""
        s = self.settings
        return {"lr-g": s.lr_g, "lr-f": s.lr_f, "mode": s.mode, "batch-size": s.batch_size,
                "local-epochs": s.local_epochs, "optimizer": s.optimizer,
                "momentum": s.momentum, "seed": self.seed, "val-features": self.val_features}

    def _criterion(self, sums: Mapping[int, Sequence[np.ndarray]]) -> float:
        """Pooled validation criterion from the clients' ``(psi_sum, C_sum)``."""
        return dg.pooled_criterion([(s[0], s[1], int(self.nodes[c].props["n-val"]))
                                    for c, s in sums.items()])

    def run_rounds(self, grid: Any, result: RunResult) -> None:
        """T rounds of ``train.local``, then ``train.validate`` of the final global model."""
        m = self.val_features + 1
        sums = [(m,), (m, m)]
        st = self.state
        while st.round < self.settings.rounds:
            self._round = st.round + 1
            t0, n_dropped = time.time(), len(self._dropped)
            self._bytes = {"up": 0, "down": 0}
            down = (st.theta + st.tau, self.message_config())
            replies = self._exchange_or_stop(grid, "local", {c: down for c in self.select()},
                                             self.theta_shapes + self.tau_shapes + sums + [(1,)])
            k = len(self.theta_shapes)
            score = self._criterion({c: r[-3:-1] for c, r in replies.items()})
            dg.select(st, score, st.theta, st.round)
            theta = dg.server_update(st.theta, {c: r[:k] for c, r in replies.items()},
                                     self.weights)
            tau = dg.server_update(st.tau, {c: r[k:-3] for c, r in replies.items()},
                                   self.weights)
            loss = float(np.mean([r[-1][0] for r in replies.values()]))
            if not all(np.isfinite(a).all() for a in theta + tau) or not np.isfinite(loss):
                raise TooFewReplies(f"round {self._round}: diverged (non-finite global "
                                    f"parameters); keeping round {st.best_round}")
            st.theta, st.tau, st.round = theta, tau, self._round
            self._record(result, {"loss": loss, "val_criterion": score,
                                  "val_round": st.round - 1}, t0, len(replies), n_dropped)
        self._bytes = {"up": 0, "down": 0}
        replies = self._exchange_or_stop(grid, "validate", {
            c: (st.theta, self.message_config()) for c in self.select()}, sums)
        score = self._criterion(replies)
        dg.select(st, score, st.theta, st.round)
        result.metrics["final_val_criterion"] = score

    def _exchange_or_stop(self, grid: Any, phase: str, payloads: Mapping[int, Any],
                          shapes: list[tuple[int, ...]]) -> dict[int, list[np.ndarray]]:
        """:meth:`exchange`; when every client diverged, stop saying so."""
        n = len(self._dropped)
        try:
            return self.exchange(grid, phase, payloads, shapes)
        except TooFewReplies as e:
            if any("diverged" in d for d in self._dropped[n:]):
                raise TooFewReplies(f"round {self._round}: the local games diverged "
                                    f"(non-finite loss); keeping round "
                                    f"{self.state.best_round}") from e
            raise

    def _record(self, result: RunResult, rec: dict[str, Any], t0: float, n_clients: int,
                n_dropped: int) -> None:
        rec = {"round": self._round, **rec, "selected_round": self.state.best_round,
               "n_clients": n_clients, "dropped": len(self._dropped) - n_dropped,
               "bytes_up": self._bytes["up"], "bytes_down": self._bytes["down"]}
        if self.evaluate_fn is not None:
            rec.update(self.evaluate_fn(self.estimates(), sorted(self.nodes)))
        rec["seconds"] = time.time() - t0
        self.record_round(result, rec)

    def _finish(self, result: RunResult, t0: float) -> None:
        super()._finish(result, t0)
        if self.state is not None:
            result.metrics.update({"selected_round": self.state.best_round,
                                   "val_criterion_selected": self.state.best_score})

    def estimates(self) -> dict[str, Any]:
        """Last global g and f, and the g of the selected round."""
        st = self.state
        best = st.best_theta or st.theta
        return {"g_params": st.theta, "f_params": st.tau, "g_params_selected": best,
                "selected_round": st.best_round, "rounds": st.round}


def settings_from_run_config(rc: Mapping[str, Any]) -> dg.GDASettings:
    """GDASettings from the App's run config (hyphenated keys, defaults where absent)."""
    rc = {**RUN_CONFIG_DEFAULTS, **rc}
    return dg.GDASettings(
        lr_g=float(rc["iv-lr-g"]), lr_f=float(rc["iv-lr-f"]), mode=str(rc["iv-mode"]),
        batch_size=int(rc["iv-batch-size"]), local_epochs=int(rc["iv-local-epochs"]),
        optimizer=str(rc["iv-optimizer"]), momentum=float(rc["iv-momentum"]),
        weighting=str(rc["iv-weighting"]),
        rounds=int(rc.get("num-rounds", 200)))


def iv_evaluator(rc: Mapping[str, Any]
                 ) -> Callable[[Mapping[str, Any], Sequence[int]], dict[str, Any]]:
    """``evaluate(estimates, client_ids)``: test MSE of g against the true g (pooled test set,
    as the authors' code), and the mean of the per-client test MSEs (the paper's wording)."""
    from fedcausal_flwr.data import iv

    test = iv.test_set(rc)
    g, _ = dg.networks(test.x.shape[1:], test.z.shape[1:], 0)
    cache: dict[int, list[np.ndarray]] = {}

    def evaluate(est: Mapping[str, Any], cids: Sequence[int]) -> dict[str, Any]:
        k = max(cids) + 1
        if k not in cache:
            cache[k] = iv.split_indices(rc, k)["test"]
        out = {}
        for key, name in (("g_params", "test_mse"), ("g_params_selected", "test_mse_selected")):
            err = (dg.g_values(g, est[key], test.x) - test.g) ** 2
            out[name] = float(err.mean())
            if key == "g_params":
                out["test_mse_client_mean"] = float(np.mean([err[cache[k][c]].mean()
                                                              for c in cids]))
        return out

    return evaluate


def from_run_config(rc: Mapping[str, Any]) -> FedIV:
    """The App's strategy for ``algorithm = "fediv"``."""
    return FedIV(settings_from_run_config(rc), seed=int(rc.get("seed", 0)),
                 val_features=int(rc.get("iv-val-features",
                                         RUN_CONFIG_DEFAULTS["iv-val-features"])),
                 min_nodes=int(rc.get("min-nodes", 2)),
                 node_wait_s=float(rc.get("node-wait-s", 60.0)),
                 timeout_s=float(rc.get("round-timeout-s", 600.0)),
                 evaluate_fn=iv_evaluator(rc))


def plot_g(rc: Mapping[str, Any], estimates: Mapping[str, Any], path: str | Path) -> Path:
    """The paper's Figure 1: learned g (last and selected round) against the true g."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedcausal_flwr.data import iv

    test = iv.test_set(rc)
    g, _ = dg.networks(test.x.shape[1:], test.z.shape[1:], 0)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    last = dg.g_values(g, estimates["g_params"], test.x)
    sel = dg.g_values(g, estimates["g_params_selected"], test.x)
    if test.x.ndim == 2 and test.x.shape[1] == 1:
        o = np.argsort(test.x[:, 0])
        xs = test.x[o, 0]
        ax.plot(xs, test.g[o], "k", lw=2, label="true g")
        ax.plot(xs, last[o], label="FedDeepGMM, last round")
        ax.plot(xs, sel[o], "--", label=f"selected round {estimates['selected_round']}")
        ax.set_xlabel("input x")
    else:
        ax.scatter(test.g, last, s=3, alpha=0.3, label="last round")
        ax.scatter(test.g, sel, s=3, alpha=0.3, label="selected round")
        ax.plot([test.g.min(), test.g.max()], [test.g.min(), test.g.max()], "k", lw=1)
        ax.set_xlabel("true g")
    ax.set_ylabel("g (standardized)")
    ax.set_title(f"FedIV {rc.get('iv-scenario', 'abs')}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def save_plots(rc: Mapping[str, Any], result: RunResult, out: Path) -> None:
    """The App's plot hook: ``g_vs_g0.png`` (the paper's Figure 1) beside result.json."""
    if result.estimates.get("g_params"):
        plot_g(rc, result.estimates, out / "g_vs_g0.png")
