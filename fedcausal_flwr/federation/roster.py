"""The node roster: who the clients are, which node each is on, and how healthy that node is.

Discovery asks every SuperNode ``query.info`` and keeps the nodes that agree on the
federation's properties (:meth:`Roster.discover`). Nodes come and go. A node that does not
answer within the reply timeout is *unresponsive*: that costs the timeout once, and later
messages to it are not sent (each exchange drops it, named) until it answers a message the
server stopped waiting for, or comes back to the SuperLink; then its next message is waited for
only ``grace_s`` (``node-grace-s``, *probation*), and an answer makes it live again. Between
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from logging import INFO, WARNING
from typing import TYPE_CHECKING, Any

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.federation.errors import ProtocolStopped, TooFewReplies
from fedcausal_flwr.federation.wire import NODE_RECORD
from fedcausal_flwr.names import default_names, split

if TYPE_CHECKING:
    from fedcausal_flwr.federation.exchange import Exchange
    from fedcausal_flwr.federation.recorder import Recorder
    from fedcausal_flwr.federation.strategy import CausalStrategy


@dataclass(frozen=True)
class NodeInfo:
    """What a node said of itself in the ``query.info`` phase."""

    node_id: int
    cid: int
    num_partitions: int
    props: dict[str, Any]
    #: which life of the node answered (``federation.client.incarnation``; None: not said)
    incarnation: int | None = None


def incarnation_of(reply: Message) -> int | None:
    """The incarnation a reply carries (its ``node`` record), or None."""
    rec = reply.content.config_records.get(NODE_RECORD) if reply.has_content() else None
    value = rec.get("incarnation") if rec is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


PARTITION_HINT = ("give each SuperNode its own partition-id in its node config "
                  "(--node-config 'partition-id=<i> ...'); a node config without one claims 0")
"""How to fix a repeated partition id: a deployment's SuperNodes declare none by default."""


def parse_info(node: int, reply: Message | None, timeout: float) -> NodeInfo | str:
    """A node's ``query.info`` reply as :class:`NodeInfo`, or why it is unusable.

    The reply must carry a ``properties`` record with an integer ``partition-id`` >= 0 (and,
    if present, an integer ``num-partitions`` >= 0).
    """
    if reply is None:
        return f"no reply to query.info in {timeout:g}s"
    if reply.has_error():
        return f"error reply to query.info: {last_line(reply.error.reason)}"
    if "properties" not in reply.content.config_records:
        return ("query.info reply without a 'properties' record (has "
                f"{sorted(reply.content.keys()) or 'nothing'})")
    props = dict(reply.content["properties"])
    for key, needed in (("partition-id", True), ("num-partitions", False)):
        v = props.get(key)
        if v is None and not needed:
            continue
        if v is None:
            return "query.info reply without 'partition-id'"
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"query.info reply has {key} = {v!r}, not an integer >= 0"
    return NodeInfo(node, int(props["partition-id"]), int(props.get("num-partitions", 0)),
                    props, incarnation_of(reply))


def majority_props(infos: Sequence[NodeInfo], keys: Sequence[str]) -> dict[str, Any]:
    """The most common value of each of ``keys`` among the nodes that report it (ties: the
    lowest partition id's), for optional properties such as the variable names."""
    out = {}
    for k in keys:
        have = sorted((i for i in infos if k in i.props), key=lambda i: (i.cid, i.node_id))
        if have:
            out[k] = Counter(i.props[k] for i in have).most_common(1)[0][0]
    return out


def agreed_props(infos: Sequence[NodeInfo]) -> dict[str, Any]:
    """The majority of d and p, then the majority of the variable names among the nodes with
    that d and p (the default of ``CausalStrategy.expected_props``)."""
    keys = [k for k in ("d", "p") if all(k in i.props for i in infos)]
    if not keys:
        return majority_props(infos, ("names",))
    common = Counter(tuple(i.props[k] for k in keys) for i in infos).most_common(1)[0][0]
    want = dict(zip(keys, common, strict=True))
    agree = [i for i in infos if all(i.props[k] == v for k, v in want.items())]
    return {**want, **majority_props(agree, ("names",))}


def last_line(text: str) -> str:
    """The last non-empty line of an error reason (a client's traceback ends with it)."""
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error reply"


def node_named(node: int, reply: Message | None) -> str:
    """``node <id>``, with the partition id its reply claims when there is one."""
    try:
        pid = reply.content["properties"]["partition-id"]  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no reply, error reply, no properties, no partition-id
        return f"node {node}"
    return f"node {node} (partition-id {pid!r})"


def _short(value: object, limit: int = 200) -> object:
    """``value``, or its text cut to ``limit`` characters with the rest counted (a log line
    of a d = 1,000 federation's variable names is 6,000 characters)."""
    text = str(value)
    return value if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more)"


def _dropped_so_far(dropped: Sequence[str]) -> str:
    return f"; dropped: {'; '.join(dropped)}" if dropped else ""


class Roster:
    """The clients by partition id, the node each is on, and the health of those nodes.

    Parameters
    ----------
    strategy : CausalStrategy
        Whose settings and hooks it reads (``min_nodes``, ``node_wait_s``, ``timeout_s``,
        ``grace_s``, ``info_config``, ``expected_props``, ``optional_props``,
        ``rejoinable``).
    recorder : Recorder
        Where drops are counted and the round number is kept.
    """

    def __init__(self, strategy: CausalStrategy, recorder: Recorder) -> None:
        self.strategy = strategy
        self.recorder = recorder
        self.nodes: dict[int, NodeInfo] = {}  # by client id (partition id)
        self.reset()

    def reset(self) -> None:
        """Forget node health (a new run); the clients stay until discovery replaces them."""
        self.unresponsive: dict[int, str] = {}  # node id -> since when and why, in words
        self.probation: set[int] = set()  # node ids waited for only grace_s
        self.late: dict[str, tuple[int, str]] = {}  # message id -> (node id, message type)
        self.known: set[int] = set()  # node ids asked query.info (never asked twice)

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

    def _ask_info(self, grid: Grid, channel: Exchange, nodes: Sequence[int]
                  ) -> dict[int, Message]:
        cfg = {"algorithm": self.strategy.algorithm, **self.strategy.info_config()}
        return channel.send(grid, {n: RecordDict({"config": ConfigRecord(cfg)})
                                   for n in nodes}, "query.info")

    def discover(self, grid: Grid, channel: Exchange) -> dict[int, NodeInfo]:
        """Wait for the SuperNodes, ask each who it is, keep the consistent ones.

        Discovery waits up to ``node_wait_s`` for ``min_nodes`` usable nodes, whatever the
        reply timeout: a ``query.info`` reply later than ``timeout_s`` (a SuperNode still
        installing the app) is taken while fewer than ``min_nodes`` nodes are usable (and
        ``grace_s`` longer, for the other late nodes) and ``node_wait_s`` has not passed. A
        node whose ``query.info`` reply is missing then, an error or malformed (see
        :func:`parse_info`), disagrees with the majority's properties or repeats a partition
        id is dropped, named; the run goes on with the others.
        """
        s, drop = self.strategy, self.recorder.drop
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
                replies = self._ask_info(grid, channel, ids)
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
                        self.unresponsive.pop(node, None)
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
        if len(infos) < s.min_nodes:
            raise TooFewReplies(f"{len(infos)} usable SuperNodes after {time.time() - t0:.0f}s,"
                                f" min-nodes={s.min_nodes}{_dropped_so_far(dropped)}")
        want = s.expected_props(list(infos.values()))
        nodes: dict[int, NodeInfo] = {}
        for info in sorted(infos.values(), key=lambda i: (i.cid, i.node_id)):
            bad = {k: info.props.get(k) for k, v in want.items() if info.props.get(k) != v
                   and not (k in s.optional_props and k not in info.props)}
            who = f"client {info.cid} (node {info.node_id})"
            if bad:
                drop(who, f"reports {bad}, the federation has {want}")
            elif why := s.refused(info):
                drop(who, why)
            elif info.cid in nodes:
                drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is "
                          f"node {nodes[info.cid].node_id}); {PARTITION_HINT}")
            else:
                nodes[info.cid] = info
        if len(nodes) < s.min_nodes:
            raise TooFewReplies(f"{len(nodes)} consistent clients, min-nodes={s.min_nodes}"
                                f"{_dropped_so_far(dropped)}")
        log(INFO, "%s: %d clients %s", type(s).__name__, len(nodes),
            {k: _short(v) for k, v in want.items()})
        log(INFO, "%s", "partitions are bound to these node ids (bind-partitions=true): another "
            "node claiming one is refused" if s.bind_partitions else "partition ids are "
            "self-declared (bind-partitions=false): a new node id may take a missing client's "
            "place")
        return nodes

    def refresh(self, grid: Grid, channel: Exchange) -> None:
        """Between rounds: notice late answers, clients whose node left, and rejoins.

        Cheap by design: one ``grid.get_node_ids()`` (local to the SuperLink), one pull of
        the replies the server stopped waiting for, and ``query.info`` only to node ids never
        asked before, only while a client is missing, waited for at most ``grace_s`` (a
        later answer is taken at the next round).
        """
        self._poll_late(grid)
        present = set(grid.get_node_ids())
        rnd = self.recorder.round
        for cid, info in sorted(self.nodes.items()):
            node = info.node_id
            if node not in present:
                if not self.strategy.rejoinable:
                    raise ProtocolStopped(
                        f"client {cid} (node {node}) left the federation before round "
                        f"{rnd}; {type(self.strategy).__name__} keeps protocol state on the "
                        "node (context.state), which a restarted SuperNode has lost, so the "
                        "client cannot rejoin")
                if not self.unresponsive.get(node, "").startswith("left"):
                    log(WARNING, "client %d (node %d) left the federation before round %d; "
                        "waiting for it to rejoin", cid, node, rnd)
                    self.unresponsive[node] = f"left the SuperLink before round {rnd}"
                self.probation.discard(node)
            elif self.unresponsive.get(node, "").startswith(("left", "unavailable")):
                self.probation.add(node)  # online again under the same node id: retry it
        missing = [c for c, i in self.nodes.items()
                   if i.node_id in self.unresponsive and i.node_id not in self.probation]
        new = sorted(present - self.known)
        if not missing or not new:
            return
        self.known |= set(new)
        self.probation |= set(new)
        replies = self._ask_info(grid, channel, new)
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
            elif node in self.unresponsive:  # answered, or the SuperLink's word (message
                # expired, node unavailable): retry it; refresh() sets apart nodes gone
                self.probation.add(node)
                log(INFO, "%s: late reply to %s; its next message is waited for %.3gs",
                    self.who(node), kind, self.strategy.grace_s)

    def claim_refused(self, node: int, cid: int) -> str | None:
        """Why ``node`` may not hold client ``cid``'s partition, or None if it may.

        Only with ``bind-partitions``: the partition is bound to the node id that held it at
        discovery, so another node id claiming it is refused, whether or not that node still
        answers.
        """
        held = self.nodes.get(cid)
        if not self.strategy.bind_partitions or held is None or held.node_id == node:
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
        if not self.strategy.rejoinable:
            raise ProtocolStopped(
                f"client {cid} (node {info.node_id}) restarted under the same node id and has "
                f"lost the protocol state {type(self.strategy).__name__} keeps on the node "
                "(context.state); the run cannot go on without it")
        log(INFO, "client %d (node %d) restarted under the same node id; its server-held "
            "state carries on", cid, info.node_id)
        self.nodes[cid] = replace(info, incarnation=now)

    def _take_info(self, node: int, reply: Message) -> None:
        """A ``query.info`` answer between rounds: a restarted node takes its client's place
        (under ``bind-partitions`` only its own node id may, see :meth:`claim_refused`)."""
        self.probation.discard(node)
        self.unresponsive.pop(node, None)  # it answered
        info = parse_info(node, reply, self.strategy.grace_s)
        drop = self.recorder.drop
        if isinstance(info, str):
            drop(node_named(node, reply), info)
            return
        who, old = f"client {info.cid} (node {node})", self.nodes.get(info.cid)
        if old is None:
            drop(who, "joined after discovery; this run's clients were fixed then")
        elif refused := self.claim_refused(node, info.cid):
            drop(f"node {node} (partition-id {info.cid})", refused)
        elif old.node_id not in self.unresponsive:
            drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is node "
                      f"{old.node_id}, which still answers)")
        elif not self.strategy.rejoinable:
            raise ProtocolStopped(
                f"client {info.cid} came back as node {node} (was node {old.node_id}) and has "
                f"lost the protocol state {type(self.strategy).__name__} keeps on the node "
                "(context.state); the run cannot go on without it")
        elif info.props != old.props:
            diff = {k: (old.props.get(k), info.props.get(k))
                    for k in sorted(set(old.props) | set(info.props))
                    if old.props.get(k) != info.props.get(k)}
            drop(who, f"came back with other properties {{key: (was, now)}} = {diff}")
        else:
            self.unresponsive.pop(old.node_id, None)
            self.probation.discard(old.node_id)
            self.nodes[info.cid] = info
            log(INFO, "client %d rejoined as node %d (was node %d); its server-held state "
                "carries on", info.cid, node, old.node_id)
