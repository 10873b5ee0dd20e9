"""FDBNL client: the closed-form local ADMM step on the client's own time series.

PFDBNL client: personalized (W_k, A_k) by the proximal local step, then its copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn import wire
from fedcausal_flwr.dbn.replicas import (
    ALL_ROWS,
    TRAIN_ROWS,
    ReplicaMoments,
    holdout_losses,
    max_halves,
)
from fedcausal_flwr.dbn.sites import SiteView, lag_index
from fedcausal_flwr.dbn.wire import LIKE, PHASES
from fedcausal_flwr.federation.client import CausalClient, Fit, check_shapes, checked_lagged
from fedcausal_flwr.federation.sites import sent_variables
from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.names import checked_names, joined
from fedcausal_flwr.settings import MAX_REPLICAS, numbers

MIN_OBSERVED = 2
"""A column observed in fewer of a client's rows than this is a variable it does not hold."""


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
        Labels of the d variables (default ``x0, x1, ...``). Sites may hold different
        variables in any order: the server sends the federation's ``variables`` to a site
        whose list differs, and the site answers over the variables it observes
        (:class:`~fedcausal_flwr.dbn.sites.SiteView`).
    run_seed : int
        The run config's ``seed`` (``from_context`` reads it): the only seed this client
        draws replica halves from, so a server cannot ask for other halves by sending others.

    Missing values (NaN) are allowed: the moments are pairwise-complete with a PSD repair
    (:func:`~fedcausal_flwr.dbn.model.moments`); a column observed in fewer than
    :data:`MIN_OBSERVED` rows is a variable the client does not hold (reported as
    ``unobserved``). The share of missing cells goes to the server as ``missing``.
    """

    phases = {"local": "local_step", "local_replicas": "local_step"}

    def __init__(self, Xt: np.ndarray, Xlag: np.ndarray, partition_id: int = 0,
                 num_partitions: int = 1, names: Sequence[str] | None = None,
                 run_seed: int = 0) -> None:
        self.who = f"client {partition_id}"
        Xt, Xlag = checked_lagged(Xt, Xlag, self.who, missing=True)
        self.n, d = Xt.shape
        self.columns = checked_names(names, d, self.who)
        self.p = Xlag.shape[1] // d
        self.missing = float(np.mean(np.isnan(Xt)))
        seen = np.flatnonzero(np.sum(~np.isnan(Xt), axis=0) >= MIN_OBSERVED)
        self.unobserved = [n for j, n in enumerate(self.columns) if j not in set(seen)]
        if len(seen) < d:
            Xt, Xlag = Xt[:, seen], Xlag[:, lag_index(seen, d, self.p)]
        self.names, self.d = [self.columns[j] for j in seen], len(seen)
        if not self.d:
            raise ValueError(f"{self.who}: no column has {MIN_OBSERVED} or more values")
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.views: dict[str, SiteView] = {}
        self.mom = dbn.moments(Xt, Xlag)
        self.replica_moments = ReplicaMoments(Xt, Xlag, self.mom)
        self.run_seed = int(run_seed)

    @classmethod
    def context_arguments(cls, context: Any) -> dict[str, Any]:
        """The run config's ``seed`` (0 when it has none)."""
        return {"run_seed": int(context.run_config.get("seed", 0))}

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, the shape of its data and its variable names (no data); with
        missing cells their share (``missing``) and the columns it does not observe
        (``unobserved``)."""
        out = {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
               "n": self.n, "d": len(self.columns), "p": self.p,
               "names": joined(self.columns)}
        if self.missing:
            out["missing"] = self.missing
        if self.unobserved:
            out["unobserved"] = joined(self.unobserved)
        return out

    def view(self, config: dict[str, Any]) -> SiteView | None:
        """Where this site's variables sit among the federation's (the config's
        ``variables``; None: the federation's are this site's, in its order)."""
        text = str(config.get("variables", "") or "")
        if not text:
            if self.unobserved:
                raise ValueError(f"{self.who}: the server sent no 'variables' to a site "
                                 "that does not observe all its columns")
            return None
        if text not in self.views:
            variables = sent_variables(config, self.names, self.who)
            self.views = {text: SiteView(self.names, variables, self.p)}
        return self.views[text]

    def knowledge(self, config: dict[str, Any], view: SiteView | None) -> Masks | None:
        """The masks of the prior knowledge that the server sent (PFDBNL's local step needs
        them; :meth:`Masks.from_config <fedcausal_flwr.knowledge.Masks.from_config>`), over
        the federation's variables."""
        return Masks.from_config(config, self.d if view is None else view.D, self.p)

    def replicas(self, phase: str, parameters: list[np.ndarray], config: dict[str, Any]
                 ) -> tuple[dict[str, np.ndarray], list[tuple[dbn.Moments, np.ndarray]],
                            np.ndarray, SiteView | None]:
        """The checked stack of ``phase`` (:func:`~fedcausal_flwr.dbn.wire.stacked`, on this
        site's variables), each replica's (moments, scalars), its held-out losses at the
        config's ``taus`` (zeros for replicas that learn from other rows than the training
        block) and the site's view (:meth:`view`)."""
        sent = PHASES[phase].down
        if len(parameters) != len(sent):
            check_shapes(self.who, parameters, [()] * len(sent), list(sent))
        R = wire.replicas_in(phase, parameters)
        if not 1 <= R <= MAX_REPLICAS:
            raise ValueError(f"{self.who}: {R} replicas in one message (1 to {MAX_REPLICAS})")
        view = self.view(config)
        D = self.d if view is None else view.D
        check_shapes(self.who, parameters, wire.wire_shapes(phase, "down", D, self.p, R),
                     list(sent))
        got = wire.stacked(phase, "down", parameters, config)
        if view is not None:
            got = {n: view.down(a) if LIKE[n] in ("W", "A") else a for n, a in got.items()}
        local = (lambda m: m) if view is None else view.moments  # noqa: E731
        rows = np.asarray(got["rows"])
        most = max_halves(self.n)
        if not np.all(np.isfinite(rows)) or np.any(rows != np.round(rows)) or \
                np.any(rows < TRAIN_ROWS) or np.any(rows > most):
            raise ValueError(f"{self.who}: replica rows must be whole numbers from "
                             f"{TRAIN_ROWS} to {most} (at most as many halves as its "
                             f"{self.n} rows)")
        # a replica on all rows draws none (a plain step sends neither key); one on a subsample
        # needs both (a message without them is refused, not given defaults)
        missing = [k for k in ("replica-seed", "holdout") if k not in config]
        if missing and np.any(rows != ALL_ROWS):
            raise ValueError(f"{self.who}: replicas on subsamples of the rows, but the "
                             f"message has no {' or '.join(map(repr, missing))}")
        seed = int(config.get("replica-seed", self.run_seed))
        holdout = float(config.get("holdout", 0.5))
        if seed != self.run_seed:
            raise ValueError(f"{self.who}: replica seed {seed} is not this run's seed "
                             f"{self.run_seed} (run config 'seed'); halves are drawn only "
                             "from the run's own seed")
        if not 0 < holdout < 1:
            raise ValueError(f"{self.who}: holdout must be in (0, 1), got {holdout}")
        taus = numbers(str(config.get("taus", "")))
        scal = np.asarray(got["scalars"], dtype=float)
        val = np.zeros((R, len(taus)))
        out = []
        for j, r in enumerate(int(x) for x in rows):
            out.append((local(self.replica_moments.of(r, seed, holdout)), scal[j]))
            if r == TRAIN_ROWS and taus:
                val[j] = holdout_losses(local(self.replica_moments.validation(holdout)),
                                        got["W"][j], got["A"][j], taus)
        return got, out, val, view

    def local_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.local`` (``train.local_replicas``): the local step (2) of every replica in
        the message, each on its own rows: [W, A, beta_k, gamma_k] -> [B_k, D_k] (and the
        held-out losses ``val``) stacked by replica."""
        phase = str(config.get("phase", "local"))
        got, reps, val, view = self.replicas(phase, parameters, config)
        BD = [dbn.admm_local_step(mom, *(got[n][j] for n in PHASES["local"].down),
                                  rho2=float(sc[2])) for j, (mom, sc) in enumerate(reps)]
        B, D = np.stack([b for b, _ in BD]), np.stack([d for _, d in BD])
        loss = dbn.squared_loss(B[0], D[0], reps[0][0])
        if view is not None:
            B, D = view.up(B, "W"), view.up(D, "A")
        return wire.up(phase, {"B": B, "D": D, "val": val}), self.n, {"loss": loss}


class PFDBNLClient(FDBNLClient):
    """Answers ``train.personal`` with ``[W~_k, A~_k, W_k, A_k, h(W_k)]``."""

    phases = {"personal": "personal_step", "personal_replicas": "personal_step"}

    def personal_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.personal`` (``train.personal_replicas``): for every replica in the message,
        each on its own rows with its own scalars and lambdas, [W, A, W~_k, A~_k, beta_k,
        gamma_k, W_k, A_k] (W_k, A_k: this client's last personalized graph, where its local
        step starts) -> copies, the new W_k, A_k and h(W_k), stacked by replica.

        mu, ``code_compat``, ``restarts``, ``local_start``, ``local_maxiter`` and
        ``local_ftol`` come from the server with the message, read as the typed
        :class:`~fedcausal_flwr.dbn.settings.PersonalInputs` alone
        (:meth:`~fedcausal_flwr.settings.Settings.from_wire`).
        """
        phase = str(config.get("phase", "personal"))
        got, reps, val, view = self.replicas(phase, parameters, config)
        s = dbn.PFDBNLSettings.from_wire(config, self.who).to_wire()
        masks = self.knowledge(config, view)
        if masks is not None and view is not None:
            masks = masks.subset(view.cols, view.p, view.D)
        outs = []
        for j, (mom, sc) in enumerate(reps):
            alpha, rho1, rho2, lw, la = (float(x) for x in sc)
            outs.append(dbn.pfdbnl_client_step(
                mom, [got[n][j] for n in PHASES["personal"].down], alpha, rho1, rho2,
                **{**s, "lambda_w": lw, "lambda_a": la}, knowledge=masks))
        out = {n: np.stack([o[i] for o in outs]) for i, n in enumerate(PHASES["personal"].up)}
        if view is not None:
            out = {n: view.up(a, LIKE[n]) if LIKE[n] in ("W", "A") else a
                   for n, a in out.items()}
        return wire.up(phase, {**out, "val": val}), self.n, {
            "loss": dbn.squared_loss(outs[0][2], outs[0][3], reps[0][0])}
