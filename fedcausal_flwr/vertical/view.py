"""How a VFedCD result reads as a graph: the weighted adjacency ``B`` (lag 0), thresholded
by default at the run's ``tau`` (the threshold of its reported DAG); with replicas, each
edge's selection frequency beside it (:func:`frequencies`)."""

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
    return [Layer("B", 0, B, v, v)]


def frequencies(r: RunResult) -> dict[str, Layer]:
    """``{"B": Layer("B_frequency", ...)}``: each edge's selection frequency over the run's
    replicas (``vertical.replicas``), labelled as ``B``; empty without replicas."""
    if "B_frequency" not in r.estimates:
        return {}
    F = np.asarray(r.estimates["B_frequency"], dtype=float)
    v, _ = labels_or_default(r, "B_frequency", F.shape)
    return {"B": Layer("B_frequency", 0, F, v, v)}


def thresholds(r: RunResult) -> dict[str, float]:
    """``tau`` for ``B`` (the run's settings)."""
    return {"B": float(run_setting(r, "tau"))}
