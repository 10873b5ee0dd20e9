"""Block indexing and time differencing of FedGC's and FedCF's arrays.

A matrix over all clients (``A_hat``, ``B_hat``, the known ``A``) is cut into blocks by the
clients' sizes (:func:`offsets`, :func:`block`); a window's residual rows may be differenced in
time before they are squared (:func:`time_difference`: a departure from both papers, argued
there). Pure numpy, no Flower; :mod:`fedcausal_flwr.statespace.model` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def block(M: np.ndarray, rows: Sequence[int], cols: Sequence[int], m: int, n: int
          ) -> np.ndarray:
    """Block (m, n) of ``M`` with row sizes ``rows`` and column sizes ``cols``."""
    r, c = offsets(rows), offsets(cols)
    return M[r[m]:r[m + 1], c[n]:c[n + 1]]


def offsets(sizes: Sequence[int]) -> np.ndarray:
    """Start index of each block, and the total at the end."""
    return np.cumsum((0, *sizes))


def time_difference(X: np.ndarray) -> np.ndarray:
    """``x^t - x^{t-1}`` of a window's rows (``W x k`` -> ``(W - 1) x k``).

    Departure from both papers (FedGC eq 15, FedCF eq 13 are losses on levels): with
    ``difference`` the server's residuals are differenced in time before they are squared.
    An unknown mean shift ``b^t`` on client m's states (the Kalman filters do not
    model b) sits in client m's residual as ``b^t``; it is piecewise constant, so its
    difference vanishes except at its few jumps, while ``A_mn`` still maps the differenced
    states of client n to the differenced residual of client m. On levels, ``b^t`` is
    explained by the other clients' states, which follow it through ``A_nm`` (spurious
    ``A_mn``). Unknown shifts need no model and no estimate, and nothing new is sent.
    """
    return X[1:] - X[:-1]


def time_difference_adjoint(E: np.ndarray) -> np.ndarray:
    """``Delta^T E`` (``(W - 1) x k`` -> ``W x k``): the chain rule through
    :func:`time_difference`, so ``d ||Delta R||^2 / dR = 2 Delta^T Delta R``."""
    G = np.zeros((E.shape[0] + 1, E.shape[1]))
    G[1:] += E
    G[:-1] -= E
    return G


def differenced(R: np.ndarray, difference: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """``(residual as squared, its gradient direction, n)`` of a window's residual rows ``R``.

    Levels: ``(R, R, W)``. Differenced: ``(Delta R, Delta^T Delta R, W - 1)``, so that the
    window's loss is ``||first||^2 / n`` and its gradient w.r.t. ``R`` is ``2 second / n``
    (a window of one row contributes nothing).
    """
    if not difference:
        return R, R, R.shape[0]
    E = time_difference(R)
    return E, time_difference_adjoint(E), max(E.shape[0], 1)
