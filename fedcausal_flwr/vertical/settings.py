"""VFedCD's settings (:class:`VFedCDSettings`, composed of small frozen pieces by concern) and
a party's consent (:class:`PartyConsent`): every default once, with its run-config (or
node-config) key, the HE backends, the paper's and the former presets. The equations that
read them are in :mod:`fedcausal_flwr.vertical.model`, which re-exports these names.

Pure dataclasses: no arrays, no I/O, no Flower.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from fedcausal_flwr.knowledge import KnowledgeSettings
from fedcausal_flwr.secure.shares import BACKENDS, SECURE_BACKENDS, described
from fedcausal_flwr.settings import (
    MAX_KEY_BITS,
    MAX_ROUNDS,
    MAX_ROWS,
    RunSettings,
    Settings,
    setting,
)

MODES = ("framework", "ctv", "vfedcd")
OPTIMIZERS = ("sgd", "sgdm", "adam")
MOMENTUM = 0.9
ADAM_BETAS = (0.9, 0.999)
MAX_REPLICAS = 64
"""Most replicas a run may carry (each multiplies the parties' computation and bytes)."""


@dataclass(frozen=True)
class VerticalPiece(Settings):
    """A piece of VFedCD's settings: its keys sit in the run config's ``vertical`` table."""

    section: ClassVar[str] = "vertical"


@dataclass(frozen=True)
class Training(VerticalPiece):
    """The schedule and the step: ``epochs`` (the CTV's), ``batch``, ``lr``; ``optimizer``:
    how every party steps its fragments and decoder: "sgd" (the paper), "sgdm" (heavy-ball
    momentum :data:`MOMENTUM`) or "adam" (betas :data:`ADAM_BETAS`, ``adam_eps``); each holder
    keeps the memory of its own fragments, so under the secure dispatch Adam steps each
    fragment on its share of the gradient (SGD and momentum are linear: the encoders step as
    if on the whole gradient)."""

    epochs: int = setting(30, "num-epochs", ge=1, le=MAX_ROUNDS)
    batch: int = setting(200, "batch", ge=1, le=MAX_ROWS, wire=True)
    lr: float = setting(0.1, "lr", gt=0, wire=True)
    optimizer: str = setting("adam", "optimizer", choices=OPTIMIZERS, wire=True)
    adam_eps: float = setting(0.003, "adam-eps", gt=0, wire=True)


@dataclass(frozen=True)
class GraphPenalty(VerticalPiece):
    """``lambda1``: L1 on every fragment; ``gamma``: growth of lambda2 per epoch until
    ``B > dag_tol`` is a DAG; ``lambda_b``: L1 on B at the CTV; ``tau``: threshold of the
    reported DAG."""

    lambda1: float = setting(1e-3, "lambda1", ge=0, wire=True)
    gamma: float = setting(0.01, "gamma", ge=0)
    lambda_b: float = setting(0.0, "lambda-b", ge=0)
    tau: float = setting(0.7, "tau", ge=0)
    dag_tol: float = setting(0.01, "dag-tol", ge=0)


@dataclass(frozen=True)
class Network(VerticalPiece):
    """``hidden`` units of the encoders, ``dec_layers`` of the decoders; ``power_iters``:
    power iterations of the spectral radius of B."""

    hidden: int = setting(10, "hidden", ge=1, le=4096, wire=True)
    dec_layers: int = setting(2, "decoder-layers", ge=1, le=64, wire=True)
    power_iters: int = setting(15, "power-iters", ge=1, le=10_000)


@dataclass(frozen=True)
class Masking(VerticalPiece):
    """``sigma_phi``: scale of the backward mask phi; ``split``: the CTV's gradient shares
    ("dirichlet" weights or "exact" copies); ``frac``: fixed-point fraction bits; ``dp_b``:
    Laplace scale of each party's noise on its graph fragments (the paper's DP variant, 0:
    off)."""

    sigma_phi: float = setting(1e-3, "sigma-phi", gt=0, wire=True)
    split: str = setting("dirichlet", "split", choices=("dirichlet", "exact"))
    frac: int = setting(16, "frac-bits", ge=1, le=64, wire=True)
    dp_b: float = setting(0.0, "dp-b", ge=0, wire=True)


@dataclass(frozen=True)
class Objective(VerticalPiece):
    """``l2``: L2 on every weight; ``unfreeze``: lambda2 grows again once ``B > tau`` turns
    cyclic; ``loss``: "nll" (Gaussian NLL with a learned variance per attribute, as SDCD) or
    "mse"."""

    l2: float = setting(0.0, "l2", ge=0, wire=True)
    unfreeze: bool = setting(False, "unfreeze")
    loss: str = setting("nll", "loss", choices=("mse", "nll"), wire=True)


@dataclass(frozen=True)
class Dispatch(VerticalPiece):
    """``mode``: "vfedcd" (secure dispatch, Algs. 2-6), "ctv" (plain framework plus the CTV
    penalty) or "framework" (plain framework, no penalty), the ablations of Table 3.
    ``he_backend``/``key_bits``: the parties' homomorphic encryption ("paillier",
    "paillier-packed" or "mock": same shares, no encryption, the relay reads them). Keys below
    :data:`MIN_KEY_BITS` are refused unless ``insecure_test_keys`` (run config
    ``vertical.insecure-test-keys``, for tests only) allows them (down to 256 bits)."""

    mode: str = setting("vfedcd", "mode", choices=MODES, wire=True)
    he_backend: str = setting("paillier-packed", "he-backend", choices=BACKENDS, wire=True)
    key_bits: int = setting(2048, "key-bits", ge=256, le=MAX_KEY_BITS, wire=True)
    insecure_test_keys: bool = setting(False, "insecure-test-keys", wire=True)

    @property
    def secure(self) -> bool:
        """Encoders split into K fragments (the secure dispatch protocol)."""
        return self.mode == "vfedcd"

    @property
    def ctv(self) -> bool:
        """The CTV acyclicity penalty is on."""
        return self.mode != "framework"


@dataclass(frozen=True)
class Seeds(VerticalPiece):
    """``seed``: every seeded draw (initialisation, batches, masks, splits)."""

    seed: int = setting(0, "seed", ge=0, wire=True)


@dataclass(frozen=True)
class ReplicaPlan(VerticalPiece):
    """``replicas`` (R, even; 0: the ordinary run alone): replicas of the protocol that ride
    in the same messages, replica 0 the ordinary run on all rows, replicas 2i-1 and 2i the two
    halves of the i-th random split of the aligned rows (complementary pairs, drawn by every
    party from ``seed``), each with its own seed (:func:`replica_settings`); the result adds
    each edge's selection frequency over replicas 1..R and the stable set at
    ``stability_threshold`` (pi, in (1/2, 1]) with its bound on the expected false edges
    (:func:`edge_confidence`). Only mode "vfedcd" carries replicas."""

    replicas: int = setting(
        0, "replicas", ge=0, le=MAX_REPLICAS, wire=True,
        doc="R (even; 0: off): replicas on complementary halves of the rows that ride in the "
            "run's messages (same exchanges, R more copies of the arrays and computation); "
            "the result adds B_frequency, B_stable and metrics stability; mode "
            "'vfedcd' only")
    stability_threshold: float = setting(
        0.75, "stability-threshold", gt=0.5, le=1.0,
        doc="pi: the stable set B_stable keeps the edges selected by at least this share of "
            "the replicas (set before any run: Meinshausen & Buhlmann advise 0.6-0.9)")


@dataclass(frozen=True)
class Sites(VerticalPiece):
    """``max_missing``: the largest share of missing cells a party may hold (:func:`inputs`,
    :func:`~fedcausal_flwr.vertical.decoder.residual_loss`)."""

    max_missing: float = setting(
        0.5, "max-missing", ge=0, le=1,
        doc="largest share of a party's cells (over its shared rows) that may be missing; a "
            "party above it stops the run before any round (its columns are the graph's)")


@dataclass(frozen=True)
class VFedCDSettings(Sites, ReplicaPlan, Seeds, Dispatch, Objective, Masking, Network,
                     GraphPenalty, Training, KnowledgeSettings, RunSettings):
    """Every setting of VFedCD, with the App's defaults (the one source of them): the run and
    knowledge pieces, then :class:`Training`, :class:`GraphPenalty`, :class:`Network`,
    :class:`Masking`, :class:`Objective`, :class:`Dispatch`, :class:`Seeds`,
    :class:`ReplicaPlan` and :class:`Sites` (bases listed last piece first: a dataclass
    orders its fields by the reversed MRO); each piece documents its fields.

    The defaults are a few-step schedule (Adam, ``lr`` 0.1, ``batch`` 200, 30 epochs: 120
    steps, 600 relayed exchanges); how they were chosen: ``docs/algorithms/vfedcd.md``.
    :meth:`paper` gives the paper's values instead (SGD, ``lr`` 0.01, ``batch`` 16, Sec. 6.1)
    and :meth:`slow` the previous defaults (the paper's SGD schedule over 700 epochs).
    The server sends the parties' fields (the ``wire`` ones; the rest is the CTV's: epochs,
    gamma, tau, lambda-b, dag-tol, power-iters, split, unfreeze, and the server's round
    settings) with the first and the setup phase; each party accepts them only within its own
    :class:`PartyConsent`.
    ``forbid``, ``require``, ``tiers``, ``exogenous`` (:class:`~fedcausal_flwr.knowledge.
    KnowledgeSettings`): prior knowledge by variable name, enforced exactly (:func:`prior`).
    """

    section: ClassVar[str] = "vertical"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.replicas % 2 or (self.replicas and not self.secure):
            raise ValueError(
                f"run config {self.app_key('replicas')!r} = {self.replicas}: replicas come in "
                "complementary pairs (an even number) and ride only in mode 'vfedcd' (the "
                f"secure dispatch; mode is {self.mode!r})")
        if self.key_bits < MIN_KEY_BITS and not self.insecure_test_keys:
            raise ValueError(
                f"run config {self.app_key('key-bits')!r} = {self.key_bits}: Paillier keys below "
                f"{MIN_KEY_BITS} bits are refused (allowed: int >= {MIN_KEY_BITS}; int >= 256 "
                f"only with {self.app_key('insecure-test-keys')!r} = true, for tests)")

    @classmethod
    def paper(cls, **changes: Any) -> Self:
        """The paper's values (Sec. 6.1: SGD, lr 0.01, batch 16, 500 epochs, lambda1 5e-3,
        gamma 0.006, tau 0.1, MSE, no L2) with ``changes``; every other field keeps the App's
        default."""
        return cls(**{**PAPER, **changes})

    @classmethod
    def slow(cls, **changes: Any) -> Self:
        """The App's defaults until the few-step schedule (:data:`SLOW`): the paper's SGD
        schedule (lr 0.01, batch 16) over 700 epochs with the tuned loss and penalties."""
        return cls(**{**PAPER, **SLOW, **changes})

    def optimizer_args(self) -> dict[str, Any]:
        """The numbers of every party's step (:func:`optimizer_step`; the decoder's and, with
        ``lambda1``, the fragments' :func:`descent`)."""
        return {"optimizer": self.optimizer, "lr": self.lr, "adam_eps": self.adam_eps,
                "l2": self.l2}

    def exposure(self) -> list[str]:
        """What would cross the wire unprotected under these settings (empty: nothing)."""
        out = []
        if not self.secure:
            out.append(f"mode {self.mode!r} runs the plain framework: every party's features "
                       "H_kt = x^k W_kt and their gradients travel in the clear through the "
                       "relay (the ServerApp)")
        elif not (backend := described(self.he_backend)).encrypts:
            out.append(f"he-backend {backend.name!r} {backend.exposure}")
        elif self.key_bits < MIN_KEY_BITS:
            out.append(f"key-bits {self.key_bits} < {MIN_KEY_BITS}: test-only Paillier keys "
                       "that can be factored; treat every ciphertext as readable")
        return out


MIN_KEY_BITS = 2048
"""Smallest Paillier modulus accepted outside tests (``insecure-test-keys``)."""

@dataclass(frozen=True)
class PartyConsent(Settings):
    """What one party accepts from the server: HE backends, modes and the smallest key.

    Secure only by default: Paillier backends, mode "vfedcd", keys of at least
    :data:`MIN_KEY_BITS` bits. A party states wider consent in its node config (keys below),
    or its own ClientApp passes it to :class:`~fedcausal_flwr.vertical.client.VFedCDClient`;
    a server that asks for more is refused by :meth:`check` before the party makes a key or
    sends anything. ``backends`` and ``modes`` are comma-separated lists.
    """

    section: ClassVar[str] = "vertical"

    backends: str = setting(",".join(SECURE_BACKENDS), "vfedcd-accept-backends")
    modes: str = setting("vfedcd", "vfedcd-accept-modes")
    min_key_bits: int = setting(MIN_KEY_BITS, "vfedcd-min-key-bits", ge=256,
                                 le=MAX_KEY_BITS)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in _LISTS:
            _check_items(getattr(self, self.keys()[key]), key, repr(self.app_key(key)))

    @classmethod
    def checked(cls, key: str, value: Any, where: str) -> Any:
        """``value`` of the consent key ``key`` (bare, e.g. ``vfedcd-accept-backends``),
        coerced and validated; a ValueError naming ``where``, where the value came from (e.g.
        ``"node config 'vfedcd-accept-backends'"``: the run config's sectioned key is named
        only for values from the run config, by :meth:`from_run_config`)."""
        value = cls.coerced(key, value, where)
        if key in _LISTS:
            _check_items(value, key, where)
        return value

    @property
    def accepted_backends(self) -> tuple[str, ...]:
        """The backends, as a tuple."""
        return _items(self.backends)

    @property
    def accepted_modes(self) -> tuple[str, ...]:
        """The modes, as a tuple."""
        return _items(self.modes)

    def refusals(self, s: VFedCDSettings) -> list[str]:
        """Why these settings are refused, one line per reason (empty: accepted).

        The backend and key size matter only under the secure dispatch (the plain modes use
        no encryption); the mode always.
        """
        out = []
        if s.mode not in self.accepted_modes:
            out.append(f"mode {s.mode!r} is not among the accepted modes {self.modes!r} "
                       "('vfedcd-accept-modes')")
        if s.secure and s.he_backend not in self.accepted_backends:
            out.append(f"he-backend {s.he_backend!r} is not among the accepted backends "
                       f"{self.backends!r} ('vfedcd-accept-backends')")
        if s.secure and described(s.he_backend).encrypts and s.key_bits < self.min_key_bits:
            out.append(f"key-bits {s.key_bits} is below the accepted minimum "
                       f"{self.min_key_bits} ('vfedcd-min-key-bits')")
        return out

    def check(self, s: VFedCDSettings, who: str) -> None:
        """Raise a ValueError naming ``who``, what was asked and what is accepted."""
        why = self.refusals(s)
        if why:
            raise ValueError(f"{who} refuses the server's settings: {'; '.join(why)}")

    def as_properties(self) -> dict[str, Any]:
        """This consent as ``query.info`` properties, so a server can tell before it asks."""
        return {"accept-backends": self.backends, "accept-modes": self.modes,
                "min-key-bits": self.min_key_bits}

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> Self | None:
        """The consent a party reported (None: it reported none)."""
        if not all(k in props for k in ("accept-backends", "accept-modes", "min-key-bits")):
            return None
        return cls(backends=str(props["accept-backends"]), modes=str(props["accept-modes"]),
                   min_key_bits=int(props["min-key-bits"]))


def _items(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


_LISTS: dict[str, tuple[str, ...]] = {"vfedcd-accept-backends": BACKENDS,
                                      "vfedcd-accept-modes": MODES}
"""The comma-separated consent keys and the names each allows."""


def _check_items(value: str, key: str, where: str) -> None:
    """A ValueError naming ``where`` unless ``value`` lists known names of ``key``."""
    known, items = _LISTS[key], _items(value)
    bad = [v for v in items if v not in known]
    if bad or not items:
        raise ValueError(f"{where} = {value!r}: "
                         f"{'unknown ' + ', '.join(map(repr, bad)) if bad else 'empty'}"
                         f" (allowed: comma-separated names among "
                         f"{', '.join(map(repr, known))})")


PAPER: dict[str, Any] = {"epochs": 500, "batch": 16, "lr": 0.01, "optimizer": "sgd",
                         "lambda1": 5e-3, "gamma": 0.006, "tau": 0.1, "l2": 0.0, "loss": "mse"}
"""Fields where the paper's values (:meth:`VFedCDSettings.paper`) differ from the App's."""

SLOW: dict[str, Any] = {"epochs": 700, "loss": "nll", "lambda1": 5e-4, "l2": 5e-3,
                        "gamma": 5e-4, "tau": 0.6}
"""Changes to :data:`PAPER` that gave the App's defaults before the few-step schedule
(preset "slow", :meth:`VFedCDSettings.slow`)."""
