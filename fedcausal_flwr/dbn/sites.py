"""Sites that hold some of the federation's variables, in their own column order.

The federation's graph is over ``D`` variables (the union of the sites' variables, or those
every site shares). A site observes ``d_k`` of them, its CSV columns in any order. Its
:class:`SiteView` places them: the site solves its local step over the variables it
observes, in the federation's order, and answers with arrays shaped by the federation, zero
where its data say nothing. An entry ``W[i, j]`` (i -> j) is *informed* by the site when it
observes both i and j; a lag entry ``A[(k - 1) D + i, j]`` likewise. The server averages each
entry over the sites that inform it (:func:`fedcausal_flwr.dbn.model.masked_targets`).

Pure numpy: no I/O, no Flower.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.dbn.objective import Moments
from fedcausal_flwr.federation.sites import lag_index, shared, union

__all__ = ["SiteView", "lag_index", "shared", "union"]


class SiteView:
    """Where a site's ``own`` variables sit among the federation's ``variables``.

    ``own_cols``: the site's columns of the federation's variables, in the federation's
    order; ``cols``: their positions among the federation's. A variable of the site that the
    federation lacks (``variables="shared"``) is left out.
    """

    def __init__(self, own: Sequence[str], variables: Sequence[str], p: int) -> None:
        at = {n: i for i, n in enumerate(variables)}
        pairs = sorted((at[n], j) for j, n in enumerate(own) if n in at)
        self.D, self.d, self.p = len(variables), len(own), int(p)
        self.cols = np.array([i for i, _ in pairs], dtype=int)
        self.own_cols = np.array([j for _, j in pairs], dtype=int)
        self.identity = (self.D == self.d and np.array_equal(self.cols, np.arange(self.D))
                         and np.array_equal(self.own_cols, np.arange(self.d)))

    def moments(self, mom: Moments) -> Moments:
        """The site's moments over the variables it observes, in the federation's order."""
        if self.identity:
            return mom
        S, M, N = mom
        o, lo = self.own_cols, lag_index(self.own_cols, self.d, self.p)
        return S[np.ix_(o, o)], M[np.ix_(o, lo)], N[np.ix_(lo, lo)]

    def down(self, X: np.ndarray) -> np.ndarray:
        """A federation-shaped W-like (D x D) or A-like (p D x D) array on the site's
        variables (leading replica axes kept)."""
        if self.identity:
            return X
        c = self.cols
        rows = c if X.shape[-2] == self.D else lag_index(c, self.D, self.p)
        return X[..., rows[:, None], c]

    def up(self, X: np.ndarray, like: str) -> np.ndarray:
        """A site-shaped W-like or A-like array (``like`` "W" or "A") back in the
        federation's shape, zero where the site observes nothing."""
        if self.identity:
            return X
        c = self.cols
        rows = c if like == "W" else lag_index(c, self.D, self.p)
        out = np.zeros(X.shape[:-2] + ((self.D if like == "W" else self.p * self.D), self.D))
        out[..., rows[:, None], c] = X
        return out

    def informed(self) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks of the entries of W (D x D) and A (p D x D) the site informs."""
        seen = np.zeros(self.D, bool)
        seen[self.cols] = True
        return np.outer(seen, seen), np.outer(np.tile(seen, self.p), seen)
