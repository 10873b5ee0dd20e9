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

Against a party that deviates (issue 35): each party commits to its key with its first message
(``K_m = k_m G``, :func:`commitment`, G the group's base point) and proves with each hop's
output that it is its input times that key, position by position (:func:`hop_proof`, checked
by the relay with :func:`hop_proof_ok`): a batched Chaum-Pedersen proof of equal discrete logs
(the DLEQ proof of RFC 9497 sec. 2.2, "batched" by random weights that hash the input, the
output and the commitment: Fiat-Shamir). A reorder, a substituted or dropped point, or another
key than the committed one fails it except with probability about n / l; the proof is
zero-knowledge (honest-verifier, random oracle), so the relay learns nothing it did not see.
:func:`points_problem` checks a set for the group (canonical encodings of the prime-order
subgroup, not the identity) and for repeated points.

Points travel as uint8 rows of 32 bytes (an ``n x 32`` array). Framework-free: no Flower, no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from functools import reduce

import numpy as np

from fedcausal_flwr.extras import missing_extra

POINT_BYTES = 32
"""Bytes of an encoded point (and of a scalar)."""

PROOF_BYTES = 2 * POINT_BYTES
"""Bytes of a hop's proof (:func:`hop_proof`): the challenge and the response, two scalars."""

ORDER = 2**252 + 27742317777372353535851937790883648493
"""The order l of the prime-order group."""

_DOMAIN = b"fedcausal-flwr/psi/hop-proof/v1"


def _nacl():
    """libsodium's bindings (PyNaCl, the ``vfedcd`` extra)."""
    try:
        from nacl import bindings
    except ModuleNotFoundError as e:  # the vfedcd extra installs it
        raise missing_extra(e, "VFedCD's private set intersection", "vfedcd", "nacl") from e
    return bindings


def _random_scalar() -> bytes:
    """64 bytes of the OS's entropy reduced mod l (uniform in [1, l) up to 2^-250)."""
    reduce_ = _nacl().crypto_core_ed25519_scalar_reduce
    while True:
        k = reduce_(os.urandom(64))
        if any(k):
            return k


def new_key() -> bytes:
    """A party's secret scalar for one run (uniform in [1, l), the OS's entropy)."""
    return _random_scalar()


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



# ---- a deviating party: checks of a set and the proof of a hop --------------------------
def points_problem(points: np.ndarray) -> str | None:
    """Why ``points`` (``n x 32`` uint8) is not a set of distinct points of the prime-order
    group (None: it is): the first invalid encoding (not canonical, off the curve, outside the
    subgroup, of small order) or the number of repeated points."""
    pts = np.ascontiguousarray(points, dtype=np.uint8)
    if pts.ndim != 2 or pts.shape[1] != POINT_BYTES:
        return f"expected n x {POINT_BYTES} uint8 points, got shape {pts.shape}"
    repeated = len(pts) - len(np.unique(_values(pts)))
    if repeated:
        return f"{repeated} of its {len(pts)} points are repeated"
    valid, raw = _nacl().crypto_core_ed25519_is_valid_point, pts.tobytes()
    for i in range(len(pts)):
        if not valid(raw[i * POINT_BYTES:(i + 1) * POINT_BYTES]):
            return (f"point {i} of {len(pts)} is not a valid point of the prime-order group")
    return None


def commitment(key: bytes) -> bytes:
    """``K = key G``: a party's commitment to its key, sent with its first message (it
    reveals nothing of ``key`` under the discrete-log assumption, nor of any ``key H(id)``
    under DDH)."""
    return _nacl().crypto_scalarmult_ed25519_base_noclamp(key)


def _scalar(data: bytes) -> bytes:
    """SHA-512 of ``data`` reduced mod l (a uniform scalar, 32 bytes little-endian)."""
    return (int.from_bytes(hashlib.sha512(data).digest(), "little") % ORDER).to_bytes(
        POINT_BYTES, "little")


def _weights(x: np.ndarray, y: np.ndarray, K: bytes, label: bytes) -> list[bytes]:
    """The random weights of the batch: one scalar per position, from a hash of the whole
    statement (label, commitment, input and output), so that the output is fixed first."""
    seed = hashlib.sha512(b"|".join((
        _DOMAIN, b"weights", label, K, len(x).to_bytes(8, "little"),
        hashlib.sha512(np.ascontiguousarray(x, dtype=np.uint8).tobytes()).digest(),
        hashlib.sha512(np.ascontiguousarray(y, dtype=np.uint8).tobytes()).digest()))).digest()
    return [_scalar(seed + i.to_bytes(8, "little")) for i in range(len(x))]


def _composite(points: np.ndarray, weights: Sequence[bytes]) -> bytes:
    """``sum_i weights[i] points[i]``; libsodium raises on a point outside the group."""
    nacl = _nacl()
    mult, add = nacl.crypto_scalarmult_ed25519_noclamp, nacl.crypto_core_ed25519_add
    raw, acc = np.ascontiguousarray(points, dtype=np.uint8).tobytes(), None
    for i, w in enumerate(weights):
        term = mult(w, raw[i * POINT_BYTES:(i + 1) * POINT_BYTES])
        acc = term if acc is None else add(acc, term)
    return acc


def _challenge(K: bytes, M: bytes, Z: bytes, t1: bytes, t2: bytes, label: bytes) -> bytes:
    return _scalar(b"|".join((_DOMAIN, b"challenge", label, K, M, Z, t1, t2)))


def hop_proof(x: np.ndarray, y: np.ndarray, key: bytes, label: bytes) -> bytes:
    """A proof that ``y == reblinded(x, key)`` position by position, for the commitment
    ``commitment(key)`` (:data:`PROOF_BYTES`: challenge and response). ``label`` names the
    statement (run, hop, owner, party) so a proof serves only where it was made.

    Batched Chaum-Pedersen (RFC 9497 sec. 2.2.1, "GenerateProof"): with the weights ``w``
    of :func:`_weights`, ``M = sum w_i x_i`` and ``Z = key M``; a random nonce ``r`` gives
    ``t1 = r G``, ``t2 = r M``, the challenge ``c = H(K, M, Z, t1, t2)`` and ``s = r - c key``.
    Costs one scalar multiplication and one addition per point (as much again as the hop)."""
    if len(x) == 0:
        return bytes(PROOF_BYTES)
    nacl = _nacl()
    K = commitment(key)
    M = _composite(x, _weights(x, y, K, label))
    Z = nacl.crypto_scalarmult_ed25519_noclamp(key, M)
    r = _random_scalar()  # the proof's nonce, fresh per proof
    t1 = nacl.crypto_scalarmult_ed25519_base_noclamp(r)
    t2 = nacl.crypto_scalarmult_ed25519_noclamp(r, M)
    c = _challenge(K, M, Z, t1, t2, label)
    s = nacl.crypto_core_ed25519_scalar_sub(r, nacl.crypto_core_ed25519_scalar_mul(c, key))
    return c + s


def hop_proof_ok(x: np.ndarray, y: np.ndarray, K: bytes, proof: bytes, label: bytes) -> bool:
    """Whether ``proof`` shows ``y`` to be ``x`` times the key committed in ``K``, position by
    position (RFC 9497 sec. 2.2.2, "VerifyProof"): ``t1 = s G + c K``, ``t2 = s M + c Z``
    with ``M = sum w_i x_i``, ``Z = sum w_i y_i``, and ``c == H(K, M, Z, t1, t2)``. False for
    another count, an invalid point, a reorder, a substitution or another key (except with
    probability about n / l). Costs two scalar multiplications and additions per point."""
    x = np.ascontiguousarray(x, dtype=np.uint8)
    y = np.ascontiguousarray(y, dtype=np.uint8)
    if x.shape != y.shape or len(proof) != PROOF_BYTES:
        return False
    if len(x) == 0:
        return True
    nacl = _nacl()
    c, s = bytes(proof[:POINT_BYTES]), bytes(proof[POINT_BYTES:])
    try:
        w = _weights(x, y, K, label)
        M, Z = _composite(x, w), _composite(y, w)
        mult = nacl.crypto_scalarmult_ed25519_noclamp
        t1 = nacl.crypto_core_ed25519_add(nacl.crypto_scalarmult_ed25519_base_noclamp(s),
                                          mult(c, K))
        t2 = nacl.crypto_core_ed25519_add(mult(s, M), mult(c, Z))
    except Exception:  # an invalid point, a zero scalar (libsodium refuses the identity)
        return False
    return hmac.compare_digest(c, _challenge(K, M, Z, t1, t2, label))


def hop_label(hop: int, owner: int, party: int, parties: int) -> bytes:
    """The statement a hop's proof is about: hop h of the set of ``owner``, re-blinded by
    ``party``, among ``parties``."""
    return f"hop {hop} owner {owner} party {party} of {parties}".encode()
