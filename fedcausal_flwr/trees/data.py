"""FedTrees' data: the time-series sets of FedPC's loaders (a synthetic lagged model, NetSim,
DREAM4) under the ``trees`` section, and a node's own CSV."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedcausal_flwr.data.series import SeriesData
from fedcausal_flwr.settings import setting

KINDS = ("synthetic", "netsim", "dream4", "node")


@dataclass(frozen=True)
class TreesData(SeriesData):
    """The data keys of the ``trees`` section (time series only: no Sachs rows)."""

    section: ClassVar[str] = "trees"

    data: str = setting("synthetic", "data", choices=KINDS,
                        doc="synthetic, netsim, dream4, or node (each node's own CSV)")
    data_path: str = setting("", "data-path",
                             doc="the .mat (netsim) or time-series .tsv (dream4); read only "
                                 "where the node config allows it")
    edges: int = setting(0, "edges", ge=0,
                         doc="synthetic: contemporaneous edges (trees see only lagged ones)")
