"""Additive shares in Z_{2^64} and the HE-to-secret-share conversion (HE2SS, Alg. 1 fixed).

Fixed point: data, weights and feature gradients carry ``frac`` fraction bits, products
``2 frac``; shares are uint64 and wrap, the sum of all shares is the signed product.

Forward HE2SS (holder H has ``c = Enc_O(m)``): H draws ``r`` of 104 bits, sends
``c + Enc_O(2^63 + r)`` (re-randomized) to the owner O, keeps ``-(2^63 + r) mod 2^64``;
O decrypts ``v = m + 2^63 + r`` (no wrap mod n, statistically hiding m with 40 bits to spare)
and keeps ``v mod 2^64``. Backward HE2SS (Alg. 4) keeps a bounded float mask ``phi`` instead:
O decrypts ``m - phi``.

An owner adds the HE2SS ciphertexts of several holders before decrypting
(:meth:`Mock.owner_forward_sum`): it keeps only their sum mod 2^64 anyway, so one decryption
serves two holders (packed) or all of them (one value per ciphertext).

Backends: ``paillier`` (real keys, one value per ciphertext), ``paillier-packed`` (real keys,
``paillier.slots`` values per ciphertext: every ring value, product and masked value above is
below 2^105 in magnitude, so it and the sum of two of them fit a 107-bit slot without carrying
into its neighbour) and
``mock`` (the same share arithmetic, no encryption: "ciphertexts" are the uint64 plaintexts).
All give the same shares bit for bit. A backend's ciphertext objects are opaque to the
protocol: it passes them on and names the logical (rows, cols) shape where it must.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from fedcausal_flwr.secure import paillier

DEFAULT_BITS = 2048  # Paillier modulus bits (``paillier.DEFAULT_BITS``; no phe import here)

TWO63 = np.uint64(1 << 63)
SUMMED = 2  # HE2SS values (each below 2^105) one 107-bit packed slot holds added


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

    def wire_spec(self, pk: Any, shape: tuple[int, int]) -> tuple[tuple[int, ...], str]:  # noqa: ARG002
        """(shape, dtype) on the wire of ciphertexts of ``shape`` values (for the relay)."""
        return (shape[0] * shape[1],), "uint64"

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

    def owner_forward(self, sk: Any, c: np.ndarray, shape: tuple[int, int]) -> np.ndarray:  # noqa: ARG002
        """The owner's share: the masked value itself."""
        return c

    def owner_forward_sum(self, sk: Any, cs: list[np.ndarray], shape: tuple[int, int]
                          ) -> np.ndarray:
        """``sum_j`` of the owner's shares of the HE2SS ciphertexts ``cs`` (mod 2^64)."""
        total = np.zeros(shape, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for c in cs:
                total = total + self.owner_forward(sk, c, shape)
        return total

    def owner_backward(self, sk: Any, c: np.ndarray, shape: tuple[int, int]) -> np.ndarray:  # noqa: ARG002
        """``m - phi`` as int64."""
        return signed(c)

    def to_wire(self, pk: Any, c: np.ndarray) -> np.ndarray:  # noqa: ARG002
        """uint64 values."""
        return np.asarray(c, dtype=np.uint64).ravel()

    def from_wire(self, pk: Any, a: np.ndarray, shape: tuple[int, int]) -> np.ndarray:  # noqa: ARG002
        """Checked uint64 values."""
        a = np.asarray(a)
        if a.dtype != np.uint64 or a.size != int(np.prod(shape)):
            raise ValueError(f"mock ciphertexts {a.shape} {a.dtype} do not hold {shape}")
        return a.reshape(shape)


class Paillier(Mock):
    """Real Paillier (``n_length`` bits; 2048 unless a test asks for less).

    ``pack``: ``paillier.slots`` values per ciphertext along each row (19 at 2048 bits), so a
    row of ``c`` values costs ``ceil(c / slots)`` encryptions, multiplications per scalar,
    re-randomizations and decryptions. ``noise``: ``djn`` (fixed-base short exponent) or
    ``full`` (fresh ``r^n``), see :mod:`paillier`. ``ops`` counts ciphertext operations:
    encryptions by the key owner, ciphertext-times-plaintext, re-randomizations (HE2SS: an
    encryption of the mask under another party's key) and decryptions.
    """

    def __init__(self, n_length: int = DEFAULT_BITS, pack: bool = False,
                 noise: str = "djn") -> None:
        global paillier
        from fedcausal_flwr.secure import paillier  # phe + gmpy2: the vfedcd extra

        if noise not in paillier.NOISES:
            raise ValueError(f"noise {noise!r} is not one of {paillier.NOISES}")
        self.n_length, self.pack, self.noise = int(n_length), bool(pack), noise
        self.name = "paillier-packed" if pack else "paillier"
        self.ops = {"encrypt": 0, "mul": 0, "rerandomize": 0, "decrypt": 0}

    def keypair(self) -> tuple[Any, Any]:
        """A fresh key pair."""
        return paillier.keypair(self.n_length)

    def public_array(self, pk: paillier.PublicKey) -> np.ndarray:
        """n as bytes."""
        return pk.to_array()

    def public_from(self, a: np.ndarray) -> paillier.PublicKey:
        """A published key."""
        return paillier.PublicKey.from_array(a)

    def _cols(self, pk: paillier.PublicKey, cols: int) -> int:
        """Ciphertexts per row of ``cols`` values."""
        return paillier.blocks(pk, cols) if self.pack else cols

    def _plain(self, pk: paillier.PublicKey, m: np.ndarray) -> np.ndarray:
        """Signed values (rows x cols) as plaintexts (packed if ``pack``)."""
        m = np.asarray(m, dtype=object)
        return paillier.pack(pk, m) if self.pack else m

    def wire_spec(self, pk, shape):
        """``(rows x ciphertexts per row, width)`` uint8."""
        return (shape[0] * self._cols(pk, shape[1]), pk.width), "uint8"

    def encrypt(self, pk, m, sk=None):
        """Enc of the signed integers m (rows x cols)."""
        p = self._plain(pk, np.asarray(m).astype(object))
        self.ops["encrypt"] += p.size
        return paillier.encrypt(pk, p, sk, self.noise)

    def matmul(self, pk, x, c):
        """Enc(x a) from c = Enc(a)."""
        self.ops["mul"] += int(np.size(x) * np.shape(c)[1])
        return paillier.matmul_plain(pk, x, c)

    def mask_forward(self, pk, c, lo, hi):
        """Enc(m + 2^63 + r), re-randomized."""
        off = [(1 << 63) + (int(h) << 64) + int(low)
               for low, h in zip(lo.ravel().tolist(), hi.ravel().tolist(), strict=True)]
        self.ops["rerandomize"] += np.size(c)
        return paillier.add_plain(pk, c, self._plain(pk, np.array(off, dtype=object).reshape(
            lo.shape)), self.noise)

    def mask_backward(self, pk, c, phi):
        """Enc(m - phi), re-randomized."""
        self.ops["rerandomize"] += np.size(c)
        return paillier.add_plain(pk, c, self._plain(pk, -np.asarray(phi).astype(object)),
                                  self.noise)

    def _decrypt(self, sk, c, shape):
        self.ops["decrypt"] += np.size(c)
        v = paillier.decrypt(sk, c)
        return paillier.unpack(sk.public, v, shape[1]) if self.pack else v

    def owner_forward(self, sk, c, shape):
        """``Dec(c) mod 2^64``."""
        return ring(self._decrypt(sk, c, shape))

    def owner_forward_sum(self, sk, cs, shape):
        """Ciphertexts added (:func:`paillier.add_cipher`) before one decryption: two at a
        time when packed (:data:`SUMMED` values fit a slot), all at once otherwise."""
        group = SUMMED if self.pack else max(1, len(cs))
        total = np.zeros(shape, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(0, len(cs), group):
                c = cs[i] if len(cs[i:i + group]) == 1 else \
                    paillier.add_cipher(sk.public, cs[i:i + group])
                total = total + self.owner_forward(sk, c, shape)
        return total

    def owner_backward(self, sk, c, shape):
        """``Dec(c)`` as int64."""
        return signed(self._decrypt(sk, c, shape))

    def to_wire(self, pk, c):
        """Fixed-width bytes per ciphertext."""
        return paillier.to_wire(pk, c)

    def from_wire(self, pk, a, shape):
        """Checked ciphertexts (rows x ciphertexts per row)."""
        return paillier.from_wire(pk, a, (shape[0], self._cols(pk, shape[1])))


@dataclass(frozen=True)
class Backend:
    """One HE backend, described once for settings, consent, client and relay.

    ``encrypts``: its ciphertexts hide the values (False: the relay reads the fixed-point
    plaintexts, ``exposure`` says what); ``pack``: Paillier with several values per ciphertext.
    """

    name: str
    encrypts: bool
    pack: bool = False
    exposure: str = ""

    def make(self, n_length: int = DEFAULT_BITS) -> Mock:
        """The backend's object (Paillier needs phe + gmpy2, the vfedcd extra)."""
        return Paillier(n_length, pack=self.pack) if self.encrypts else Mock()


TABLE: dict[str, Backend] = {b.name: b for b in (
    Backend("paillier", encrypts=True),
    Backend("paillier-packed", encrypts=True, pack=True),
    Backend("mock", encrypts=False,
            exposure="encrypts nothing: the relay (the ServerApp) reads the parties' "
                     "fixed-point plaintext fragments and feature gradients"),
)}
BACKENDS: tuple[str, ...] = tuple(TABLE)
SECURE_BACKENDS: tuple[str, ...] = tuple(n for n, b in TABLE.items() if b.encrypts)


def described(name: str) -> Backend:
    """The table's entry for ``name``; a ValueError naming the known ones."""
    if name not in TABLE:
        raise ValueError(f"he-backend {name!r} is not one of {', '.join(BACKENDS)}")
    return TABLE[name]


def backend(name: str, n_length: int = DEFAULT_BITS) -> Mock:
    """The backend ``name`` of :data:`TABLE` (``mock`` is the only one that needs no
    phe/gmpy2)."""
    return described(name).make(n_length)
