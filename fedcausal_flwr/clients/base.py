"""What every client shares: data checks and the Message-API adapter of a NumPyClient."""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient


def checked_lagged(Xt: np.ndarray, Xlag: np.ndarray, who: str = "client") -> tuple[np.ndarray,
                                                                                   np.ndarray]:
    """``(Xt, Xlag)`` as float arrays, or a ValueError that names the problem."""
    Xt, Xlag = np.asarray(Xt, dtype=float), np.asarray(Xlag, dtype=float)
    if Xt.ndim != 2 or Xlag.ndim != 2:
        raise ValueError(f"{who}: Xt and Xlag must be 2-D, got {Xt.shape} and {Xlag.shape}")
    n, d = Xt.shape
    if Xlag.shape[0] != n:
        raise ValueError(f"{who}: Xt has {n} rows but Xlag has {Xlag.shape[0]}")
    if d == 0 or Xlag.shape[1] == 0 or Xlag.shape[1] % d:
        raise ValueError(f"{who}: Xlag has {Xlag.shape[1]} columns, not a multiple p*d of "
                         f"d={d} data columns")
    if n < 2:
        raise ValueError(f"{who}: {n} usable rows; need at least 2 rows after the lag")
    for name, X in (("Xt", Xt), ("Xlag", Xlag)):
        bad = ~np.isfinite(X)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(f"{who}: {name} has {int(bad.sum())} NaN/inf values "
                             f"(first at row {r}, column {c})")
    return Xt, Xlag


def check_shapes(who: str, arrays: list[np.ndarray], shapes: list[tuple[int, ...]],
                 names: list[str]) -> None:
    """Raise a ValueError when the server's arrays do not fit this client's data."""
    if len(arrays) != len(shapes):
        raise ValueError(f"{who}: expected {len(shapes)} arrays ({', '.join(names)}), "
                         f"got {len(arrays)}")
    for a, shape, name in zip(arrays, shapes, names, strict=True):
        if tuple(a.shape) != tuple(shape):
            raise ValueError(f"{who}: server sent {name} of shape {tuple(a.shape)} but this "
                             f"client's data needs {tuple(shape)} (wrong number of columns?)")


def reply(client: NumPyClient, msg: Message) -> Message:
    """Answer a ``train.<phase>`` or ``query.<phase>`` message with a NumPyClient.

    ``train.<phase>`` calls ``client.fit(arrays, {**config, "phase": phase})`` and replies
    with its arrays and metrics; ``query.<phase>`` calls ``client.get_properties``.
    """
    kind, _, phase = msg.metadata.message_type.partition(".")
    config: dict[str, Any] = dict(msg.content.config_records.get("config", {}))
    config["phase"] = phase or "default"
    if kind == "query":
        props = client.get_properties(config)
        return Message(RecordDict({"properties": ConfigRecord(props)}), reply_to=msg)
    arrays = (msg.content["arrays"].to_numpy_ndarrays()
              if "arrays" in msg.content.array_records else [])
    out, n, metrics = client.fit(arrays, config)
    return Message(RecordDict({
        "arrays": ArrayRecord([np.asarray(a) for a in out]),
        "metrics": MetricRecord({"num-examples": int(n), **metrics}),
    }), reply_to=msg)
