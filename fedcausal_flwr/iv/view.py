"""How a FedIV result is read: a learned function g, not a graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.results import Layer, RunResult


def layers(r: RunResult, client: int | None = None) -> list[Layer]:  # noqa: ARG001
    """FedIV has no graph: a ValueError pointing at :func:`predict`."""
    raise ValueError("FedIV learns a function g, not a graph: use predict(x)")


def predict(result: Any, x: Any, selected: bool = True) -> np.ndarray:
    """The learned g at ``x`` (:meth:`FedIV.predict`)."""
    from pathlib import Path

    if isinstance(result, (str, Path)):
        result = RunResult.load(result)
    est = result.estimates if isinstance(result, RunResult) else dict(result["estimates"])
    algorithm = result.algorithm if isinstance(result, RunResult) else result.get("algorithm")
    if algorithm != "fediv":
        raise ValueError(f"predict needs a FedIV result, got algorithm {algorithm!r}")
    key = "g_params_selected" if selected else "g_params"
    if not est.get(key) or "x_shape" not in est:
        raise ValueError(f"this FedIV result holds no learned g ({key!r} or 'x_shape' "
                         "missing: the run stopped before its first round, or an older "
                         "result.json)")
    x_shape = tuple(int(v) for v in np.ravel(est["x_shape"]))
    z_shape = tuple(int(v) for v in np.ravel(est.get("z_shape", [1])))
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == len(x_shape) and x_shape == (1,):
        x = x.reshape(-1, 1)
    if x.shape[1:] != x_shape:
        raise ValueError(f"x has per-row shape {x.shape[1:]}, the learned g takes {x_shape}")
    g, _ = dg.networks(x_shape, z_shape, 0)
    return dg.g_values(g, [np.asarray(a, dtype=np.float64) for a in est[key]], x)
