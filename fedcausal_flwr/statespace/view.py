"""How a FedGC/FedCF result reads as a graph: ``A_hat`` (lag 1, transposed from the
state-space convention ``x_t = A x_{t-1}``) and FedCF's ``B_hat`` (inputs -> states). Their
settings hold no graph threshold: every nonzero entry is an edge unless a ``tau`` is given."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr import registry
from fedcausal_flwr.results import Layer, RunResult, labels_or_default

VARIANTS = ("A_full",)


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``A_hat`` and, when present, ``B_hat``, oriented ``[source, target]``."""
    est = r.estimates
    if client is not None:
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    out = []
    if "A_hat" in est:
        A = np.asarray(est["A_hat"], dtype=float)
        rows, cols = labels_or_default(r, "A_hat", A.shape)
        out.append(Layer("A_hat", 1, A.T, cols, rows))
    if "B_hat" in registry.get(r.algorithm).graphs and np.size(est.get("B_hat", [])):
        B = np.asarray(est["B_hat"], dtype=float)
        rows, cols = labels_or_default(r, "B_hat", B.shape)
        out.append(Layer("B_hat", 1, B.T, cols, rows))
    return out


def thresholds(r: RunResult) -> dict[str, float]:
    """0 for every layer: FedGC/FedCF report dense estimates and no graph threshold."""
    return {layer.name: 0.0 for layer in layers(r)}
