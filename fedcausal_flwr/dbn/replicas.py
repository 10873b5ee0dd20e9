"""Replicas of FDBNL/PFDBNL that ride in one run's messages.

A replicated run fits the protocol on several *replicas* at once; each exchange carries every
replica's arrays stacked, so the number of exchanges does not grow with their number. Replica
``j`` is ``(rows, lambda_w, lambda_a)``; ``rows`` selects which of each client's rows (of its
lagged design) it learns from:

- ``ALL_ROWS`` (0): all of them (the ordinary fit);
- ``r >= 1``: half ``r`` of a complementary pair (:func:`fedcausal_flwr.stability.
  complementary_halves`), for edge selection frequencies;
- ``TRAIN_ROWS`` (-1): all but the last ``holdout`` share, the *validation block*, on which
  the client scores the replica's consensus graph (its held-out loss, one number per
  threshold) for the penalty path.

Clients draw the rows themselves from the seed the server sends; rows never leave them.
Pure numpy: no I/O, no Flower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.settings import numbers
from fedcausal_flwr.stability import complementary_halves

ALL_ROWS, TRAIN_ROWS = 0, -1


@dataclass(frozen=True)
class Replica:
    """Which rows a replica learns from, and its L1 weights."""

    rows: int
    lambda_w: float
    lambda_a: float


def replica_table(lambdas: Sequence[tuple[float, float]], halves: int, holdout: bool
                  ) -> list[Replica]:
    """Every replica of a run: for each ``(lambda_w, lambda_a)``, the training block (with
    ``holdout``), all rows, then halves ``1..halves``. With one pair of lambdas and no
    holdout, replica 0 is the ordinary fit."""
    rows = ([TRAIN_ROWS] if holdout else []) + [ALL_ROWS] + list(range(1, halves + 1))
    return [Replica(r, float(lw), float(la)) for lw, la in lambdas for r in rows]


def replicas_of(s: dbn.FDBNLSettings) -> list[Replica]:
    """The replicas of a run with settings ``s``: the path's lambdas (``lambda_select`` other
    than ``"fixed"``) or the settings' own, times the rows (:func:`replica_table`)."""
    holdout = s.lambda_select == "holdout"
    lambdas = ([(lam, lam) for lam in numbers(s.lambda_path)] if s.lambda_select != "fixed"
               else [(s.lambda_w, s.lambda_a)])
    return replica_table(lambdas, s.replicas, holdout)


def max_halves(n: int) -> int:
    """The most half-sample replicas a client of ``n`` rows answers: n (at least 2, even).

    The moments of a half are a sum of the rows' outer products, and an honest-but-curious
    server can solve FDBNL's closed-form local step for them. Two complementary halves add one
    independent sum to the full one, so R halves give R/2 + 1 (the training block one more):
    with R <= n the linear system for the n rows' outer products stays underdetermined by
    about n/2 (a mitigation, not a proof: ``docs/threat-model.md``)."""
    return max(2, n - n % 2)


def train_rows(n: int, holdout: float) -> int:
    """Rows in the training block of ``n``: all but ``max(1, round(holdout n))``."""
    n_val = max(1, int(round(holdout * n)))
    if n - n_val < 2:
        raise ValueError(f"holdout {holdout} of {n} rows leaves {n - n_val} to train on "
                         "(need 2 or more)")
    return n - n_val


def replica_rows(n: int, rows: int, seed: int, holdout: float) -> np.ndarray:
    """Indices of the rows replica ``rows`` learns from (see the module docstring)."""
    if rows == ALL_ROWS:
        return np.arange(n)
    if rows == TRAIN_ROWS:
        return np.arange(train_rows(n, holdout))
    return complementary_halves(n, rows, seed)


class ReplicaMoments:
    """A client's moments of each replica's rows, computed once each (and of its validation
    block), from its lagged design ``(Xt, Xlag)``."""

    def __init__(self, Xt: np.ndarray, Xlag: np.ndarray, full: dbn.Moments) -> None:
        self.Xt, self.Xlag = Xt, Xlag
        self._cache: dict[tuple, dbn.Moments] = {(ALL_ROWS,): full}

    def of(self, rows: int, seed: int, holdout: float) -> dbn.Moments:
        """The moments of replica ``rows``'s rows."""
        key = (ALL_ROWS,) if rows == ALL_ROWS else (rows, seed, holdout)
        if key not in self._cache:
            idx = replica_rows(len(self.Xt), rows, seed, holdout)
            self._cache[key] = dbn.moments(self.Xt[idx], self.Xlag[idx])
        return self._cache[key]

    def validation(self, holdout: float) -> dbn.Moments:
        """The moments of the validation block."""
        key = ("validation", holdout)
        if key not in self._cache:
            start = train_rows(len(self.Xt), holdout)
            self._cache[key] = dbn.moments(self.Xt[start:], self.Xlag[start:])
        return self._cache[key]


def holdout_losses(mom: dbn.Moments, W: np.ndarray, A: np.ndarray, taus: Sequence[float]
                   ) -> np.ndarray:
    """l(W_tau, A_tau) on held-out moments for each threshold tau (W_tau: entries below tau
    set to 0)."""
    return np.array([dbn.squared_loss(dbn.threshold(W, t), dbn.threshold(A, t), mom)
                     for t in taus])


def edge_count(W: np.ndarray, A: np.ndarray, tau_w: float, tau_a: float | None = None
               ) -> int:
    """Edges of W thresholded at tau_w and A at tau_a (default tau_w), self-loops of W left
    out."""
    W = dbn.threshold(W, tau_w) * (1 - np.eye(W.shape[0]))
    tau_a = tau_w if tau_a is None else tau_a
    return int(np.sum(W != 0) + np.sum(dbn.threshold(A, tau_a) != 0))
