"""An in-process Grid: runs a ServerApp's strategy against ClientApps without Ray or sockets.

Each node gets its own :class:`flwr.app.Context` (``partition-id``, ``num-partitions``,
persistent ``state``), exactly as in a simulation. Every message in both directions is kept in
``sent`` and ``received`` so tests can audit what crosses the wire. Unlike a real SuperLink it
does not serialise messages.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

ClientCallable = Callable[[Message, Context], Message]


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
        Extra ``node_config`` entries per partition id.
    """

    def __init__(self, client_app: ClientCallable, num_nodes: int,
                 run_config: Mapping[str, Any] | None = None,
                 node_configs: Mapping[int, Mapping[str, Any]] | None = None) -> None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
        self.client_app = client_app
        self.run_config = dict(run_config or {})
        self.contexts = {
            1000 + i: Context(run_id=1, node_id=1000 + i, state=RecordDict(),
                              node_config={"partition-id": i, "num-partitions": num_nodes,
                                           **dict((node_configs or {}).get(i, {}))},
                              run_config=self.run_config)
            for i in range(num_nodes)}
        self.sent: list[Message] = []
        self.received: list[Message] = []
        self._replies: dict[str, Message] = {}
        self._run = None

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

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        """Deliver each message to its node now; a raising client yields an error reply."""
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id
            self.sent.append(m)
            try:
                r = self.client_app(m, self.contexts[m.metadata.dst_node_id])
            except Exception:  # noqa: BLE001 - becomes an error reply, as on a SuperNode
                r = Message(Error(code=0, reason=traceback.format_exc()), reply_to=m)
            self.received.append(r)
            self._replies[m.metadata.message_id] = r
            ids.append(m.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        """The replies to ``message_ids`` that have not been pulled yet."""
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> list[Message]:
        """Push, then pull every reply (all are ready at once in process)."""
        return self.pull_messages(self.push_messages(messages))
