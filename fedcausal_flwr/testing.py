"""An in-process Grid: runs a ServerApp's strategy against ClientApps without Ray or sockets.

Each node gets its own :class:`flwr.app.Context` (``partition-id``, ``num-partitions``,
persistent ``state``), exactly as in a simulation. Every message in both directions is kept in
``sent`` and ``received`` so tests can audit what crosses the wire. Unlike a real SuperLink it
does not serialise messages.

Faults of nodes, as a real SuperLink shows them: :meth:`InProcessGrid.restart_node` replaces a
partition's node by a new node id with a fresh ``state`` (a restarted SuperNode without
authentication; ``keep_id=True``: an authenticated one, which Flower gives its registered key's
node id again); :meth:`InProcessGrid.add_node` registers a node, under a given node id if one
is named (a SuperNode back under its key, or another key claiming a partition);
:meth:`InProcessGrid.hang` keeps a node's messages unanswered until
:meth:`InProcessGrid.wake` answers them late; a message to a node id that is not registered
is refused (``None`` in place of its message id); :meth:`InProcessGrid.delay` makes a node's
next replies late by a given time (a slow node: a cold app install, a long step). A node
whose ``client_app`` returns None for a message never answers that message (a node that hangs
on one phase).

The fault-injection kit that runs on it (faulty, silent and lying nodes, the fault matrix) is
the tests' own: ``tests/helpers/faults.py``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from fedcausal_flwr.data.nodefiles import ALLOW_RUN_CONFIG_PATHS

ClientCallable = Callable[[Message, Context], Message | None]


class InProcessGrid(Grid):
    """A Grid whose nodes are ``client_app(message, context)`` calls in this process.

    Parameters
    ----------
    client_app : callable
        A :class:`flwr.clientapp.ClientApp` (or any ``(Message, Context) -> Message``).
    num_nodes : int
        Number of nodes; node ``i`` has ``partition-id = i``.
    run_config : mapping
        The run config every node sees.
    node_configs : mapping, optional
        Extra ``node_config`` entries per partition id. Every node has
        ``allow-run-config-paths=true`` unless these say otherwise: in process, the submitter
        is the nodes' operator, so the run config's data paths (DREAM4, NetSim ...) are read.
    """

    def __init__(self, client_app: ClientCallable, num_nodes: int,
                 run_config: Mapping[str, Any] | None = None,
                 node_configs: Mapping[int, Mapping[str, Any]] | None = None) -> None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
        self.client_app = client_app
        self.run_config = dict(run_config or {})
        self.node_configs = {i: {"partition-id": i, "num-partitions": num_nodes,
                                 ALLOW_RUN_CONFIG_PATHS: True,
                                 **dict((node_configs or {}).get(i, {}))}
                             for i in range(num_nodes)}
        self.contexts: dict[int, Context] = {}
        self._delays: dict[int, list[float]] = {}  # node id -> delays of its next replies
        self._ready: dict[str, float] = {}  # message id -> when its reply may be pulled
        self._next_id = 1000
        for i in range(num_nodes):
            self.add_node(i)
        self.sent: list[Message] = []
        self.received: list[Message] = []
        self._replies: dict[str, Message] = {}
        self._hung: dict[int, list[Message]] = {}
        self._run = None

    # ---- node faults ------------------------------------------------------------------
    def node_id(self, partition_id: int) -> int:
        """The registered node id of ``partition_id`` (the newest, if several)."""
        ids = [n for n, c in self.contexts.items()
               if c.node_config["partition-id"] == partition_id]
        if not ids:
            raise KeyError(f"no node holds partition {partition_id}")
        return ids[-1]

    def add_node(self, partition_id: int, node_config: Mapping[str, Any] | None = None, *,
                 node_id: int | None = None) -> int:
        """Register a node (empty ``state``) for ``partition_id``; its node id.

        Its node config is the partition's (given at construction) updated by
        ``node_config``. ``node_id``: the id it comes back under (an authenticated SuperNode
        restarted with its registered key), which must not be registered now; default: a new
        id (1000 + i at construction).
        """
        if node_id is None:
            node, self._next_id = self._next_id, self._next_id + 1
        elif node_id in self.contexts:
            raise ValueError(f"node {node_id} is registered already")
        else:
            node = int(node_id)
        cfg = {**self.node_configs.get(partition_id, {"partition-id": partition_id,
                                                      ALLOW_RUN_CONFIG_PATHS: True}),
               **dict(node_config or {})}
        self.contexts[node] = Context(run_id=1, node_id=node, state=RecordDict(),
                                      node_config=cfg, run_config=self.run_config)
        return node

    def remove_node(self, node_id: int) -> None:
        """Unregister ``node_id``: its messages get no reply, new ones are refused."""
        del self.contexts[node_id]
        self._hung.pop(node_id, None)

    def restart_node(self, partition_id: int, *, keep_id: bool = False) -> int:
        """A restarted SuperNode: the partition's node leaves and comes back with the same
        partition id and a fresh ``state``, under a new node id (no authentication) or, with
        ``keep_id``, its old one (SuperNode authentication). Returns the node id."""
        old = self.node_id(partition_id)
        self.remove_node(old)
        return self.add_node(partition_id, node_id=old if keep_id else None)

    def hang(self, node_id: int) -> None:
        """Keep every message to ``node_id`` unanswered (a hung node) until :meth:`wake`."""
        self._hung.setdefault(node_id, [])

    def wake(self, node_id: int) -> None:
        """Answer the messages kept by :meth:`hang` now (late), and the next ones at once."""
        for m in self._hung.pop(node_id, []):
            self._deliver(m)

    def delay(self, node_id: int, seconds: float, count: int = 1) -> None:
        """Make ``node_id``'s replies to its next ``count`` messages late: each can be pulled
        only ``seconds`` after its message was pushed (a slow node, not a hung one)."""
        self._delays.setdefault(node_id, []).extend([float(seconds)] * count)

    def set_run(self, run_id: int) -> None:  # noqa: D102
        self._run = run_id

    @property
    def run(self):  # noqa: D102
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:  # noqa: D102
        return Message(content, dst_node_id=dst_node_id, message_type=message_type,
                       group_id=group_id, ttl=ttl)

    def get_node_ids(self) -> list[int]:  # noqa: D102
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> list[str | None]:
        """Deliver each message to its node now; a raising client yields an error reply.

        A message to an unregistered node id is refused (``None``), as by a SuperLink; one
        to a hung node waits for :meth:`wake`.
        """
        ids: list[str | None] = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id
            node = m.metadata.dst_node_id
            if node not in self.contexts:
                ids.append(None)
                continue
            self.sent.append(m)
            if self._delays.get(node):
                self._ready[m.metadata.message_id] = time.time() + self._delays[node].pop(0)
            if node in self._hung:
                self._hung[node].append(m)
            else:
                self._deliver(m)
            ids.append(m.metadata.message_id)
        return ids

    def _deliver(self, m: Message) -> None:
        try:
            r = self.client_app(m, self.contexts[m.metadata.dst_node_id])
        except Exception:  # noqa: BLE001 - becomes an error reply, as on a SuperNode
            r = Message(Error(code=0, reason=traceback.format_exc()), reply_to=m)
        if r is None:  # the client app withholds this reply: never answered
            return
        self.received.append(r)
        self._replies[m.metadata.message_id] = r

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        """The replies to ``message_ids`` that have not been pulled yet."""
        now = time.time()
        return [self._replies.pop(i) for i in list(message_ids)
                if i in self._replies and self._ready.get(i, 0.0) <= now]

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> list[Message]:
        """Push, then pull every reply (all are ready at once in process)."""
        return self.pull_messages(self.push_messages(messages))
