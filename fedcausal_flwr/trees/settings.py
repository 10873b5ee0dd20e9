"""FedTrees' settings: every default once (the App, the scripts and a user's project read them
here). How the defaults were chosen: ``docs/algorithms/fedtrees.md``."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import ClassVar

from fedcausal_flwr.settings import (
    ClientMessage,
    ScreenedRunSettings,
    Settings,
    SiteSettings,
    setting,
)

MAX_FEATURES = ("sqrt", "log2", "all")
#: Most trees per target a client grows (its CPU, not the wire, is the cost).
MAX_TREES = 2000


@dataclass(frozen=True)
class Forest(Settings):
    """The forests every site grows: one per target, on the lags of the window."""

    section: ClassVar[str] = "trees"

    lags: int = setting(2, "lags", ge=1, le=8, wire=True,
                        doc="time lags of the inputs (x(t-1) ... x(t-p) predict x(t))")
    trees: int = setting(300, "trees", ge=1, le=MAX_TREES, wire=True,
                         doc="extra-trees per target and site (dynGENIE3: 300 ... 1000)")
    max_features: str = setting("sqrt", "max-features", choices=MAX_FEATURES,
                                wire=True, doc="inputs tried at each split (dynGENIE3: sqrt)")
    min_leaf: int = setting(1, "min-leaf", ge=1, le=1000, wire=True,
                            doc="fewest rows in a leaf")
    forest_seed: int = setting(0, "forest-seed", ge=0, wire=True,
                               doc="the trees' draws (target j uses forest-seed + j)")


@dataclass(frozen=True)
class Selection(Settings):
    """Which ranked edges the graph keeps, and when an edge counts as stable."""

    section: ClassVar[str] = "trees"

    edge_factor: float = setting(
        2.0, "edge-factor", gt=0,
        doc="an edge i -> j is kept when its importance is at least edge-factor times an "
            "input's uniform share (1 / (d p)); the ranking itself needs no threshold")
    stability_threshold: float = setting(
        0.6, "stability-threshold", gt=0.5, le=1,
        doc="share of sites whose own importances keep an edge for it to be stable")


@dataclass(frozen=True)
class ClientInputs(ClientMessage):
    """What a client reads: the forest it grows."""

    section: ClassVar[str] = "trees"

    lags: int = setting(MISSING, ge=1, le=8)
    trees: int = setting(MISSING, ge=1, le=MAX_TREES)
    max_features: str = setting(MISSING, choices=MAX_FEATURES)
    min_leaf: int = setting(MISSING, ge=1, le=1000)
    forest_seed: int = setting(MISSING, ge=0)

@dataclass(frozen=True)
class FedTreesSettings(Forest, Selection, SiteSettings, ScreenedRunSettings):
    """Every setting of FedTrees: the forests (:class:`Forest`), the graph and its stability
    (:class:`Selection`), the federation's variables when sites hold different ones, the run
    and screen pieces (rounds is unused: one exchange)."""

    section: ClassVar[str] = "trees"
    client_message: ClassVar[type[ClientMessage]] = ClientInputs
