"""Paillier on integer arrays: keys from ``phe``, arithmetic in ``gmpy2`` on raw ciphertexts.

``Enc(m) = (1 + m n) s mod n^2`` (g = n + 1) with ``s`` a random n-th residue (the noise).
Homomorphic: ``Enc(a) Enc(b) = Enc(a + b)``, ``Enc(a)^x = Enc(x a)``. Plaintexts are signed
integers (fixed point, see ``shares``) read centered: ``v > n/2`` means ``v - n``. Ciphertexts
travel as fixed-width big-endian bytes, one row of a uint8 array per ciphertext. The default
key has 2048 bits; anything smaller must be asked for explicitly (``n_length``), for tests.

Speed-ups, each measured by ``simulations/bench/vfedcd_paillier_benchmark.py``:

- gmpy2 ``powmod`` for every exponentiation; decryption mod p^2 and q^2 recombined by CRT
  (Paillier, EUROCRYPT 1999, Sec. 7).
- DJN noise (``noise="djn"``, the default): short-exponent noise over a fixed base, after
  Damgard, Jurik, Nielsen, "A generalization of Paillier's public-key system with applications
  to electronic voting", Int. J. Inf. Secur. 9 (2010), Sec. 4.2 (also the Paillier of ABY,
  Demmler et al., NDSS 2015). The noise is ``hs^a`` for a uniform exponent ``a`` of
  ``ceil(k/2)`` bits (k = bits of n) instead of ``r^n`` for r uniform in Z_n^*. ``hs`` is a
  fixed base, so ``hs^a`` is a product of ``k/16`` entries of a table precomputed once per key
  (one row per byte of ``a``) instead of a k-bit exponentiation. Unlike DJN, where the key
  owner publishes ``hs = (-x^2)^n``, each encryptor draws its own secret base ``hs = r0^n``
  (r0 uniform in Z_n^*, fresh per process and key), so the public key stays ``n``. Security
  assumption (DJN's): semantic security under the decisional composite residuosity assumption
  plus the assumption that ``hs^a`` with a ``k/2``-bit ``a`` cannot be told from a uniform
  n-th residue. The relay and other outsiders face exactly that. The key owner knows p and
  q: against it a holder's re-randomized product (HE2SS) hides the holder's multiplier only
  computationally, behind discrete logarithms modulo the k/2-bit primes p and q (about the
  work of factoring a k/2-bit modulus, below the k-bit key's own level), where fresh ``r^n``
  hides it perfectly; ``noise="full"`` keeps that at about 15x the encryption cost.
- Packing (:func:`pack`): ``slots`` signed values per plaintext, 107 bits each (room for the
  sum of two masked values, :func:`add_cipher`, so an owner decrypts two holders' shares at
  once).
- Fixed-base tables in :func:`matmul_plain` where one ciphertext is raised to many rows'
  plaintexts (the forward HE2SS), the product unchanged.
- Processes (:func:`set_workers`, default 1): decryption and noise spread over worker processes.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fedcausal_flwr.extras import missing_extra

try:
    import gmpy2
    from phe import paillier
except ModuleNotFoundError as e:
    raise missing_extra(e, "VFedCD", "vfedcd", "phe", "gmpy2") from e

DEFAULT_BITS = 2048
NOISES = ("djn", "full")
SLOT_BITS = 107  # |slot value| < 2^106: the sum of two HE2SS values (each below 2^105: a
# 64-bit ring value + 2^63 + a 104-bit mask), + sign; 19 slots at 2048 bits as with 106
_POOL: list = [None, 1]  # the process pool and its size


def set_workers(k: int) -> None:
    """Decrypt and draw noise in ``k`` processes (1: in this one, the default)."""
    if _POOL[0] is not None:
        _POOL[0].shutdown()
    _POOL[:] = [ProcessPoolExecutor(k) if k > 1 else None, max(1, int(k))]


def _chunks(items: list, k: int) -> list[list]:
    """``items`` cut into ``k`` nearly equal consecutive parts."""
    step = -(-len(items) // k)
    return [items[i:i + step] for i in range(0, len(items), step)]


@dataclass(frozen=True)
class PublicKey:
    """``n`` and the cached ``n^2``."""

    n: int

    @property
    def nsq(self) -> gmpy2.mpz:
        """n^2."""
        return gmpy2.mpz(self.n) ** 2

    @property
    def width(self) -> int:
        """Bytes of one ciphertext on the wire."""
        return (2 * self.n.bit_length() + 7) // 8

    def to_array(self) -> np.ndarray:
        """n as a uint8 array (what a party publishes)."""
        return np.frombuffer(int(self.n).to_bytes((self.n.bit_length() + 7) // 8, "big"),
                             dtype=np.uint8).copy()

    @classmethod
    def from_array(cls, a: np.ndarray) -> PublicKey:
        """The key published by :meth:`to_array`."""
        return cls(int.from_bytes(np.asarray(a, dtype=np.uint8).tobytes(), "big"))


@dataclass(frozen=True)
class PrivateKey:
    """The primes p, q; decryption runs mod p^2 and q^2 and recombines (CRT, ~3x faster)."""

    public: PublicKey
    p: int
    q: int


def keypair(n_length: int = DEFAULT_BITS) -> tuple[PublicKey, PrivateKey]:
    """A fresh Paillier key pair (phe's prime generation)."""
    if n_length < 128:
        raise ValueError(f"Paillier key of {n_length} bits is too small (>= 128 for tests)")
    pk, sk = paillier.generate_paillier_keypair(n_length=n_length)
    return PublicKey(int(pk.n)), PrivateKey(PublicKey(int(pk.n)), int(sk.p), int(sk.q))


def noise_bits(pk: PublicKey) -> int:
    """Bits of the DJN exponent: ``ceil(k/2)``, k the bits of n."""
    return (pk.n.bit_length() + 1) // 2


@lru_cache(maxsize=8)
def _fixed_base(n: int, nbytes: int) -> list[list[gmpy2.mpz]]:
    """``T[i][d] = hs^(d 256^i) mod n^2`` (i < nbytes, d < 256) for this process's secret base
    ``hs = r0^n`` under key ``n`` (built once per key and process)."""
    nsq = gmpy2.mpz(n) ** 2
    base = gmpy2.powmod(gmpy2.mpz(secrets.randbelow(n - 2) + 2), n, nsq)
    rows = []
    for _ in range(nbytes):
        row = [gmpy2.mpz(1)]
        for _ in range(255):
            row.append(row[-1] * base % nsq)
        rows.append(row)
        base = row[-1] * base % nsq
    return rows


def _djn_noise(pk: PublicKey, count: int) -> list[gmpy2.mpz]:
    """``hs^a mod n^2`` for ``count`` uniform ``a`` of ``noise_bits`` bits (table products)."""
    pool, k = _POOL
    if pool is not None and count >= 2 * k:
        parts = pool.map(_djn_noise_here, [pk] * k, [count // k + (i < count % k)
                                                     for i in range(k)])
        return [v for part in parts for v in part]
    return _djn_noise_here(pk, count)


def _djn_noise_here(pk: PublicKey, count: int) -> list[gmpy2.mpz]:
    """:func:`_djn_noise` in this process."""
    T = _fixed_base(pk.n, (noise_bits(pk) + 7) // 8)
    nsq, out = pk.nsq, []
    for _ in range(count):
        a = secrets.token_bytes(len(T))
        acc = T[0][a[0]]
        for row, digit in zip(T[1:], a[1:], strict=True):
            acc = acc * row[digit] % nsq
        out.append(acc)
    return out


def _full_noise(pk: PublicKey, count: int, sk: PrivateKey | None = None) -> list[gmpy2.mpz]:
    """``r^n mod n^2`` for ``count`` fresh uniform r (the key's owner, ``sk``, uses CRT)."""
    n, nsq = gmpy2.mpz(pk.n), pk.nsq
    rs = [gmpy2.mpz(secrets.randbelow(pk.n - 1) + 1) for _ in range(count)]
    if sk is None:
        return [gmpy2.powmod(r, n, nsq) for r in rs]
    psq, qsq = gmpy2.mpz(sk.p) ** 2, gmpy2.mpz(sk.q) ** 2
    en_p, en_q = n % (psq - psq // gmpy2.mpz(sk.p)), n % (qsq - qsq // gmpy2.mpz(sk.q))
    p_inv = gmpy2.invert(psq, qsq)
    out = []
    for r in rs:
        a, b = gmpy2.powmod(r, en_p, psq), gmpy2.powmod(r, en_q, qsq)
        out.append(a + (b - a) * p_inv % qsq * psq)
    return out


def noise(pk: PublicKey, count: int, kind: str = "djn", sk: PrivateKey | None = None
          ) -> list[gmpy2.mpz]:
    """``count`` random n-th residues: DJN table products or fresh ``r^n``."""
    if kind == "djn":
        return _djn_noise(pk, count)
    if kind == "full":
        return _full_noise(pk, count, sk)
    raise ValueError(f"noise {kind!r} is not one of {NOISES}")


def encrypt(pk: PublicKey, m: np.ndarray, sk: PrivateKey | None = None, kind: str = "djn"
            ) -> np.ndarray:
    """Ciphertexts (object array of mpz) of the signed integers ``m``."""
    m = np.asarray(m)
    n, nsq = gmpy2.mpz(pk.n), pk.nsq
    out = [(1 + (gmpy2.mpz(int(v)) % n) * n) * r % nsq
           for v, r in zip(m.ravel().tolist(), noise(pk, m.size, kind, sk), strict=True)]
    return np.array(out, dtype=object).reshape(m.shape)


@lru_cache(maxsize=16)
def _crt_constants(p: int, q: int) -> tuple[gmpy2.mpz, gmpy2.mpz, gmpy2.mpz]:
    """``h_p``, ``h_q`` and ``p^-1 mod q`` of CRT decryption (once per key)."""
    p, q = gmpy2.mpz(p), gmpy2.mpz(q)
    n = p * q
    hp = gmpy2.invert((gmpy2.powmod(n + 1, p - 1, p * p) - 1) // p, p)
    hq = gmpy2.invert((gmpy2.powmod(n + 1, q - 1, q * q) - 1) // q, q)
    return hp, hq, gmpy2.invert(p, q)


def decrypt(sk: PrivateKey, c: np.ndarray) -> np.ndarray:
    """Centered plaintexts (object array of Python ints) of ciphertexts ``c``."""
    flat = np.asarray(c, dtype=object).ravel().tolist()
    pool, k = _POOL
    if pool is not None and len(flat) >= 2 * k:
        parts = pool.map(_decrypt_list, [sk] * k, _chunks(flat, k))
        out = [v for part in parts for v in part]
    else:
        out = _decrypt_list(sk, flat)
    return np.array(out, dtype=object).reshape(np.shape(c))


def _decrypt_list(sk: PrivateKey, flat: list) -> list[int]:
    """CRT decryption of a list of ciphertexts (gmpy2's batch powmod)."""
    n, half = sk.public.n, sk.public.n // 2
    p, q = gmpy2.mpz(sk.p), gmpy2.mpz(sk.q)
    psq, qsq = p * p, q * q
    hp, hq, p_inv = _crt_constants(sk.p, sk.q)
    xp = gmpy2.powmod_base_list([ci % psq for ci in flat], p - 1, psq)
    xq = gmpy2.powmod_base_list([ci % qsq for ci in flat], q - 1, qsq)
    out = []
    for a, b in zip(xp, xq, strict=True):
        mp = (a - 1) // p * hp % p
        v = int(mp + ((b - 1) // q * hq - mp) * p_inv % q * p)
        out.append(v - n if v > half else v)
    return out


def add_plain(pk: PublicKey, c: np.ndarray, m: np.ndarray, kind: str = "djn") -> np.ndarray:
    """``Enc(a + m)`` from ``c = Enc(a)``, re-randomized (fresh noise) so ``c`` is hidden."""
    n, nsq = gmpy2.mpz(pk.n), pk.nsq
    c = np.asarray(c, dtype=object)
    out = [ci * (1 + (gmpy2.mpz(int(v)) % n) * n) % nsq * r % nsq
           for ci, v, r in zip(c.ravel(), np.asarray(m).ravel().tolist(),
                               noise(pk, c.size, kind), strict=True)]
    return np.array(out, dtype=object).reshape(c.shape)


def add_cipher(pk: PublicKey, cs: list[np.ndarray]) -> np.ndarray:
    """``Enc(a_1 + ... + a_m)`` from ciphertext arrays ``Enc(a_j)`` of one shape (products mod
    n^2; no new noise: the owner decrypts the sum)."""
    nsq = pk.nsq
    flat = [np.asarray(c, dtype=object).ravel().tolist() for c in cs]
    out = []
    for vals in zip(*flat, strict=True):
        acc = vals[0]
        for v in vals[1:]:
            acc = acc * v % nsq
        out.append(acc)
    return np.array(out, dtype=object).reshape(np.shape(cs[0]))


def matmul_plain(pk: PublicKey, x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``Enc(x a)`` for integer ``x`` (n x m) and ``c = Enc(a)`` (m x p): n x p ciphertexts.

    Each entry is ``prod_a c[a, j]^x[s, a] mod n^2`` (``c^-1`` for negative ``x``). Where a
    base serves many rows (the forward HE2SS: every row of the batch), its powers come from a
    fixed-base table (:func:`_window_table`, ``WINDOW``-bit digits of ``|x|``) instead of one
    exponentiation per row: the same product, fewer multiplications (4x faster at a batch of
    200, ``simulations/bench/vfedcd_fast_crypto.py``).
    """
    nsq = pk.nsq
    c = np.asarray(c, dtype=object)
    x = np.asarray(x, dtype=np.int64)
    bits = int(np.abs(x).max()).bit_length() if x.size else 0
    windows = -(-bits // WINDOW)
    if x.shape[0] * bits <= 2 * windows * (1 << WINDOW):  # few rows per base: exponentiate
        return _matmul_powmod(nsq, x, c)
    ax, neg = np.abs(x), (x < 0)
    digits = [((ax >> (WINDOW * i)) & ((1 << WINDOW) - 1)).tolist() for i in range(windows)]
    signs = neg.tolist()
    out = np.empty((x.shape[0], c.shape[1]), dtype=object)
    for j in range(c.shape[1]):
        tables = {}
        for a in range(c.shape[0]):
            for sign in (False, True):
                if (neg[:, a] == sign).any():
                    base = gmpy2.invert(c[a, j], nsq) if sign else gmpy2.mpz(c[a, j])
                    tables[a, sign] = _window_table(base, nsq, windows)
        for s in range(x.shape[0]):
            acc = gmpy2.mpz(1)
            for a in range(c.shape[0]):
                T = tables[a, signs[s][a]]
                for i in range(windows):
                    dgt = digits[i][s][a]
                    if dgt:
                        acc = acc * T[i][dgt] % nsq
            out[s, j] = acc
    return out


WINDOW = 4
"""Bits per digit of the fixed-base tables of :func:`matmul_plain`."""


def _window_table(base: gmpy2.mpz, nsq: gmpy2.mpz, windows: int) -> list[list[gmpy2.mpz]]:
    """``T[i][d] = base^(d 2^(WINDOW i)) mod n^2`` (i < windows, d < 2^WINDOW)."""
    rows = []
    for _ in range(windows):
        row = [gmpy2.mpz(1), base]
        for _ in range(2, 1 << WINDOW):
            row.append(row[-1] * base % nsq)
        rows.append(row)
        base = row[-1] * base % nsq
    return rows


def _matmul_powmod(nsq: gmpy2.mpz, x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """:func:`matmul_plain` by one exponentiation per entry and base."""
    inv = np.array([gmpy2.invert(ci, nsq) for ci in c.ravel()], dtype=object).reshape(c.shape)
    out = np.empty((x.shape[0], c.shape[1]), dtype=object)
    for s in range(x.shape[0]):
        row = x[s].tolist()
        for j in range(c.shape[1]):
            acc = gmpy2.mpz(1)
            for a, xa in enumerate(row):
                if xa > 0:
                    acc = acc * gmpy2.powmod(c[a, j], xa, nsq) % nsq
                elif xa < 0:
                    acc = acc * gmpy2.powmod(inv[a, j], -xa, nsq) % nsq
            out[s, j] = acc
    return out


# ---- packing -----------------------------------------------------------------------------
def slots(pk: PublicKey) -> int:
    """Values per packed plaintext: ``S 107 <= k - 2`` so ``|sum_j v_j 2^(107 j)| < n/2``."""
    return max(1, (pk.n.bit_length() - 2) // SLOT_BITS)


def blocks(pk: PublicKey, cols: int) -> int:
    """Packed plaintexts per row of ``cols`` values."""
    return -(-cols // slots(pk))


def pack(pk: PublicKey, m: np.ndarray) -> np.ndarray:
    """Rows of signed ints (r x c) as r x ``blocks`` integers ``sum_j v_j 2^(107 j)``.

    Headroom: every slot must stay in ``|v| < 2^106`` through the homomorphic operations (the
    caller's bound: ring values and products below 2^63 plus masks below 2^104, see
    ``shares``, and at most two such values added by :func:`add_cipher`). Then slots never
    carry into each other (negative slots borrow, and :func:`unpack` undoes the borrow by
    reading each slot centered) and the packed value stays below ``2^(107 S) <= 2^(k-2) <
    n/2``, so a centered decryption is exact.
    """
    m = np.asarray(m, dtype=object)
    S, B = slots(pk), blocks(pk, m.shape[1])
    out = np.empty((m.shape[0], B), dtype=object)
    for r in range(m.shape[0]):
        row = m[r].tolist()
        for b in range(B):
            v = 0
            for x in reversed(row[b * S:(b + 1) * S]):
                v = (v << SLOT_BITS) + int(x)
            out[r, b] = v
    return out


def unpack(pk: PublicKey, v: np.ndarray, cols: int) -> np.ndarray:
    """Inverse of :func:`pack` on centered plaintexts: r x ``cols`` signed ints."""
    S, mask, half = slots(pk), (1 << SLOT_BITS) - 1, 1 << (SLOT_BITS - 1)
    v = np.asarray(v, dtype=object)
    out = np.empty((v.shape[0], cols), dtype=object)
    for r in range(v.shape[0]):
        vals = []
        for P in v[r].tolist():
            P = int(P)
            for _ in range(S):
                s = P & mask
                s = s - (1 << SLOT_BITS) if s >= half else s
                vals.append(s)
                P = (P - s) >> SLOT_BITS
        out[r] = vals[:cols]
    return out


# ---- wire --------------------------------------------------------------------------------
def to_wire(pk: PublicKey, c: np.ndarray) -> np.ndarray:
    """Ciphertexts as a uint8 array (count x width), row-major order of ``c``."""
    w = pk.width
    buf = b"".join(int(ci).to_bytes(w, "big") for ci in np.asarray(c, dtype=object).ravel())
    return np.frombuffer(buf, dtype=np.uint8).reshape(-1, w).copy()


def from_wire(pk: PublicKey, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Ciphertexts of shape ``shape`` from :func:`to_wire`'s array (checked against n^2)."""
    a = np.asarray(a, dtype=np.uint8)
    if a.ndim != 2 or a.shape[1] != pk.width or a.shape[0] != int(np.prod(shape)):
        raise ValueError(f"ciphertext array {a.shape} does not hold {shape} ciphertexts of "
                         f"{pk.width} bytes")
    nsq = pk.nsq
    out = [gmpy2.mpz(int.from_bytes(row.tobytes(), "big")) for row in a]
    if any(c <= 0 or c >= nsq for c in out):
        raise ValueError("ciphertext out of range for this public key")
    return np.array(out, dtype=object).reshape(shape)
