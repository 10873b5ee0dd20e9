"""The node roster: who the clients are, which node each is on, and how healthy that node is.

Discovery asks every SuperNode ``query.info`` and keeps the nodes that agree on the
federation's properties (:meth:`Roster.discover`). Nodes come and go. A node that does not
answer within the reply timeout is *unresponsive*: that costs the timeout once, and later
messages to it are not sent (each exchange drops it, named) until it answers a message the
server stopped waiting for, or comes back to the SuperLink; then its next message is waited for
only ``grace_s`` (``node-grace-s``, *probation*), and an answer makes it live again. Each
node's health is one :class:`NodeHealth` (a :class:`Health` with its reason, in words), which
only the roster changes, through its verbs (:meth:`Roster.answered`,
:meth:`Roster.mark_unresponsive`, :meth:`Roster.mark_unavailable`, :meth:`Roster.leave`,
:meth:`Roster.retry`, :meth:`Roster.rejoin`). Between
rounds (:meth:`Roster.refresh`) a client whose node left the SuperLink or stopped answering is
looked for among new node ids: a restarted SuperNode (new node id, same ``partition-id`` and
properties) takes the client's place, and the server-held state (kept by partition id) carries
on. A protocol that keeps state on the node (``rejoinable = False``) stops instead, naming the
client.

Partition ids are self-declared (node config ``partition-id``). With ``bind-partitions``
(meant for SuperNode authentication, under which Flower keeps a registered key's node id
across restarts of its SuperNode) a client's partition stays with the node id that held it at
discovery: that node may leave and come back under its id (retried as above), and another
node id claiming the partition is refused, named (:meth:`Roster.claim_refused`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from logging import INFO, WARNING
from typing import Any, Protocol

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.federation.errors import ProtocolStopped, TooFewReplies
from fedcausal_flwr.federation.limits import Limits
from fedcausal_flwr.federation.nodes import (
    PARTITION_HINT,
    NodeInfo,
    agreed_props,
    incarnation_of,
    node_named,
    parse_info,
)
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.names import default_names, split


class Health(Enum):
    """Where a node stands: it answers (``LIVE``), it did not answer in time
    (``UNRESPONSIVE``), the SuperLink answered for it (``UNAVAILABLE``), or it is gone from
    the SuperLink (``LEFT``). A node that is not live is not sent to, unless on probation."""

    LIVE = "live"
    UNRESPONSIVE = "unresponsive"
    UNAVAILABLE = "unavailable"
    LEFT = "left"


@dataclass(frozen=True)
class NodeHealth:
    """A node's :class:`Health`, since when and why (``reason``, the words its drops quote),
    and whether it is on probation (its next message is waited for only ``grace_s``: a node
    retried after it was down, or a new SuperNode asked ``query.info``)."""

    state: Health = Health.LIVE
    reason: str = ""
    probation: bool = False

    @property
    def down(self) -> bool:
        """Not live (unresponsive, unavailable or left)."""
        return self.state is not Health.LIVE


class Transport(Protocol):
    """What the roster sends ``query.info`` through (an
    :class:`~fedcausal_flwr.federation.exchange.Exchange`)."""

    grid: Grid

    def send(self, node_cfg: Mapping[int, RecordDict], message_type: str
             ) -> dict[int, Message]:
        """Send each node its content; the replies by node id."""
        ...


class Roster:
    """The clients by partition id, the node each is on, and the health of those nodes.

    Parameters
    ----------
    recorder : Recorder
        Where drops are counted and the round number is kept.
    limits : Limits
        The quorum and the waits (``min_nodes``, ``node_wait_s``, ``timeout_s``, ``grace_s``).
    name : str
        The strategy's name, for log lines and the errors that stop a run.
    rejoinable : bool
        Whether a restarted SuperNode may take its client's place (see
        ``ProtocolHooks.rejoinable``).
    bind_partitions : bool
        Whether only the node id that held a partition at discovery may hold it later.
    nodes : mapping, optional
        The clients so far (discovery replaces them).
    """

    def __init__(self, recorder: Recorder, limits: Limits | None = None, *,
                 name: str = "strategy", rejoinable: bool = True, bind_partitions: bool = False,
                 nodes: Mapping[int, NodeInfo] | None = None) -> None:
        self.recorder, self.limits, self.name = recorder, limits or Limits(), name
        self.rejoinable, self.bind_partitions = rejoinable, bind_partitions
        self.nodes: dict[int, NodeInfo] = dict(nodes or {})  # by client id (partition id)
        self.info: dict[str, Any] = {}  # the query.info config (set by discover)
        self._health: dict[int, NodeHealth] = {}  # node id -> health, for nodes not plainly live
        self.late: dict[str, tuple[int, str]] = {}  # message id -> (node id, message type)
        self.known: set[int] = set()  # node ids asked query.info (never asked twice)

    # ---- node health: read ------------------------------------------------------------
    def health(self, node: int) -> NodeHealth:
        """Node ``node``'s health (live if never said otherwise)."""
        return self._health.get(node, NodeHealth())

    def skipped(self, node: int) -> str | None:
        """Why a message to ``node`` is not sent (down and not on probation), or None."""
        h = self.health(node)
        return h.reason if h.down and not h.probation else None

    def wait_s(self, node: int) -> float:
        """How long a message to ``node`` is waited for: ``grace_s`` on probation, else
        ``timeout_s``."""
        return self.limits.grace_s if self.health(node).probation else self.limits.timeout_s

    # ---- node health: the verbs that change it ------------------------------------------
    def answered(self, node: int) -> bool:
        """``node`` answered: live, off probation. Whether it was down before."""
        return self._health.pop(node, NodeHealth()).down

    def mark_unresponsive(self, node: int, kind: str) -> bool:
        """No reply to a ``kind`` message in time: off probation, and unresponsive unless it
        was down already (its first reason stays). Whether it is newly down."""
        h = self.health(node)
        if h.down:
            self._health[node] = replace(h, probation=False)
            return False
        self._health[node] = NodeHealth(Health.UNRESPONSIVE,
                                        f"no reply to {kind} since round {self.recorder.round}")
        return True

    def mark_unavailable(self, node: int, why: str) -> None:
        """The SuperLink answered for ``node`` (``why``: its error): unavailable."""
        self._health[node] = NodeHealth(
            Health.UNAVAILABLE, f"unavailable since round {self.recorder.round} "
                                f"({why.rstrip('.')})")

    def leave(self, node: int) -> bool:
        """``node`` is gone from the SuperLink: left, off probation. Whether it is newly
        left."""
        h = self.health(node)
        if h.state is Health.LEFT:
            self._health[node] = replace(h, probation=False)
            return False
        self._health[node] = NodeHealth(Health.LEFT,
                                        f"left the SuperLink before round {self.recorder.round}")
        return True

    def retry(self, node: int) -> None:
        """Put ``node`` on probation: its next message is sent and waited for ``grace_s``."""
        self._health[node] = replace(self.health(node), probation=True)

    def rejoin(self, cid: int, info: NodeInfo) -> None:
        """Client ``cid`` is on ``info``'s node now; its old node's health is forgotten."""
        self._health.pop(self.nodes[cid].node_id, None)
        self.nodes[cid] = info

    # ---- messages the server stopped waiting for --------------------------------------
    def expect_late(self, message_id: str, node: int, kind: str) -> None:
        """A ``kind`` message to ``node`` not answered in time: its answer may come later."""
        self.late[message_id] = (node, kind)

    def late_taken(self, message_id: str) -> None:
        """A late answer to ``message_id`` was taken (no longer looked for)."""
        self.late.pop(message_id, None)

    # ---- the clients -------------------------------------------------------------------
    def who(self, node: int) -> str:
        """``client <partition id> (node <node id>)``, or ``node <node id>`` if unknown."""
        cid = next((c for c, i in self.nodes.items() if i.node_id == node), None)
        return f"node {node}" if cid is None else f"client {cid} (node {node})"

    def names(self, d: int, prefix: str = "x") -> list[str]:
        """The variable names the kept nodes reported (they agree), else ``x0, x1, ...``."""
        for info in self.nodes.values():
            names = split(info.props.get("names"))
            if names is not None and len(names) == d:
                return names
        return default_names(d, prefix)

    def _ask_info(self, channel: Transport, nodes: Sequence[int]) -> dict[int, Message]:
        return channel.send({n: RecordDict({"config": ConfigRecord(self.info)})
                             for n in nodes}, "query.info")

    def discover(self, channel: Transport, info: Mapping[str, Any], *,
                 expected_props: Callable[[list[NodeInfo]], dict[str, Any]] = agreed_props,
                 refused: Callable[[NodeInfo], str | None] = lambda info: None,
                 optional_props: Sequence[str] = ()) -> dict[int, NodeInfo]:
        """Wait for the SuperNodes, ask each who it is, keep the consistent ones.

        Discovery waits up to ``node_wait_s`` for ``min_nodes`` usable nodes, whatever the
        reply timeout: a ``query.info`` reply later than ``timeout_s`` (a SuperNode still
        installing the app) is taken while fewer than ``min_nodes`` nodes are usable (and
        ``grace_s`` longer, for the other late nodes) and ``node_wait_s`` has not passed. A
        node whose ``query.info`` reply is missing then, an error or malformed (see
        :func:`parse_info`), disagrees with the majority's properties or repeats a partition
        id is dropped, named; the run goes on with the others.

        ``info``: the ``query.info`` config (the algorithm and what every client must share);
        ``expected_props(infos)``: the properties every node must report (a node may leave
        out ``optional_props``); ``refused(info)``: why an agreeing node is still dropped.
        """
        s, drop, grid = self.limits, self.recorder.drop, channel.grid
        self.info = dict(info)
        t0 = time.time()
        infos: dict[int, NodeInfo] = {}
        asked: set[int] = set()
        expected = s.min_nodes
        late: dict[str, int] = {}  # query.info message id -> node id, not answered in time
        enough_at = None  # when late replies made min_nodes usable nodes

        def take(node: int, reply: Message | None) -> None:
            nonlocal expected
            info = parse_info(node, reply, s.timeout_s)
            if isinstance(info, str):
                drop(node_named(node, reply), info)
                return
            infos[node] = info
            expected = max(expected, info.num_partitions)

        while True:
            ids = sorted(set(grid.get_node_ids()) - asked)
            if ids:
                asked |= set(ids)
                before = set(self.late)
                replies = self._ask_info(channel, ids)
                for mid in set(self.late) - before:  # kept waiting for below
                    late[mid] = self.late.pop(mid)[0]
                for node in ids:
                    if node in replies:
                        take(node, replies[node])
            if late:  # replies later than the reply timeout count until node_wait_s
                for r in grid.pull_messages(list(late)):
                    node = late.pop(r.metadata.reply_to_message_id, None)
                    if node is None:
                        continue
                    if r.metadata.src_node_id == node:
                        self.answered(node)
                        log(INFO, "node %d answered query.info after %.3gs", node,
                            time.time() - t0)
                    take(node, r)
                    if enough_at is None and len(infos) >= s.min_nodes:
                        enough_at = time.time()
            now = time.time()
            if now - t0 > s.node_wait_s or (len(asked) >= expected and (
                    not late or (len(infos) >= s.min_nodes
                                 and (enough_at is None or now - enough_at >= s.grace_s)))):
                break
            time.sleep(0.5 if not late else 0.02)
        for mid, node in late.items():  # still no answer: a late one is noticed as today
            self.late[mid] = (node, "query.info")
            drop(f"node {node}", parse_info(node, None, s.timeout_s))
        self.known |= asked
        dropped = self.recorder.dropped
        silent = silent_nodes(sorted(late.values()), s.node_wait_s)
        if silent:
            log(WARNING, "%s", silent)
        if len(infos) < s.min_nodes:
            raise TooFewReplies(f"{len(infos)} usable SuperNodes after {time.time() - t0:.0f}s,"
                                f" min-nodes={s.min_nodes}{_dropped_so_far(dropped)}"
                                + (f". {silent}" if silent else ""))
        want = expected_props(list(infos.values()))
        nodes: dict[int, NodeInfo] = {}
        for info in sorted(infos.values(), key=lambda i: (i.cid, i.node_id)):
            bad = {k: info.props.get(k) for k, v in want.items() if info.props.get(k) != v
                   and not (k in optional_props and k not in info.props)}
            who = f"client {info.cid} (node {info.node_id})"
            if bad:
                drop(who, f"reports {_short(bad)}, the federation has {_short(want)}")
            elif why := refused(info):
                drop(who, why)
            elif info.cid in nodes:
                drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is "
                          f"node {nodes[info.cid].node_id}); {PARTITION_HINT}")
            else:
                nodes[info.cid] = info
        if len(nodes) < s.min_nodes:
            raise TooFewReplies(f"{len(nodes)} consistent clients, min-nodes={s.min_nodes}"
                                f"{_dropped_so_far(dropped)}")
        log(INFO, "%s: %d clients %s", self.name, len(nodes),
            {k: _short(v) for k, v in want.items()})
        log(INFO, "%s", "partitions are bound to these node ids (bind-partitions=true): another "
            "node claiming one is refused" if self.bind_partitions else "partition ids are "
            "self-declared (bind-partitions=false): a new node id may take a missing client's "
            "place")
        return nodes

    def refresh(self, channel: Transport) -> None:
        """Between rounds: notice late answers, clients whose node left, and rejoins.

        Cheap by design: one ``grid.get_node_ids()`` (local to the SuperLink), one pull of
        the replies the server stopped waiting for, and ``query.info`` only to node ids never
        asked before, only while a client is missing, waited for at most ``grace_s`` (a
        later answer is taken at the next round).
        """
        self._poll_late(channel.grid)
        present = set(channel.grid.get_node_ids())
        rnd = self.recorder.round
        for cid, info in sorted(self.nodes.items()):
            node = info.node_id
            if node not in present:
                if not self.rejoinable:
                    raise ProtocolStopped(
                        f"client {cid} (node {node}) left the federation before round "
                        f"{rnd}; {self.name} keeps protocol state on the "
                        "node (context.state), which a restarted SuperNode has lost, so the "
                        "client cannot rejoin")
                if self.leave(node):
                    log(WARNING, "client %d (node %d) left the federation before round %d; "
                        "waiting for it to rejoin", cid, node, rnd)
            elif self.health(node).state in (Health.LEFT, Health.UNAVAILABLE):
                self.retry(node)  # online again under the same node id: retry it
        missing = [c for c, i in self.nodes.items() if self.skipped(i.node_id) is not None]
        new = sorted(present - self.known)
        if not missing or not new:
            return
        self.known |= set(new)
        for node in new:
            self.retry(node)
        replies = self._ask_info(channel, new)
        for node in new:
            if node in replies:
                self._take_info(node, replies[node])

    def _poll_late(self, grid: Grid) -> None:
        """Replies the server stopped waiting for: a node that answers is put on probation,
        a late ``query.info`` answer may be a rejoin."""
        if not self.late:
            return
        for r in grid.pull_messages(list(self.late)):
            mid = r.metadata.reply_to_message_id
            if mid not in self.late:
                continue
            node, kind = self.late.pop(mid)
            if kind == "query.info" and r.metadata.src_node_id == node:
                self._take_info(node, r)
            elif self.health(node).down:  # answered, or the SuperLink's word (message
                # expired, node unavailable): retry it; refresh() sets apart nodes gone
                self.retry(node)
                log(INFO, "%s: late reply to %s; its next message is waited for %.3gs",
                    self.who(node), kind, self.limits.grace_s)

    def claim_refused(self, node: int, cid: int) -> str | None:
        """Why ``node`` may not hold client ``cid``'s partition, or None if it may.

        Only with ``bind-partitions``: the partition is bound to the node id that held it at
        discovery, so another node id claiming it is refused, whether or not that node still
        answers.
        """
        held = self.nodes.get(cid)
        if not self.bind_partitions or held is None or held.node_id == node:
            return None
        return (f"claims client {cid}, whose partition is bound to node {held.node_id} "
                "(bind-partitions=true: only that node may rejoin); refused")

    def check_incarnation(self, cid: int, reply: Message) -> None:
        """Client ``cid``'s node answered in a new life (:func:`incarnation_of` changed: a
        SuperNode restarted, with an empty ``context.state``, under the same node id, which
        the SuperLink does not show). A protocol with state on the node stops, naming the
        client; otherwise the server-held state carries on and the new life is recorded."""
        info, now = self.nodes[cid], incarnation_of(reply)
        if info.incarnation is None or now is None or now == info.incarnation:
            return
        if not self.rejoinable:
            raise ProtocolStopped(
                f"client {cid} (node {info.node_id}) restarted under the same node id and has "
                f"lost the protocol state {self.name} keeps on the node "
                "(context.state); the run cannot go on without it")
        log(INFO, "client %d (node %d) restarted under the same node id; its server-held "
            "state carries on", cid, info.node_id)
        self.nodes[cid] = replace(info, incarnation=now)

    def _take_info(self, node: int, reply: Message) -> None:
        """A ``query.info`` answer between rounds: a restarted node takes its client's place
        (under ``bind-partitions`` only its own node id may, see :meth:`claim_refused`)."""
        self.answered(node)
        info = parse_info(node, reply, self.limits.grace_s)
        drop = self.recorder.drop
        if isinstance(info, str):
            drop(node_named(node, reply), info)
            return
        who, old = f"client {info.cid} (node {node})", self.nodes.get(info.cid)
        if old is None:
            drop(who, "joined after discovery; this run's clients were fixed then")
        elif refused := self.claim_refused(node, info.cid):
            drop(f"node {node} (partition-id {info.cid})", refused)
        elif not self.health(old.node_id).down:
            drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is node "
                      f"{old.node_id}, which still answers)")
        elif not self.rejoinable:
            raise ProtocolStopped(
                f"client {info.cid} came back as node {node} (was node {old.node_id}) and has "
                f"lost the protocol state {self.name} keeps on the node "
                "(context.state); the run cannot go on without it")
        elif info.props != old.props:
            diff = {k: (old.props.get(k), info.props.get(k))
                    for k in sorted(set(old.props) | set(info.props))
                    if old.props.get(k) != info.props.get(k)}
            drop(who, f"came back with other properties {{key: (was, now)}} = {diff}")
        else:
            self.rejoin(info.cid, info)
            log(INFO, "client %d rejoined as node %d (was node %d); its server-held state "
                "carries on", info.cid, node, old.node_id)


def _short(value: object, limit: int = 200) -> object:
    """``value``, or its text cut to ``limit`` characters with the rest counted (a log line
    of a d = 1,000 federation's variable names is 6,000 characters)."""
    text = str(value)
    return value if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more)"


SILENT_NODES = (
    "most likely their ClientApp did not start in time: a SuperNode starts a flwr-clientapp "
    "process per message, which must claim its task within Flower's window, and on a busy "
    "machine its start-up takes longer (the SuperNode's log then shows 'Runtime task-token "
    "authentication failed' and new flwr-clientapp processes). What to do: less load on the "
    "nodes' machines (or fewer SuperNodes on one), a longer node-wait-s, or the App in a "
    "simulation first")
"""Why SuperNodes connect but never answer, and what to do."""


def silent_nodes(nodes: Sequence[int], waited: float) -> str:
    """A line on the ``nodes`` that connected but never answered ``query.info`` in
    ``waited`` seconds, with :data:`SILENT_NODES`; empty when there are none."""
    if not nodes:
        return ""
    return (f"{len(nodes)} SuperNode(s) connected but never answered query.info within "
            f"node-wait-s={waited:g} s (node ids {', '.join(map(str, nodes))}): "
            + SILENT_NODES)


def _dropped_so_far(dropped: Sequence[str]) -> str:
    return f"; dropped: {'; '.join(dropped)}" if dropped else ""


