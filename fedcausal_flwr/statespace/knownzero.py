"""Coupling blocks known to be zero (run config ``statespace.ss-known-zero``).

The statements ``A:m<-n`` and ``B:m<-n`` (:func:`parse_known_zero`, :class:`ZeroBlock`) and
their boolean masks over the full ``A_hat``, ``B_hat`` (:func:`known_zero_masks`), which the
server holds at exactly 0 (:func:`fedcausal_flwr.statespace.model.with_known_zero`).
Pure numpy, no Flower; :mod:`fedcausal_flwr.statespace.model` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fedcausal_flwr.statespace.blocks import offsets

ANY_CLIENT = "*"


class ZeroBlock(NamedTuple):
    """``matrix`` (``"A"`` or ``"B"``) block ``(target, source)`` known to be 0: client
    ``source``'s state (input) does not drive client ``target``'s state; None: every client."""

    matrix: str
    target: int | None
    source: int | None

    def __str__(self) -> str:
        def name(c: int | None) -> str:
            return ANY_CLIENT if c is None else str(c)
        return f"{self.matrix}:{name(self.target)}<-{name(self.source)}"


def _client_id(text: str, statement: str, where: str) -> int | None:
    """A partition id (``3`` or ``c3``, the result's naming) or ``*`` (None)."""
    t = text.strip()
    if t == ANY_CLIENT:
        return None
    digits = t[1:] if t[:1] in ("c", "C") else t
    if not digits.isdigit():
        raise ValueError(f"{where}: {statement!r}: {t!r} is not a client; name one by its "
                         "partition id (e.g. 2 or c2) or '*' for every client")
    return int(digits)


def parse_known_zero(text: str, where: str = "known-zero") -> tuple[ZeroBlock, ...]:
    """The comma-separated statements ``A:m<-n`` (``A_mn = 0``: client n's state does not
    drive client m's; also written ``A:n->m``) and ``B:m<-n`` (``B_mn = 0``: client n's input
    does not drive client m's state), clients by partition id or ``*`` (every client, the
    diagonal block left out); a malformed statement is a ValueError naming ``where``."""
    out = []
    for item in (t.strip() for t in str(text).split(",")):
        if not item:
            continue
        matrix, colon, body = item.partition(":")
        matrix = matrix.strip().upper()
        arrows = [a for a in ("<-", "->") if body.count(a) == 1]
        if not colon or matrix not in ("A", "B") or len(arrows) != 1:
            raise ValueError(f"{where}: {item!r} is not a known-zero block; write "
                             "'A:target<-source' or 'B:target<-source' (partition ids or "
                             "'*'), e.g. 'A:1<-0, A:2<-*, B:1<-0'")
        left, right = body.split(arrows[0])
        target, source = (left, right) if arrows[0] == "<-" else (right, left)
        block_ = ZeroBlock(matrix, _client_id(target, item, where),
                           _client_id(source, item, where))
        if block_.target is not None and block_.target == block_.source:
            raise ValueError(f"{where}: {item!r}: the diagonal block is client "
                             f"{block_.target}'s own, known to it and not learned")
        out.append(block_)
    return tuple(out)


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
