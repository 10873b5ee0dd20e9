"""A bounded record of what crossed the wire: per-phase summaries, full entries on audit."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

#: The reply record that says which life of its node answered: ``{"incarnation": int}``, a
#: random number a node draws the first time its ``context.state`` is used and keeps there
#: (``federation.client.incarnation``). A SuperNode that restarted has lost its state and
#: answers with another, even under the same node id (SuperNode authentication gives a
#: registered key its node id at every start).
NODE_RECORD = "node"


@functools.cache
def _dtype(dtype: Any) -> tuple[str, int]:
    """The name and item size of a dtype (numpy's, or its name as Flower's ``Array`` keeps it)."""
    dt = np.dtype(dtype)
    return str(dt), dt.itemsize


class WireLog:
    """What crossed the wire, bounded: per-phase summaries, full entries only when auditing.

    ``summary()`` maps ``"<phase> <direction>"`` to ``messages``, ``bytes`` (array payload),
    ``nodes`` (how many distinct), ``first_round`` / ``last_round`` and ``shapes`` (distinct
    ``[shape, dtype]`` lists, at most :attr:`MAX_SHAPES` kept, ``shapes_dropped`` counting the
    rest). With ``audit=True`` every message is also kept in :attr:`entries` as a dict
    ``{round, phase, direction, node, arrays: [(shape, dtype)], config: [keys]}`` (``config``
    on messages sent down); memory then grows with the run.
    """

    MAX_SHAPES = 64

    def __init__(self, audit: bool = False) -> None:
        self.audit = bool(audit)
        self.entries: list[dict[str, Any]] = []
        self._phases: dict[str, dict[str, Any]] = {}

    def add(self, rnd: int, phase: str, direction: str, node: int,
            arrays: Sequence[Any], config_keys: Iterable[str] | None = None) -> None:
        """Count one message (``arrays``: numpy arrays or Flower ``Array`` objects)."""
        specs, nbytes = [], 0
        for a in arrays:
            shape = tuple(map(int, a.shape))
            dtype, itemsize = _dtype(a.dtype)
            specs.append((shape, dtype))
            nbytes += math.prod(shape) * itemsize
        s = self._phases.setdefault(f"{phase} {direction}", {
            "messages": 0, "bytes": 0, "first_round": rnd, "last_round": rnd,
            "shapes": set(), "shapes_dropped": 0, "nodes": set()})
        s["messages"] += 1
        s["bytes"] += int(nbytes)
        s["last_round"] = rnd
        if len(s["nodes"]) < 10_000:
            s["nodes"].add(node)
        key = tuple(specs)
        if key not in s["shapes"]:
            if len(s["shapes"]) < self.MAX_SHAPES:
                s["shapes"].add(key)
            else:
                s["shapes_dropped"] += 1
        if self.audit:
            entry = {"round": rnd, "phase": phase, "direction": direction, "node": node,
                     "arrays": specs}
            if config_keys is not None:
                entry["config"] = sorted(config_keys)
            self.entries.append(entry)

    def summary(self) -> dict[str, dict[str, Any]]:
        """JSON-able per-phase summaries."""
        return {k: {**v, "nodes": len(v["nodes"]),
                    "shapes": sorted([[list(sh), dt] for sh, dt in key] for key in v["shapes"])}
                for k, v in self._phases.items()}

    def __len__(self) -> int:
        """Messages counted (all phases)."""
        return sum(v["messages"] for v in self._phases.values())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The full entries (only with ``audit=True``)."""
        if not self.audit:
            raise RuntimeError("wire_log keeps full entries only with audit=True; "
                               "use summary()")
        return iter(self.entries)


class Phase(NamedTuple):
    """The arrays of one ``train.<phase>`` exchange, by name: ``down`` (server to client) and
    ``up`` (the reply), in wire order."""

    down: tuple[str, ...]
    up: tuple[str, ...]
