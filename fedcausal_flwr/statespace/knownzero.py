"""Coupling blocks known to be zero (run config ``statespace.ss-known-zero``).

The statements ``A:m<-n`` and ``B:m<-n`` are prior knowledge like every family's, parsed by
:mod:`fedcausal_flwr.knowledge` (:func:`~fedcausal_flwr.knowledge.parse_known_zero`,
:class:`~fedcausal_flwr.knowledge.ZeroBlock`, :attr:`Knowledge.zero_blocks
<fedcausal_flwr.knowledge.Knowledge.zero_blocks>`); here: their boolean masks over the full
``A_hat``, ``B_hat`` (:func:`known_zero_masks`), which the server holds at exactly 0
(:func:`fedcausal_flwr.statespace.model.with_known_zero`). Pure numpy, no Flower;
:mod:`fedcausal_flwr.statespace.model` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.knowledge import (  # noqa: F401 - re-exported: knownzero's names
    ANY_CLIENT,
    ZeroBlock,
    parse_known_zero,
)
from fedcausal_flwr.statespace.blocks import offsets


def known_zero_masks(blocks: Sequence[ZeroBlock], cids: Sequence[int], P: Sequence[int],
                     U: Sequence[int], known: Sequence[int] | None = None
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """Boolean ``(zero_A, zero_B)`` over the full ``A_hat`` (``B_hat``) of the clients
    ``cids`` (sizes ``P``, ``U``), True on the known-zero blocks; None without statements.

    ``known``: every client of the federation (default ``cids``); a statement naming a
    client outside it is a ValueError naming the client, one naming a known client that
    is not in ``cids`` (dropped) holds no block.
    """
    if not blocks:
        return None
    known = list(cids) if known is None else list(known)
    for b in blocks:
        for c in (b.target, b.source):
            if c is not None and c not in known:
                raise ValueError(f"known-zero block {str(b)!r}: no client {c}; the "
                                 f"federation's clients are {sorted(known)}")
    pa, ua = offsets(P), offsets(U)
    zero_A = np.zeros((pa[-1], pa[-1]), dtype=bool)
    zero_B = np.zeros((pa[-1], ua[-1]), dtype=bool)
    for b in blocks:
        Z, cols = (zero_A, pa) if b.matrix == "A" else (zero_B, ua)
        for m, cm in enumerate(cids):
            for n, cn in enumerate(cids):
                if m != n and b.target in (None, cm) and b.source in (None, cn):
                    Z[pa[m]:pa[m + 1], cols[n]:cols[n + 1]] = True
    return zero_A, zero_B


def zero_block_list(Z: np.ndarray, cids: Sequence[int], rows: Sequence[int],
                    cols: Sequence[int]) -> list[list[int]]:
    """``[[target, source], ...]`` client ids of the blocks ``Z`` holds at zero."""
    r, c = offsets(rows), offsets(cols)
    return [[int(cm), int(cn)] for m, cm in enumerate(cids) for n, cn in enumerate(cids)
            if m != n and r[m + 1] > r[m] and c[n + 1] > c[n]
            and Z[r[m]:r[m + 1], c[n]:c[n + 1]].all()]
