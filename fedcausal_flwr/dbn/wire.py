"""What crosses the wire in FDBNL and PFDBNL: each phase's arrays by name, and their shapes.

Every run is a stack of R >= 1 replicas (:mod:`fedcausal_flwr.dbn.replicas`): the strategy
and the client work on arrays with a leading replica axis, named as in the ``*_replicas``
phases of :data:`PHASES`; ``rows`` (R,) says which rows each replica learns from,
``scalars`` (R x 5) holds each one's ``alpha, rho1, rho2, lambda_w, lambda_a``
(:data:`SCALARS`), and ``val`` (R x T) is the client's held-out loss of each replica's
consensus at each of T thresholds (T = 0 without a penalty path), with ``replica-seed``,
``holdout`` and ``taus`` in the config. What a client reads of the settings travels as its
typed message (:meth:`~fedcausal_flwr.settings.Settings.to_wire`: PFDBNL's
``PersonalInputs``; FDBNL's clients read none).

A step travels in one of two forms (:func:`wire_phase`): a run with replicas sends the stack
as it is (phase ``<step>_replicas``); a plain run (its one replica on all rows) keeps the
wire it always had (phase ``<step>``): replica 0's arrays without the replica axis, its
scalars in the config (:data:`PLAIN_SCALARS`). :func:`down`, :func:`up` pack a stack for the
wire, :func:`stacked` unpacks what came; nothing else knows the two forms apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.federation.arrays import Layout, one
from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("W", "A", "beta", "gamma"), up=("B", "D")),
    "personal": Phase(down=("W", "A", "W_tilde", "A_tilde", "beta", "gamma", "W_k", "A_k"),
                      up=("W_tilde", "A_tilde", "W_k", "A_k", "h")),
    "local_replicas": Phase(down=("W", "A", "beta", "gamma", "rows", "scalars"),
                            up=("B", "D", "val")),
    "personal_replicas": Phase(
        down=("W", "A", "W_tilde", "A_tilde", "beta", "gamma", "W_k", "A_k", "rows",
              "scalars"),
        up=("W_tilde", "A_tilde", "W_k", "A_k", "h", "val")),
}

#: Which matrix each name is shaped like: ``"W"`` (d x d), ``"A"`` (pd x d), ``"h"`` (scalar).
LIKE: dict[str, str] = {"W": "W", "beta": "W", "B": "W", "W_tilde": "W", "W_k": "W",
                        "A": "A", "gamma": "A", "D": "A", "A_tilde": "A", "A_k": "A", "h": "h",
                        "rows": "rows", "scalars": "scalars", "val": "val"}
#: The per-replica numbers of ``scalars``, in column order.
SCALARS = ("alpha", "rho1", "rho2", "lambda_w", "lambda_a")
#: The scalars a plain step's config carries (``lambda_w``, ``lambda_a``: the settings').
PLAIN_SCALARS = {"local": ("rho2",), "personal": ("alpha", "rho1", "rho2")}
#: The config keys that only a stack uses.
STACK_CONFIG = ("replica-seed", "holdout", "taus")
STACK = "_replicas"


def wire_phase(step: str, replicated: bool) -> str:
    """The phase ``step`` (``"local"``, ``"personal"``) travels as: ``<step>_replicas`` for a
    run with replicas (``FDBNLSettings.replicated``), ``<step>`` for a plain run."""
    return step + STACK if replicated else step


def names(phase: str, direction: str) -> tuple[str, ...]:
    """The stack's arrays of ``phase``'s step, ``direction`` ``"down"`` or ``"up"``."""
    return getattr(PHASES[phase.removesuffix(STACK) + STACK], direction)


def shapes(names: Sequence[str], d: int, p: int, replicas: int | None = None, taus: int = 0
           ) -> list[tuple[int, ...]]:
    """Shapes of the named arrays for d variables and p lags (``replicas``: stacked for that
    many replicas, ``taus`` held-out thresholds)."""
    of = {"W": (d, d), "A": (p * d, d), "h": (), "rows": (), "scalars": (len(SCALARS),),
          "val": (taus,)}
    lead = () if replicas is None else (replicas,)
    return [lead + of[LIKE[n]] for n in names]


def wire_shapes(phase: str, direction: str, d: int, p: int, replicas: int, taus: int = 0
                ) -> list[tuple[int, ...]]:
    """Shapes of ``phase``'s arrays as they travel for a stack of ``replicas``."""
    lead = replicas if phase.endswith(STACK) else None
    return shapes(getattr(PHASES[phase], direction), d, p, lead, taus)


def replicas_in(phase: str, arrays: Sequence[np.ndarray]) -> int:
    """R of a message of ``phase``: the leading axis of its ``rows`` (1: a plain step)."""
    lay = _layout(phase, "down")
    return int(np.shape(lay.unpack(arrays)["rows"])[0]) if "rows" in lay.names else 1


def _layout(phase: str, direction: str) -> Layout:
    """``phase``'s arrays by name (:class:`~fedcausal_flwr.federation.arrays.Layout`; the
    shapes are the client's and the exchange's to check)."""
    names = getattr(PHASES[phase], direction)
    return Layout(f"{phase} {'message' if direction == 'down' else 'reply'}", names,
                  [one(n) for n in names])


def down(phase: str, stack: Mapping[str, np.ndarray], config: Mapping[str, Any]
         ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The message of ``phase`` from a stack (arrays by :func:`names` ``"down"``, each with
    a leading replica axis) and its config (with :data:`STACK_CONFIG`)."""
    lay = _layout(phase, "down")
    if phase.endswith(STACK):
        return lay.pack({n: stack[n] for n in lay.names if n in stack}), dict(config)
    scalars = dict(zip(SCALARS, stack["scalars"][0], strict=True))
    return lay.pack({n: stack[n][0] for n in lay.names if n in stack}), {
        **{k: float(scalars[k]) for k in PLAIN_SCALARS[phase]},
        **{k: v for k, v in config.items() if k not in STACK_CONFIG}}


def up(phase: str, stack: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The reply of ``phase`` from a stack (arrays by :func:`names` ``"up"``)."""
    lay = _layout(phase, "up")
    return lay.pack({n: stack[n] if phase.endswith(STACK) else stack[n][0]
                     for n in lay.names if n in stack})


def stacked(phase: str, direction: str, arrays: Sequence[np.ndarray],
            config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """What came over the wire in ``phase`` as a stack, by :func:`names`: a
    plain step's arrays gain a replica axis of 1, its ``rows`` (all), ``scalars`` (from
    ``config``: the plain scalars, which it must hold, the settings' lambdas, NaN for the
    rest) and ``val`` (no thresholds)."""
    got = _layout(phase, direction).unpack(arrays)
    if phase.endswith(STACK):
        return got
    got = {n: np.asarray(a)[None] for n, a in got.items()}
    if direction == "down":
        config = config or {}
        got["rows"] = np.zeros(1, dtype=np.int64)
        got["scalars"] = np.array([[float(config[k] if k in PLAIN_SCALARS[phase]
                                          else config.get(k, np.nan)) for k in SCALARS]])
    return {n: got.get(n, np.zeros((1, 0))) for n in names(phase, direction)}  # val: no taus
