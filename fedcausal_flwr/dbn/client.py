"""FDBNL client: the closed-form local ADMM step on the client's own time series.

PFDBNL client: personalized (W_k, A_k) by the proximal local step, then its copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.replicas import TRAIN_ROWS, ReplicaMoments, holdout_losses, max_halves
from fedcausal_flwr.dbn.wire import PHASES, shapes
from fedcausal_flwr.federation.client import CausalClient, Fit, check_shapes, checked_lagged
from fedcausal_flwr.names import checked_names, joined
from fedcausal_flwr.settings import MAX_REPLICAS, numbers


class FDBNLClient(CausalClient):
    """Holds ``(Xt, Xlag)``; answers ``train.local`` with ``(B_k, D_k)``.

    Only the second moments of the data are used, and only d x d / pd x d matrices leave.

    Parameters
    ----------
    Xt : array (n x d)
        The rows ``x_t`` of this client's series (``fedcausal_flwr.data.lagged`` makes both).
    Xlag : array (n x p*d)
        Their lags ``[x_{t-1}, ..., x_{t-p}]``, row by row.
    names : sequence of str, optional
        Labels of the d variables (default ``x0, x1, ...``); every node must report the
        same names in the same order, or the server drops it.
    run_seed : int
        The run config's ``seed`` (``from_context`` reads it): the only seed this client
        draws replica halves from, so a server cannot ask for other halves by sending others.
    """

    phases = {"local": "local_step", "local_replicas": "replicas_step"}

    def __init__(self, Xt: np.ndarray, Xlag: np.ndarray, partition_id: int = 0,
                 num_partitions: int = 1, names: Sequence[str] | None = None,
                 run_seed: int = 0) -> None:
        self.who = f"client {partition_id}"
        Xt, Xlag = checked_lagged(Xt, Xlag, self.who)
        self.n, self.d = Xt.shape
        self.names = checked_names(names, self.d, self.who)
        self.p = Xlag.shape[1] // self.d
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.mom = dbn.moments(Xt, Xlag)
        self.replica_moments = ReplicaMoments(Xt, Xlag, self.mom)
        self.run_seed = int(run_seed)

    @classmethod
    def context_arguments(cls, context: Any) -> dict[str, Any]:
        """The run config's ``seed`` (0 when it has none)."""
        return {"run_seed": int(context.run_config.get("seed", 0))}

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, the shape of its data and its variable names (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": self.n, "d": self.d, "p": self.p, "names": joined(self.names)}

    def check(self, phase: str, parameters: list[np.ndarray]) -> None:
        """The server's arrays of ``phase`` fit this client's data (:data:`PHASES`)."""
        names = PHASES[phase].down
        check_shapes(self.who, parameters, shapes(names, self.d, self.p), list(names))

    def local_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.local``: [W, A, beta_k, gamma_k] -> [B_k, D_k]."""
        self.check("local", parameters)
        B, D = dbn.admm_local_step(self.mom, *parameters, rho2=float(config["rho2"]))
        return [B, D], self.n, {"loss": dbn.squared_loss(B, D, self.mom)}

    def replicas(self, phase: str, parameters: list[np.ndarray], config: dict[str, Any]
                 ) -> tuple[list[np.ndarray], list[tuple[dbn.Moments, np.ndarray]], np.ndarray]:
        """Checked arrays of a replicated ``phase``, each replica's (moments, scalars), and
        its held-out losses at the config's ``taus`` (zeros for replicas that learn from
        other rows than the training block)."""
        names = PHASES[phase].down
        if len(parameters) != len(names):
            check_shapes(self.who, parameters, [()] * len(names), list(names))
        R = int(np.shape(parameters[names.index("rows")])[0])
        if not 1 <= R <= MAX_REPLICAS:
            raise ValueError(f"{self.who}: {R} replicas in one message (1 to {MAX_REPLICAS})")
        check_shapes(self.who, parameters, shapes(names, self.d, self.p, R), list(names))
        rows = np.asarray(parameters[names.index("rows")])
        most = max_halves(self.n)
        if not np.all(np.isfinite(rows)) or np.any(rows != np.round(rows)) or \
                np.any(rows < TRAIN_ROWS) or np.any(rows > most):
            raise ValueError(f"{self.who}: replica rows must be whole numbers from "
                             f"{TRAIN_ROWS} to {most} (at most as many halves as its "
                             f"{self.n} rows)")
        seed, holdout = int(config["replica-seed"]), float(config["holdout"])
        if seed != self.run_seed:
            raise ValueError(f"{self.who}: replica seed {seed} is not this run's seed "
                             f"{self.run_seed} (run config 'seed'); halves are drawn only "
                             "from the run's own seed")
        if not 0 < holdout < 1:
            raise ValueError(f"{self.who}: holdout must be in (0, 1), got {holdout}")
        taus = numbers(str(config.get("taus", "")))
        scal = np.asarray(parameters[names.index("scalars")], dtype=float)
        val = np.zeros((R, len(taus)))
        out = []
        for j, r in enumerate(int(x) for x in rows):
            out.append((self.replica_moments.of(r, seed, holdout), scal[j]))
            if r == TRAIN_ROWS and taus:
                val[j] = holdout_losses(self.replica_moments.validation(holdout),
                                        parameters[0][j], parameters[1][j], taus)
        return parameters, out, val

    def replicas_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.local_replicas``: the local step (2) of every replica in the message,
        each on its own rows -> [B, D, val] stacked by replica."""
        (W, A, beta, gamma, _, _), reps, val = self.replicas("local_replicas", parameters,
                                                             config)
        BD = [dbn.admm_local_step(mom, W[j], A[j], beta[j], gamma[j], rho2=float(sc[2]))
              for j, (mom, sc) in enumerate(reps)]
        B, D = np.stack([b for b, _ in BD]), np.stack([d for _, d in BD])
        return [B, D, val], self.n, {"loss": dbn.squared_loss(B[0], D[0], reps[0][0])}


class PFDBNLClient(FDBNLClient):
    """Answers ``train.personal`` with ``[W~_k, A~_k, W_k, A_k, h(W_k)]``."""

    phases = {"personal": "personal_step", "personal_replicas": "personal_replicas_step"}

    def personal_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.personal``: [W, A, W~_k, A~_k, beta_k, gamma_k] -> copies and W_k, A_k.

        The lambdas, mu, ``code_compat`` and ``restarts`` come from the server with the
        message (:meth:`~fedcausal_flwr.settings.Settings.from_wire`).
        """
        self.check("personal", parameters)
        s = dbn.PFDBNLSettings.from_wire(config, self.who)
        out = dbn.pfdbnl_client_step(self.mom, parameters, float(config["alpha"]),
                                     float(config["rho1"]), float(config["rho2"]),
                                     **s.to_wire())
        return out, self.n, {"loss": dbn.squared_loss(out[2], out[3], self.mom)}

    def personal_replicas_step(self, parameters: list[np.ndarray], config: dict[str, Any]
                               ) -> Fit:
        """``train.personal_replicas``: :meth:`personal_step` for every replica in the
        message, each on its own rows with its own scalars and lambdas, stacked by replica."""
        arrays, reps, val = self.replicas("personal_replicas", parameters, config)
        s = dbn.PFDBNLSettings.from_wire(config, self.who).to_wire()
        outs = []
        for j, (mom, sc) in enumerate(reps):
            alpha, rho1, rho2, lw, la = (float(x) for x in sc)
            outs.append(dbn.pfdbnl_client_step(mom, [a[j] for a in arrays[:6]], alpha, rho1,
                                               rho2, **{**s, "lambda_w": lw, "lambda_a": la}))
        stacked = [np.stack([o[i] for o in outs]) for i in range(5)]
        return [*stacked, val], self.n, {
            "loss": dbn.squared_loss(outs[0][2], outs[0][3], reps[0][0])}
