"""Paillier on integer arrays: keys from ``phe``, arithmetic in ``gmpy2`` on raw ciphertexts.

``Enc(m) = (1 + m n) r^n mod n^2`` (g = n + 1). Homomorphic: ``Enc(a) Enc(b) = Enc(a + b)``,
``Enc(a)^x = Enc(x a)``. Plaintexts are signed integers (fixed point, see ``shares``) read
centered: ``v > n/2`` means ``v - n``. Ciphertexts travel as fixed-width big-endian bytes,
one row of a uint8 array per ciphertext. The default key has 2048 bits; anything smaller must
be asked for explicitly (``n_length``) and is for tests only.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from functools import lru_cache

import gmpy2
import numpy as np
from phe import paillier

DEFAULT_BITS = 2048


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


def _noise(pk: PublicKey, count: int, sk: PrivateKey | None = None) -> list[gmpy2.mpz]:
    """``r^n mod n^2`` for ``count`` fresh r (the cost of an encryption).

    The key's owner (``sk`` given) works mod p^2 and q^2 and recombines (CRT, ~3x faster).
    """
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


def encrypt(pk: PublicKey, m: np.ndarray, sk: PrivateKey | None = None) -> np.ndarray:
    """Ciphertexts (object array of mpz) of the signed integers ``m`` (CRT if ``sk``)."""
    m = np.asarray(m)
    n, nsq = gmpy2.mpz(pk.n), pk.nsq
    noise = _noise(pk, m.size, sk)
    out = [(1 + (gmpy2.mpz(int(v)) % n) * n) * r % nsq
           for v, r in zip(m.ravel().tolist(), noise, strict=True)]
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
    half = sk.public.n // 2
    p, q = gmpy2.mpz(sk.p), gmpy2.mpz(sk.q)
    psq, qsq = p * p, q * q
    hp, hq, p_inv = _crt_constants(sk.p, sk.q)
    out = []
    for ci in np.asarray(c, dtype=object).ravel():
        mp = (gmpy2.powmod(ci % psq, p - 1, psq) - 1) // p * hp % p
        mq = (gmpy2.powmod(ci % qsq, q - 1, qsq) - 1) // q * hq % q
        v = int(mp + (mq - mp) * p_inv % q * p)
        out.append(v - sk.public.n if v > half else v)
    return np.array(out, dtype=object).reshape(np.shape(c))


def add_plain(pk: PublicKey, c: np.ndarray, m: np.ndarray, rerandomize: bool = True
              ) -> np.ndarray:
    """``Enc(a + m)`` from ``c = Enc(a)``, re-randomized so ``c`` cannot be recognised."""
    n, nsq = gmpy2.mpz(pk.n), pk.nsq
    c = np.asarray(c, dtype=object)
    noise = _noise(pk, c.size) if rerandomize else [1] * c.size
    out = [ci * (1 + (gmpy2.mpz(int(v)) % n) * n) % nsq * r % nsq
           for ci, v, r in zip(c.ravel(), np.asarray(m).ravel().tolist(), noise, strict=True)]
    return np.array(out, dtype=object).reshape(c.shape)


def _power_table(pk: PublicKey, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``c`` and ``c^-1`` (for negative exponents)."""
    nsq = pk.nsq
    inv = np.array([gmpy2.invert(ci, nsq) for ci in c.ravel()], dtype=object)
    return c, inv.reshape(c.shape)


def matmul_plain(pk: PublicKey, x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``Enc(x a)`` for integer ``x`` (n x m) and ``c = Enc(a)`` (m x p): n x p ciphertexts."""
    nsq = pk.nsq
    c = np.asarray(c, dtype=object)
    pos, neg = _power_table(pk, c)
    x = np.asarray(x, dtype=np.int64)
    out = np.empty((x.shape[0], c.shape[1]), dtype=object)
    for s in range(x.shape[0]):
        row = x[s].tolist()
        for j in range(c.shape[1]):
            acc = gmpy2.mpz(1)
            for a, xa in enumerate(row):
                if xa > 0:
                    acc = acc * gmpy2.powmod(pos[a, j], xa, nsq) % nsq
                elif xa < 0:
                    acc = acc * gmpy2.powmod(neg[a, j], -xa, nsq) % nsq
            out[s, j] = acc
    return out


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
