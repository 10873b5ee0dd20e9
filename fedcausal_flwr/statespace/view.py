"""How a FedGC/FedCF result reads as a graph: ``A_hat`` (lag 1, transposed from the
state-space convention ``x_t = A x_{t-1}``) and FedCF's ``B_hat`` (inputs -> states).

An entry is an edge when it is nonzero and, where the run reports p-values for "no Granger
effect" (``A_offdiag_pvalue``, ``B_offdiag_pvalue``), its p-value is below the run's
``granger_alpha`` (0: every nonzero entry); ``estimates`` keep the unmasked matrices. Their
settings hold no weight threshold: ``tau`` is 0 unless one is given."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr import registry
from fedcausal_flwr.results import Layer, RunResult, labels_or_default, run_setting

VARIANTS = ("A_full",)


def significant(r: RunResult, key: str, M: np.ndarray) -> np.ndarray:
    """``M`` with the entries whose ``<key[0]>_offdiag_pvalue`` is not below the run's
    ``granger_alpha`` set to 0 (``M`` itself without p-values or with alpha 0)."""
    p = r.estimates.get(f"{key[0]}_offdiag_pvalue")
    alpha = float(run_setting(r, "granger_alpha"))
    if p is None or not alpha:
        return M
    p = np.asarray(p, dtype=float)
    if p.shape != M.shape:
        return M
    return np.where(p < alpha, M, 0.0)


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``A_hat`` and, when present, ``B_hat``, oriented ``[source, target]`` and masked by
    their p-values (:func:`significant`)."""
    est = r.estimates
    if client is not None:
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    out = []
    if "A_hat" in est:
        A = significant(r, "A_hat", np.asarray(est["A_hat"], dtype=float))
        rows, cols = labels_or_default(r, "A_hat", A.shape)
        out.append(Layer("A_hat", 1, A.T, cols, rows))
    if "B_hat" in registry.get(r.algorithm).graphs and np.size(est.get("B_hat", [])):
        B = significant(r, "B_hat", np.asarray(est["B_hat"], dtype=float))
        rows, cols = labels_or_default(r, "B_hat", B.shape)
        out.append(Layer("B_hat", 1, B.T, cols, rows))
    return out


def thresholds(r: RunResult) -> dict[str, float]:
    """0 for every layer: FedGC/FedCF report dense estimates and no weight threshold (the
    p-values mask them, :func:`significant`)."""
    return {layer.name: 0.0 for layer in layers(r)}
