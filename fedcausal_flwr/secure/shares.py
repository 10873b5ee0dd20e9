"""Additive shares in Z_{2^64} and the HE-to-secret-share conversion (HE2SS, Alg. 1 fixed).

Fixed point: data, weights and feature gradients carry ``frac`` fraction bits, products
``2 frac``; shares are uint64 and wrap, the sum of all shares is the signed product.

Forward HE2SS (holder H has ``c = Enc_O(m)``): H draws ``r`` of 104 bits, sends
``c + Enc_O(2^63 + r)`` (re-randomized) to the owner O, keeps ``-(2^63 + r) mod 2^64``;
O decrypts ``v = m + 2^63 + r`` (no wrap mod n, statistically hiding m with 40 bits to spare)
and keeps ``v mod 2^64``. Backward HE2SS keeps a bounded float mask ``phi`` instead (spec 3):
O decrypts ``m - phi``.

Backends: ``paillier`` (real keys) and ``mock`` (the same share arithmetic, no encryption:
"ciphertexts" are the uint64 plaintexts). Both give the same shares bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedcausal_flwr.secure import paillier

TWO63 = np.uint64(1 << 63)


def ring(a: np.ndarray) -> np.ndarray:
    """Signed int64 (or Python ints) as uint64 ring elements."""
    a = np.asarray(a)
    if a.dtype == object:
        return np.array([int(v) % (1 << 64) for v in a.ravel()], dtype=np.uint64).reshape(
            a.shape)
    return a.astype(np.int64).view(np.uint64)


def signed(a: np.ndarray) -> np.ndarray:
    """Ring elements (or Python ints in int64 range) as signed int64."""
    a = np.asarray(a)
    if a.dtype == object:
        return np.array([int(v) for v in a.ravel()], dtype=np.int64).reshape(a.shape)
    return a.astype(np.uint64).view(np.int64)


def forward_masks(rng: np.random.Generator, shape: tuple[int, ...]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(low 64 bits, high 40 bits) of the holder's mask r."""
    return (rng.integers(0, 1 << 64, shape, dtype=np.uint64, endpoint=False),
            rng.integers(0, 1 << 40, shape, dtype=np.uint64))


def holder_share(lo: np.ndarray) -> np.ndarray:
    """``-(2^63 + r) mod 2^64``: what the holder keeps."""
    with np.errstate(over="ignore"):
        return np.uint64(0) - (TWO63 + lo)


class Mock:
    """Share arithmetic without encryption (for long experiments)."""

    name = "mock"

    def keypair(self) -> tuple[Any, Any]:
        """No keys."""
        return None, None

    def public_array(self, pk: Any) -> np.ndarray:  # noqa: ARG002
        """Nothing to publish."""
        return np.zeros(1, dtype=np.uint8)

    def public_from(self, a: np.ndarray) -> Any:  # noqa: ARG002
        """No key."""
        return None

    def encrypt(self, pk: Any, m: np.ndarray, sk: Any = None) -> np.ndarray:  # noqa: ARG002
        """m as ring elements."""
        return ring(m)

    def matmul(self, pk: Any, x: np.ndarray, c: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """``x c`` in the ring."""
        with np.errstate(over="ignore"):
            return ring(x) @ c

    def mask_forward(self, pk: Any, c: np.ndarray, lo: np.ndarray, hi: np.ndarray  # noqa: ARG002
                     ) -> np.ndarray:
        """``c + 2^63 + r`` in the ring."""
        with np.errstate(over="ignore"):
            return c + TWO63 + lo

    def mask_backward(self, pk: Any, c: np.ndarray, phi: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """``c - phi`` in the ring."""
        with np.errstate(over="ignore"):
            return c - ring(phi)

    def owner_forward(self, sk: Any, c: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """The owner's share: the masked value itself."""
        return c

    def owner_backward(self, sk: Any, c: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """``m - phi`` as int64."""
        return signed(c)

    def to_wire(self, pk: Any, c: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """uint64 values."""
        return np.asarray(c, dtype=np.uint64).ravel()

    def from_wire(self, pk: Any, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:  # noqa: ARG002
        """Checked uint64 values."""
        a = np.asarray(a)
        if a.dtype != np.uint64 or a.size != int(np.prod(shape)):
            raise ValueError(f"mock ciphertexts {a.shape} {a.dtype} do not hold {shape}")
        return a.reshape(shape)


class Paillier(Mock):
    """Real Paillier (``n_length`` bits; 2048 unless a test asks for less)."""

    name = "paillier"

    def __init__(self, n_length: int = paillier.DEFAULT_BITS) -> None:
        self.n_length = int(n_length)
        self.ops = {"encrypt": 0, "mul": 0, "decrypt": 0}

    def keypair(self) -> tuple[Any, Any]:
        """A fresh key pair."""
        return paillier.keypair(self.n_length)

    def public_array(self, pk: paillier.PublicKey) -> np.ndarray:
        """n as bytes."""
        return pk.to_array()

    def public_from(self, a: np.ndarray) -> paillier.PublicKey:
        """A published key."""
        return paillier.PublicKey.from_array(a)

    def encrypt(self, pk, m, sk=None):
        """Enc of the signed integers m (the key's owner passes ``sk``: CRT, faster)."""
        self.ops["encrypt"] += np.size(m)
        return paillier.encrypt(pk, np.asarray(m), sk)

    def matmul(self, pk, x, c):
        """Enc(x a) from c = Enc(a)."""
        self.ops["mul"] += int(np.size(x) * np.shape(c)[1])
        return paillier.matmul_plain(pk, x, c)

    def mask_forward(self, pk, c, lo, hi):
        """Enc(m + 2^63 + r), re-randomized."""
        off = [(1 << 63) + (int(h) << 64) + int(low)
               for low, h in zip(lo.ravel().tolist(), hi.ravel().tolist(), strict=True)]
        self.ops["encrypt"] += np.size(c)
        return paillier.add_plain(pk, c, np.array(off, dtype=object).reshape(np.shape(c)))

    def mask_backward(self, pk, c, phi):
        """Enc(m - phi), re-randomized."""
        self.ops["encrypt"] += np.size(c)
        return paillier.add_plain(pk, c, -np.asarray(phi, dtype=object))

    def owner_forward(self, sk, c):
        """``Dec(c) mod 2^64``."""
        self.ops["decrypt"] += np.size(c)
        return ring(paillier.decrypt(sk, c))

    def owner_backward(self, sk, c):
        """``Dec(c)`` as int64."""
        self.ops["decrypt"] += np.size(c)
        return signed(paillier.decrypt(sk, c))

    def to_wire(self, pk, c):
        """Fixed-width bytes per ciphertext."""
        return paillier.to_wire(pk, c)

    def from_wire(self, pk, a, shape):
        """Checked ciphertexts."""
        return paillier.from_wire(pk, a, shape)


def backend(name: str, n_length: int = paillier.DEFAULT_BITS) -> Mock:
    """``paillier`` or ``mock``."""
    if name == "paillier":
        return Paillier(n_length)
    if name == "mock":
        return Mock()
    raise ValueError(f"he-backend {name!r} is not paillier or mock")
