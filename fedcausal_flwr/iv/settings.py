"""FedIV's settings, apart from the equations so that reading them needs no torch: the App
checks every family's section of a run config, and an FDBNL-only install has no torch.

:class:`FedIVSettings` is composed of small frozen pieces by concern (:class:`Game`,
:class:`ServerRounds`, :class:`Validation`, :class:`Compute`, :class:`Intervals`, beside the
run and screen pieces); a client reads :class:`LocalInputs` alone.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Any, ClassVar

from fedcausal_flwr.settings import (
    MAX_ROUNDS,
    MAX_ROWS,
    ClientMessage,
    ScreenedRunSettings,
    Settings,
    setting,
)

__all__ = ["Compute", "FedIVSettings", "Game", "GameArgs", "Intervals", "IVPiece", "LocalInputs",
           "ServerRounds", "Validation"]

GAME_ARGS = ("lr_g", "lr_f", "grad_clip", "optimizer", "momentum", "betas", "mode",
             "batch_size")
"""The numbers of the local game's epochs (``model.train_epochs``)."""
OPTIMIZERS = ("sgd", "sgdm", "oadam")


class GameArgs:
    """The local game's numbers of a class with its fields (:class:`Game`,
    :class:`LocalInputs`), and the check of ``betas``."""

    betas: tuple[float, float]
    local_epochs: int

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[misc]
        betas = tuple(float(b) for b in self.betas)
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"{type(self).__name__}.betas = {self.betas!r}: need two numbers "
                             "in [0, 1)")
        object.__setattr__(self, "betas", betas)

    def game_args(self) -> dict[str, Any]:
        """The numbers of the local game's epochs (``model.train_epochs``)."""
        return {n: getattr(self, n) for n in GAME_ARGS}

    def local_args(self) -> dict[str, Any]:
        """The numbers of a client's step (``model.local_update``)."""
        return {"local_epochs": self.local_epochs, **self.game_args()}


@dataclass(frozen=True)
class IVPiece(Settings):
    """A piece of FedIV's settings: its keys sit in the run config's ``iv`` table."""

    section: ClassVar[str] = "iv"


@dataclass(frozen=True)
class Game(GameArgs, IVPiece):
    """A client's local game. ``lr_g``, ``lr_f``: step sizes of the min player g and the max
    player f (for y of unit scale). ``mode``: ``"gda"`` takes full local-batch steps,
    ``"sgda"`` minibatches of ``batch_size``. ``local_epochs`` (R): local passes per round of
    FedGDA (Algorithm 1; GDA: R full-batch steps). ``optimizer``: ``"sgd"`` (the paper),
    ``"sgdm"`` (``momentum``, the authors' code) or ``"oadam"`` (optimistic Adam with
    ``betas``, DeepGMM); federated clients restart it every round. ``grad_clip``: f's local
    gradient is scaled to L2 norm at most this (``model.clip``; 0: Algorithm 1's raw
    gradients)."""

    lr_g: float = setting(0.02, "iv-lr-g", gt=0, wire=True)
    lr_f: float = setting(0.2, "iv-lr-f", gt=0, wire=True)
    mode: str = setting("gda", "iv-mode", choices=("gda", "sgda"), wire=True)
    batch_size: int = setting(256, "iv-batch-size", ge=1, le=MAX_ROWS, wire=True)
    local_epochs: int = setting(40, "iv-local-epochs", ge=1, le=MAX_ROUNDS,
                                wire=True)
    optimizer: str = setting("sgd", "iv-optimizer", choices=OPTIMIZERS, wire=True)
    momentum: float = setting(0.9, "iv-momentum", ge=0, lt=1, wire=True)
    grad_clip: float = setting(
        5.0, "iv-grad-clip", ge=0, wire=True,
        doc="the max player's (f's) local gradient is scaled to L2 norm at most this before "
            "its step (0: Algorithm 1's raw gradients, the paper)")
    betas: tuple[float, float] = setting((0.5, 0.9), wire=True)


@dataclass(frozen=True)
class ServerRounds(IVPiece):
    """The server's rounds. ``weighting``: ``"uniform"`` (eq. 20) or ``"n"`` (n_i-weighted
    FedAvg, the code). ``rounds`` (T): FedGDA rounds. ``diverge_factor``: the detection rule of
    ``model.divergence``; a diverged run stops and says so."""

    weighting: str = setting("uniform", "iv-weighting", choices=("uniform", "n"))
    rounds: int = setting(
        50, "iv-rounds", ge=1, le=MAX_ROUNDS,
        doc="FedGDA rounds T; a run is T + 1 exchanges (T rounds, then the last global's "
            "validation). Its own key: `dbn.num-rounds` is FDBNL/PFDBNL's ADMM cap")
    diverge_factor: float = setting(
        10.0, "iv-diverge-factor", ge=0,
        doc="a round whose global max |parameter| exceeds this times the run's largest so far "
            "(at least 1) ends the run as diverged; non-finite parameters always do (0: only "
            "non-finite)")


@dataclass(frozen=True)
class Validation(IVPiece):
    """``seed``: network initialisation, minibatch order and validation features.
    ``val_features``: random Fourier features of the validation criterion (Lemma 1 on a fixed
    class)."""

    seed: int = setting(0, "seed", ge=0, wire=True)
    val_features: int = setting(32, "iv-val-features", ge=1, le=4096, wire=True)


@dataclass(frozen=True)
class Compute(IVPiece):
    """``device``: where a client trains (``"auto"``: a GPU when present)."""

    device: str = setting("auto", "iv-device", choices=("auto", "cpu", "cuda"))


@dataclass(frozen=True)
class Intervals(IVPiece):
    """``replicas``, ``interval_level``, ``interval_method``: the bootstrap interval of g
    (``docs/algorithms/fediv.md``, "Intervals")."""

    replicas: int = setting(
        0, "iv-replicas", ge=0, le=1000,
        doc="R bootstrap replicas run beside the ordinary run, in the same messages: replica "
            "r trains on a resample of each client's own rows drawn on the client (seed, r); "
            "they give the interval of g (0: none, the ordinary run; clients read R from the "
            "message's arrays)")
    interval_level: float = setting(
        0.9, "iv-interval-level", gt=0, lt=1,
        doc="two-sided level of the replicas' pointwise interval of g")
    interval_method: str = setting(
        "percentile", "iv-interval-method", choices=("percentile", "basic", "normal"),
        doc="the bootstrap interval (model.bootstrap_interval): the replicas' quantiles, "
            "those reflected about the estimate, or estimate -/+ z sd")


@dataclass(frozen=True)
class LocalInputs(GameArgs, ClientMessage):
    """What a FedIV client reads of the settings with every message (``train.local``,
    ``train.validate``): its game, ``seed`` and ``val_features`` (in the order they travelled
    in before)."""

    lr_g: float = setting(MISSING, gt=0)
    lr_f: float = setting(MISSING, gt=0)
    mode: str = setting(MISSING, choices=("gda", "sgda"))
    batch_size: int = setting(MISSING, ge=1, le=MAX_ROWS)
    local_epochs: int = setting(MISSING, ge=1, le=MAX_ROUNDS)
    optimizer: str = setting(MISSING, choices=OPTIMIZERS)
    momentum: float = setting(MISSING, ge=0, lt=1)
    grad_clip: float = setting(MISSING, ge=0)
    betas: tuple[float, float] = setting(MISSING)
    seed: int = setting(MISSING, ge=0)
    val_features: int = setting(MISSING, ge=1, le=4096)


@dataclass(frozen=True)
class FedIVSettings(Intervals, Compute, Validation, ServerRounds, Game, ScreenedRunSettings):
    """Every setting of FedIV / (Fed)DeepGMM, with the App's defaults (the one source of them):
    the run and screen pieces, then :class:`Game`, :class:`ServerRounds`,
    :class:`Validation`, :class:`Compute` and :class:`Intervals` (bases listed last piece
    first: a dataclass orders its fields by the reversed MRO); each piece documents its
    fields. FedIV's own ``byzantine_factor`` replaces the screen's default.

    How the defaults were chosen: ``docs/algorithms/fediv.md``.

    The ``wire`` fields are what a client's local step and validation use
    (:class:`LocalInputs`); the server sends them with every message, so every client runs
    the server's settings.
    """

    section: ClassVar[str] = "iv"
    client_message: ClassVar[type[ClientMessage]] = LocalInputs

    byzantine_factor: float = setting(
        25.0, "byzantine-factor", gt=1,
        doc="a client is flagged when its distance from the median update exceeds this times "
            "the median client's distance (FedIV's clients differ far more than FDBNL's: under "
            "Dirichlet(0.3) splits an honest client of a few samples reaches 12.6)")
