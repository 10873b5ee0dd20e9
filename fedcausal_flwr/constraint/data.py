"""FedPC's data: built-in sets (a synthetic linear non-Gaussian model, NetSim, DREAM4,
Sachs) cut into the clients' window rows, their truth, and a node's own CSV."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.data import series
from fedcausal_flwr.data.series import SeriesData, experiments, synthetic, windows
from fedcausal_flwr.settings import setting

__all__ = ["ConstraintData", "SeriesData", "client_series", "experiments", "synthetic",
           "windows"]

@dataclass(frozen=True)
class ConstraintData(SeriesData):
    """The data keys of the ``constraint`` section."""

    section: ClassVar[str] = "constraint"

    sachs_rows: str = setting("observational", "sachs-rows",
                              choices=("observational", "interventional"),
                              doc="sachs: the 853 observational rows cut into K clients, or "
                                  "all nine experiments, each client holding whole "
                                  "experiments and its indicator columns exp2..exp9 (joint "
                                  "causal inference, Mooij et al. 2020)")


def client_series(rc: Mapping[str, Any], p: int, K: int
                  ) -> tuple[list[list[np.ndarray]], list[str], np.ndarray | None]:
    """:func:`fedcausal_flwr.data.series.client_series` of the ``constraint`` data keys."""
    return series.client_series(rc, p, K, ConstraintData)
