"""Multi-party Diffie-Hellman private set intersection on Ed25519's prime-order group.

The group is the prime-order subgroup (order l ~ 2^252) of Edwards25519, through libsodium's
``crypto_core_ed25519`` and ``crypto_scalarmult_ed25519_noclamp`` (PyNaCl). PyNaCl binds no
ristretto255; the subgroup serves DH-PSI the same way: every point we make lies in it, each has
one canonical 32-byte encoding, and libsodium refuses a point outside it or of small order.
Each ID maps to ``H(id) = E(h_0) + E(h_1)`` with ``h_0 || h_1 = SHA-512(id)`` and ``E`` the
Elligator 2 map with cofactor clearing (``crypto_core_ed25519_from_uniform``): two maps added,
as ristretto255's hash to group (RFC 9496 sec. 4.3.4) and the random-oracle encodings of RFC
9380 do. Party m draws its own secret scalar ``k_m`` per run (uniform in [1, l), never sent).
Blinding is scalar multiplication, which commutes, so after every party has multiplied a point
by its key the fully blinded value ``k_1 ... k_K H(id)`` is the same whoever started; equal IDs
give equal values while, under the decisional Diffie-Hellman assumption, other values look
random to whoever lacks one of the keys (Huberman, Franklin & Hogg 1999; Meadows 1986).

The ring over the server's relay (:class:`~fedcausal_flwr.vertical.strategy.VFedCD` routes,
the parties compute): party m permutes its rows at random (``perm``), sends
``k_m H(ids[perm])`` (:func:`blinded`); at hop h = 1..K-1 party j multiplies the set that
started at party (j - h) mod K by ``k_j`` (:func:`reblinded`, order kept); after K - 1 hops
every set carries all K keys and the server finds, per party, the positions of the values all
parties hold, in the order of the sorted fully blinded values (:func:`common_positions`); each
party maps its positions back to rows through its own ``perm`` (:func:`rows_of`). K exchanges
in all. What each side learns: docs/threat-model.md ("VFedCD ID alignment").

Points travel as uint8 rows of 32 bytes (an ``n x 32`` array). Framework-free: no Flower, no I/O.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import reduce

import numpy as np

from fedcausal_flwr.extras import missing_extra

POINT_BYTES = 32
"""Bytes of an encoded point (and of a scalar)."""


def _nacl():
    """libsodium's bindings (PyNaCl, the ``vfedcd`` extra)."""
    try:
        from nacl import bindings
    except ModuleNotFoundError as e:  # the vfedcd extra installs it
        raise missing_extra(e, "VFedCD's private set intersection", "vfedcd", "nacl") from e
    return bindings


def new_key() -> bytes:
    """A party's secret scalar for one run: 64 bytes of the OS's entropy reduced mod l
    (uniform in [1, l) up to 2^-250)."""
    reduce_ = _nacl().crypto_core_ed25519_scalar_reduce
    while True:
        k = reduce_(os.urandom(64))
        if any(k):
            return k


def hashed_points(ids: Sequence[str]) -> np.ndarray:
    """``H(id)`` of each ID (UTF-8, SHA-512, two Elligator 2 maps added): ``n x 32`` uint8.
    Computed and kept on the party; an unblinded point never leaves it."""
    nacl = _nacl()
    elligator, add = nacl.crypto_core_ed25519_from_uniform, nacl.crypto_core_ed25519_add

    def point(i: str) -> bytes:
        h = hashlib.sha512(i.encode()).digest()
        return add(elligator(h[:32]), elligator(h[32:]))

    out = b"".join(point(i) for i in ids)
    return np.frombuffer(out, dtype=np.uint8).reshape(len(ids), POINT_BYTES).copy()


def reblinded(points: np.ndarray, key: bytes) -> np.ndarray:
    """Every point multiplied by the scalar ``key`` (``n x 32`` uint8 in and out, row order
    kept); an invalid encoding (not a point of the prime-order group) raises ValueError."""
    mult = _nacl().crypto_scalarmult_ed25519_noclamp
    pts = np.ascontiguousarray(points, dtype=np.uint8)
    if pts.ndim != 2 or pts.shape[1] != POINT_BYTES:
        raise ValueError(f"expected n x {POINT_BYTES} uint8 points, got shape {pts.shape}")
    raw = pts.tobytes()
    try:
        out = b"".join(mult(key, raw[i:i + POINT_BYTES])
                       for i in range(0, len(raw), POINT_BYTES))
    except Exception as e:  # libsodium rejects a non-canonical encoding or the identity
        raise ValueError("not a valid point of the prime-order group "
                         f"({type(e).__name__})") from None
    return np.frombuffer(out, dtype=np.uint8).reshape(pts.shape).copy()


def random_order(n: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from the OS's entropy (never seeded:
    the server must not be able to predict which position holds which row)."""
    return np.random.default_rng().permutation(n)


def blinded(points: np.ndarray, key: bytes, perm: np.ndarray) -> np.ndarray:
    """The first message of a party: its points in the order ``perm``, times its ``key``."""
    return reblinded(np.asarray(points)[perm], key)


def _values(points: np.ndarray) -> np.ndarray:
    """Each 32-byte row as one fixed-width bytes value (sortable, comparable)."""
    return np.ascontiguousarray(points, dtype=np.uint8).view(f"S{POINT_BYTES}").ravel()


def common_positions(finals: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per party, the positions of its fully blinded values that every party holds, in the
    ascending order of those values (the common order of the aligned rows)."""
    values = [_values(f) for f in finals]
    shared = reduce(np.intersect1d, values)
    out = []
    for v in values:
        order = np.argsort(v, kind="stable")
        out.append(order[np.searchsorted(v, shared, sorter=order)].astype(np.int64))
    return out


def rows_of(perm: np.ndarray, positions: Sequence[int], n: int) -> np.ndarray:
    """The party's rows at ``positions`` of its permuted list; a ValueError when a position is
    out of range or repeated (a server that breaks the protocol)."""
    pos = np.asarray(positions, dtype=np.int64)
    if pos.size and (pos.min() < 0 or pos.max() >= n or len(np.unique(pos)) != len(pos)):
        raise ValueError("the server's shared positions are out of range or repeated")
    return np.asarray(perm)[pos]

