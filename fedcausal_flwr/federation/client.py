"""What every client shares: the client base, data checks, the Message-API adapter and
:func:`register`, which wires an algorithm's phases onto any ``ClientApp``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from weakref import WeakKeyDictionary

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp

from fedcausal_flwr.federation.wire import NODE_RECORD

Fit = tuple[list[np.ndarray], int, dict[str, Any]]


class CausalClient(NumPyClient):
    """Base of every algorithm's client: one phase table, one ``from_context``.

    ``phases`` maps each ``train.<phase>`` of the protocol to the method that answers it,
    ``method(parameters, config) -> (arrays, n, metrics)``; :meth:`fit` dispatches on it.
    Subclasses take their data as constructor arguments plus ``partition_id`` and
    ``num_partitions``.
    """

    phases: ClassVar[dict[str, str]] = {}
    who = "client"

    @classmethod
    def from_context(cls, context: Context, data: Mapping[str, Any]) -> CausalClient:
        """This node's client: ``data`` (constructor arguments) plus the node's identity."""
        pid = int(context.node_config.get("partition-id", 0))
        k = int(context.node_config.get("num-partitions", 1))
        return cls(**data, partition_id=pid, num_partitions=k,
                   **cls.context_arguments(context))

    @classmethod
    def context_arguments(cls, context: Context) -> dict[str, Any]:
        """Extra constructor arguments from the node's context (e.g. its state)."""
        return {}

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """Answer ``train.<phase>`` with the method the phase table names."""
        phase = str(config.get("phase"))
        if phase not in self.phases:
            raise ValueError(f"{self.who}: unknown {type(self).__name__} phase {phase!r} "
                             f"(knows {', '.join(self.phases)})")
        return getattr(self, self.phases[phase])(parameters, config)


def client_class(algorithm: str) -> type[CausalClient]:
    """The client class of ``algorithm`` (imports only its module)."""
    from fedcausal_flwr import registry

    return registry.get(algorithm).client_class()


def incarnation(context: Context) -> int:
    """This node's incarnation (see :data:`NODE_RECORD`), drawn on first use."""
    rec = context.state.config_records.get(NODE_RECORD)
    if rec is None or "incarnation" not in rec:
        context.state[NODE_RECORD] = ConfigRecord({"incarnation": secrets.randbits(53)})
        rec = context.state[NODE_RECORD]
    return int(rec["incarnation"])


#: The message-config key naming the algorithm a message belongs to (every strategy sends
#: its ``algorithm`` with each ``query.info`` and ``train.<phase>`` message).
ALGORITHM_KEY = "algorithm"


@dataclass
class _Served:
    """What :func:`register` wired onto one ClientApp: the algorithms and message types."""

    algorithms: dict[str, tuple[type[CausalClient], Callable[[Context], Any]]] = field(
        default_factory=dict)
    types: set[str] = field(default_factory=set)

    def pick(self, msg: Message) -> str:
        """The algorithm that answers ``msg``: the one its config names, else the only one
        registered for its message type; a ValueError when that is ambiguous."""
        kind, _, phase = msg.metadata.message_type.partition(".")
        config = msg.content.config_records.get("config", {})
        named = str(config.get(ALGORITHM_KEY, "")).strip().lower()
        if named in self.algorithms:
            return named
        able = [a for a, (cls, _) in self.algorithms.items()
                if kind == "query" or phase in cls.phases]
        if len(able) == 1:
            return able[0]
        said = f"names algorithm {named!r}" if named else "names no algorithm"
        raise ValueError(f"this ClientApp serves {', '.join(self.algorithms)}; a "
                         f"{msg.metadata.message_type} message that {said} could be "
                         f"{' or '.join(able) or 'none of them'} (the server's strategy "
                         f"sends its algorithm as the message config key {ALGORITHM_KEY!r})")

    def handle(self, msg: Message, context: Context) -> Message:
        """Build the picked algorithm's client for this node and let it answer ``msg``; the
        reply carries the node's :func:`incarnation`."""
        from fedcausal_flwr.data.nodefiles import adopt_node_config

        cls, make = self.algorithms[self.pick(msg)]
        adopt_node_config(context.node_config)  # a simulated node's own (launch --node-data)
        made = make(context)
        client = made if isinstance(made, NumPyClient) else cls.from_context(context, made)
        return reply(client, msg, context)


_SERVED: WeakKeyDictionary[ClientApp, _Served] = WeakKeyDictionary()


def register(app: ClientApp, algorithm: str,
             make: Callable[[Context], NumPyClient | Mapping[str, Any]]) -> ClientApp:
    """Wire every phase of ``algorithm`` (and ``query.info``) onto a user's ``ClientApp``.

    ``make(context)`` returns this node's client, or its data as the client's constructor
    arguments (e.g. ``{"Xt": ..., "Xlag": ...}`` for FDBNL; every algorithm's keys are in
    ``docs/api/make.md``), from which the client is built with the node's ``partition-id``
    and ``num-partitions``. Settings come from the server with each message; the data never
    leave the node.

    One ClientApp may serve several algorithms: call ``register`` once per algorithm. Their
    phases share one handler, which answers each message with the algorithm that the
    message's config names (key ``"algorithm"``, which every strategy sends), else with the
    only registered algorithm that has the message's phase; a message that fits several and
    names none is refused with an error reply. Registering one algorithm twice on the same
    app raises a ValueError.
    """
    cls = client_class(algorithm)
    key = str(algorithm).strip().lower()
    served = _SERVED.setdefault(app, _Served())
    if key in served.algorithms:
        raise ValueError(f"{key!r} is already registered on this ClientApp")
    for message_type in ["query.info", *(f"train.{p}" for p in cls.phases)]:
        if message_type not in served.types:
            kind, _, phase = message_type.partition(".")
            getattr(app, kind)(phase)(served.handle)
            served.types.add(message_type)
    served.algorithms[key] = (cls, make)
    return app


def checked_lagged(Xt: np.ndarray, Xlag: np.ndarray, who: str = "client",
                   missing: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(Xt, Xlag)`` as float arrays, or a ValueError that names the problem (``missing``:
    NaN cells, missing values, are allowed; inf never)."""
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
        bad = np.isinf(X) if missing else ~np.isfinite(X)
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


def reply(client: NumPyClient, msg: Message, context: Context | None = None) -> Message:
    """Answer a ``train.<phase>`` or ``query.<phase>`` message with a NumPyClient.

    ``train.<phase>`` calls ``client.fit(arrays, {**config, "phase": phase})`` and replies
    with its arrays and metrics; ``query.<phase>`` calls ``client.get_properties``. With the
    node's ``context``, the reply carries the node's :func:`incarnation` (record
    :data:`NODE_RECORD`).
    """
    kind, _, phase = msg.metadata.message_type.partition(".")
    config: dict[str, Any] = dict(msg.content.config_records.get("config", {}))
    config["phase"] = phase or "default"
    if kind == "query":
        content = RecordDict({"properties": ConfigRecord(client.get_properties(config))})
    else:
        arrays = (msg.content["arrays"].to_numpy_ndarrays()
                  if "arrays" in msg.content.array_records else [])
        out, n, metrics = client.fit(arrays, config)
        content = RecordDict({"arrays": ArrayRecord([np.asarray(a) for a in out]),
                              "metrics": MetricRecord({"num-examples": int(n), **metrics})})
    if context is not None:
        content[NODE_RECORD] = ConfigRecord({"incarnation": incarnation(context)})
    return Message(content, reply_to=msg)


def section_context(context: Context, section: str) -> Context:
    """``context`` with its run config narrowed to the shared keys and ``section``'s keys
    without their prefix (what a family's glue reads); the node's state is the same object."""
    from fedcausal_flwr.settings import section_view

    return Context(run_id=context.run_id, node_id=context.node_id,
                   node_config=context.node_config, state=context.state,
                   run_config=section_view(section, context.run_config))
