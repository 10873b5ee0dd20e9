"""How a FedIV result is read: a learned function g (and its bootstrap interval), not a graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.results import Layer, RunResult


def layers(r: RunResult, client: int | None = None) -> list[Layer]:  # noqa: ARG001
    """FedIV has no graph: a ValueError pointing at :func:`predict`."""
    raise ValueError("FedIV learns a function g, not a graph: use predict(x)")


def _loaded(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(estimates, config)`` of a FedIV :class:`RunResult`, result.json dict or path."""
    from pathlib import Path

    if isinstance(result, (str, Path)):
        result = RunResult.load(result)
    if isinstance(result, RunResult):
        est, config, algorithm = result.estimates, result.config, result.algorithm
    else:
        est, config = dict(result["estimates"]), dict(result.get("config") or {})
        algorithm = result.get("algorithm")
    if algorithm != "fediv":
        raise ValueError(f"predict needs a FedIV result, got algorithm {algorithm!r}")
    return est, config


def rows(x: Any, x_shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as rows of g's input (n values become a column when g takes one number)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == len(x_shape) and x_shape == (1,):
        x = x.reshape(-1, 1)
    if x.shape[1:] != x_shape:
        raise ValueError(f"x has per-row shape {x.shape[1:]}, the learned g takes {x_shape}")
    return x


def _net(est: dict[str, Any], key: str) -> tuple[Any, tuple[int, ...]]:
    """g's network and its input shape, or a ValueError when the result has no ``key``."""
    if not est.get(key) or "x_shape" not in est:
        raise ValueError(f"this FedIV result holds no learned g ({key!r} or 'x_shape' "
                         "missing: the run stopped before its first round, or an older "
                         "result.json)")
    x_shape = tuple(int(v) for v in np.ravel(est["x_shape"]))
    z_shape = tuple(int(v) for v in np.ravel(est.get("z_shape", [1])))
    return dg.networks(x_shape, z_shape, 0)[0], x_shape


def _params(p: Any) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in p]


def predict(result: Any, x: Any, selected: bool = True) -> np.ndarray:
    """The learned g at ``x`` (:meth:`FedIV.predict`)."""
    est, _ = _loaded(result)
    key = "g_params_selected" if selected else "g_params"
    g, x_shape = _net(est, key)
    return dg.g_values(g, _params(est[key]), rows(x, x_shape))


def interval(result: Any, x: Any, level: float | None = None, method: str | None = None
             ) -> dict[str, np.ndarray]:
    """g of the selected round at ``x`` and its bootstrap interval (:meth:`FedIV.interval`)."""
    from fedcausal_flwr.iv.settings import FedIVSettings

    est, config = _loaded(result)
    g, x_shape = _net(est, "g_params_selected")
    reps = [_params(p) for p in est.get("g_params_replicas") or []]
    if len(reps) < 2:
        raise ValueError(f"this FedIV result holds {len(reps)} bootstrap replicas; an interval "
                         "needs a run with iv-replicas >= 2")
    defaults = FedIVSettings()
    level = float(config.get("interval_level", defaults.interval_level) if level is None
                  else level)
    method = str(config.get("interval_method", defaults.interval_method) if method is None
                 else method)
    main, lo, hi = dg.g_interval(g, _params(est["g_params_selected"]), reps,
                                 rows(x, x_shape), level, method)
    return {"g": main, "lower": lo, "upper": hi}
