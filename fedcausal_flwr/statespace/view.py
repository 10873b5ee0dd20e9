"""How a FedGC/FedCF result reads as a graph: ``A_hat`` (lag 1, transposed from the
state-space convention ``x_t = A x_{t-1}``) and FedCF's ``B_hat`` (inputs -> states).

An entry is an edge when it is nonzero and, where the run reports p-values for "no Granger
effect" that are a test (:data:`TESTED`: FedGC's ``A_offdiag_pvalue``, FedCF's
``B_offdiag_pvalue``), its p-value is below the run's ``granger_alpha`` (0: every nonzero
entry); ``estimates`` keep the unmasked matrices. FedCF's ``A_hat`` p-values are not a test
(null entries rejected 94-97% of the time, ``docs/algorithms/fedcf.md``), so its ``A_hat`` is not
masked by them: every nonzero entry is an edge unless a ``tau`` is given. Their settings hold
no weight threshold: ``tau`` is 0 unless one is given."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr import registry
from fedcausal_flwr.results import Layer, RunResult, labels_or_default, run_setting

VARIANTS = ("A_full",)
#: ``(algorithm, matrix)`` whose p-values hold their level
#: (``simulations/studies/granger_test.py``): only these mask the graph view
TESTED = frozenset({("fedgc", "A_hat"), ("fedcf", "B_hat")})


def significant(r: RunResult, key: str, M: np.ndarray) -> np.ndarray:
    """``M`` with the entries whose ``<key[0]>_offdiag_pvalue`` is not below the run's
    ``granger_alpha`` set to 0 (``M`` itself without p-values, with alpha 0, or where those
    p-values are not a test: ``(r.algorithm, key)`` not in :data:`TESTED`)."""
    if (r.algorithm, key) not in TESTED:
        return M
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
    their p-values where those are a test (:func:`significant`)."""
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
    p-values that are a test mask them, :func:`significant`)."""
    return {layer.name: 0.0 for layer in layers(r)}
