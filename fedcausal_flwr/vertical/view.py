"""How a VFedCD result reads as a graph: the weighted adjacency ``B`` (lag 0), thresholded
by default at the run's ``tau`` (the threshold of its reported DAG); with replicas, each
edge's selection frequency beside it (:attr:`Layer.frequency`); with prior knowledge its
required edges, kept at any threshold (:attr:`Layer.required`)."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.results import Layer, RunResult, labels_or_default, run_setting

VARIANTS = ("dag",)


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``B``, rows cause, columns effect."""
    if client is not None:
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    if "B" not in r.estimates:
        return []
    B = np.asarray(r.estimates["B"], dtype=float)
    v, _ = labels_or_default(r, "B", B.shape)
    F, R = r.estimates.get("B_frequency"), r.estimates.get("B_required")
    return [Layer("B", 0, B, v, v, None if F is None else np.asarray(F, dtype=float),
                  None if R is None else np.asarray(R, dtype=bool))]


def thresholds(r: RunResult) -> dict[str, float]:
    """``tau`` for ``B`` (the run's settings)."""
    return {"B": float(run_setting(r, "tau"))}
