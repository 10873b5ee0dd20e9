"""How a VFedCD result reads as a graph: the weighted adjacency ``B`` (lag 0)."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.results import Layer, RunResult, labels_or_default

VARIANTS = ("dag",)


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``B``, rows cause, columns effect."""
    if client is not None:
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    if "B" not in r.estimates:
        return []
    B = np.asarray(r.estimates["B"], dtype=float)
    v, _ = labels_or_default(r, "B", B.shape)
    return [Layer("B", 0, B, v, v)]
