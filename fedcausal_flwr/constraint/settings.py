"""FedPC's settings: every default once (the App, the scripts and a user's project read them
here). How the defaults were chosen: ``docs/algorithms/fedpc.md``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedcausal_flwr.knowledge import KnowledgeSettings
from fedcausal_flwr.settings import (
    MAX_REPLICAS,
    ClientMessage,
    ScreenedRunSettings,
    Settings,
    SiteSettings,
    setting,
)

ORIENTATIONS = ("pc", "likelihood-ratio", "pc+likelihood-ratio")


@dataclass(frozen=True)
class Search(Settings):
    """The PC search: the test, its level, the depth of conditioning sets and the lags."""

    section: ClassVar[str] = "constraint"

    alpha: float = setting(0.05, "alpha", gt=0, lt=1,
                           doc="level of every conditional-independence test")
    test: str = setting("fisher-z", "test", choices=("fisher-z", "t"),
                        doc="fisher-z (causal-learn's fisherz) or t (tigramite's ParCorr)")
    max_depth: int = setting(-1, "max-depth", ge=-1, le=64,
                             doc="largest conditioning set (-1: no limit)")
    lags: int = setting(0, "lags", ge=0, le=8, wire=True,
                        doc="time lags of the model (0: i.i.d. rows, PC; >= 1: a time "
                            "series, PC over the lagged window with time tiers)")


@dataclass(frozen=True)
class Orientation(Settings):
    """How edges the skeleton keeps are oriented, and how orientation enters the ranking."""

    section: ClassVar[str] = "constraint"

    orientation: str = setting(
        "likelihood-ratio", "orientation", choices=ORIENTATIONS,
        doc="pc: colliders and Meek's rules; likelihood-ratio: every contemporaneous edge by "
            "the pairwise likelihood ratio of Hyvarinen & Smith (2013) on the residuals of "
            "the lags (one more exchange); pc+likelihood-ratio: PC, then the ratio for the "
            "edges PC leaves undirected")
    reverse_weight: float = setting(
        0.9, "reverse-weight", ge=0, le=1,
        doc="the ranking score of the direction an oriented edge does not take, as a share "
            "of its strength (1: orientation ignored in the ranking)")


@dataclass(frozen=True)
class Confidence(Settings):
    """Edge confidence: the search repeated on half samples of every client's rows."""

    section: ClassVar[str] = "constraint"

    replicas: int = setting(0, "replicas", ge=0, le=MAX_REPLICAS, wire=True,
                            doc="half-sample replicas for edge frequencies (even; 0: none); "
                                "their moments ride in the same exchange")
    replica_seed: int = setting(0, "replica-seed", ge=0, wire=True,
                                doc="the draw of the half samples")
    stability_threshold: float = setting(0.6, "stability-threshold", gt=0.5, le=1,
                                         doc="frequency an edge needs to be stable")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.replicas % 2:
            raise ValueError(f"run config {self.app_key('replicas')!r} = {self.replicas}: "
                             "must be even (replicas come in complementary pairs of halves)")


@dataclass(frozen=True)
class ClientInputs(ClientMessage):
    """What a client reads: the lags of its window and the replicas to compute."""

    section: ClassVar[str] = "constraint"

    lags: int = setting(0, "lags", ge=0, le=8)
    replicas: int = setting(0, "replicas", ge=0, le=MAX_REPLICAS)
    replica_seed: int = setting(0, "replica-seed", ge=0)


@dataclass(frozen=True)
class FedPCSettings(Search, Orientation, Confidence, SiteSettings, ScreenedRunSettings,
                    KnowledgeSettings):
    """Every setting of FedPC: the search (:class:`Search`), the orientation
    (:class:`Orientation`), edge confidence (:class:`Confidence`), the federation's
    variables when sites hold different ones, the run and screen pieces and prior knowledge
    (forbidden and required edges, tiers, exogenous variables)."""

    section: ClassVar[str] = "constraint"
    client_message: ClassVar[type[ClientMessage]] = ClientInputs
