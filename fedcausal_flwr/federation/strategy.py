"""Base of the package's Message-API strategies.

Our protocols are iterative multi-party algorithms, not FedAvg rounds, so each strategy drives
the Grid from :meth:`CausalStrategy.start`: discover the nodes (phase ``query.info``), then
validated :meth:`CausalStrategy.exchange` calls inside :meth:`CausalStrategy.rounds`. The base
owns every round: bytes, timing, evaluation, progress lines, checkpoints and status. A protocol
with one exchange per round only fills in the round hooks (``setup``, ``payload``,
``reply_shapes``, ``aggregate``, ``record``, ``estimates``, ``done``); a multi-phase protocol
overrides :meth:`run_rounds` and calls :meth:`exchange` once per phase inside ``rounds()``.

Nodes come and go. A node that does not answer within the reply timeout is *unresponsive*:
that costs the timeout once, and later messages to it are not sent (each exchange drops it,
named) until it answers a message the server stopped waiting for, or comes back to the
SuperLink; then its next message is waited for only ``grace_s`` (``node-grace-s``), and an
answer makes it live again. Between rounds (:meth:`refresh_nodes`) a client whose node left
the SuperLink or stopped answering is looked for among new node ids: a restarted SuperNode
(new node id, same ``partition-id`` and properties) takes the client's place, and the
server-held state (kept by partition id) carries on. A protocol that keeps state on the node
(``rejoinable = False``) stops instead, naming the client.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from logging import ERROR, INFO, WARNING
from typing import Any, ClassVar

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fedcausal_flwr.federation.replies import (  # noqa: F401 - re-exported for strategies
    MAX_ABS,
    SCREEN_FACTOR,
    SCREEN_FLOOR,
    Expected,
    Shape,
    Spec,
    array_bytes,
    outliers,
    peak,
    reply_problem,
)
from fedcausal_flwr.federation.wire import WireLog
from fedcausal_flwr.names import default_names, split
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.settings import RunSettings

Payload = tuple[list[np.ndarray], dict[str, Any]]
EvaluateFn = Callable[[Mapping[str, Any], list[int]], dict[str, Any]]


class TooFewReplies(RuntimeError):
    """Fewer valid replies than ``min_nodes``: the run stops and keeps what it has."""


class ProtocolStopped(TooFewReplies):
    """A party the protocol cannot do without failed or misbehaved."""


class Diverged(TooFewReplies):
    """The model diverged (non-finite or exploding parameters): the run stops, keeps every
    finished round, and its status says which round and what happened."""


@dataclass(frozen=True)
class NodeInfo:
    """What a node said of itself in the ``query.info`` phase."""

    node_id: int
    cid: int
    num_partitions: int
    props: dict[str, Any]


def parse_info(node: int, reply: Message | None, timeout: float) -> NodeInfo | str:
    """A node's ``query.info`` reply as :class:`NodeInfo`, or why it is unusable.

    The reply must carry a ``properties`` record with an integer ``partition-id`` >= 0 (and,
    if present, an integer ``num-partitions`` >= 0).
    """
    if reply is None:
        return f"no reply to query.info in {timeout:g}s"
    if reply.has_error():
        return f"error reply to query.info: {_last_line(reply.error.reason)}"
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
                    props)


def as_arrays(initial_arrays: Any) -> list[np.ndarray]:
    """Flower's ``ArrayRecord`` (or a list of arrays) as a list of numpy arrays."""
    if isinstance(initial_arrays, ArrayRecord):
        return initial_arrays.to_numpy_ndarrays()
    if isinstance(initial_arrays, Mapping):
        return [np.asarray(a) for a in initial_arrays.values()]
    return [np.asarray(a) for a in initial_arrays]


class CausalStrategy(Strategy):
    """Discovery, validated exchanges, rounds, history, checkpoints and the result contract.

    Parameters
    ----------
    settings : RunSettings
        The algorithm's settings (a subclass of :class:`RunSettings`: ``min_nodes``,
        ``node_wait_s``, ``timeout_s`` and the algorithm's own fields); default: its class's
        defaults, the App's defaults.
    evaluate_fn : callable, optional
        ``evaluate_fn(estimates, client_ids) -> dict`` of metrics, called after each round
        (e.g. SHD against a known truth). It sees estimates only, never client data.
    checkpoint : callable, optional
        ``checkpoint(result)`` when the run starts, after each round (``status``
        ``"running"``) and once more at its end with the final status, so a crash never loses
        finished rounds.
    audit : bool
        Keep every message's shapes, dtypes and config keys in :attr:`wire_log` (for tests
        that audit the wire). Default False: :attr:`wire_log` keeps bounded per-phase
        summaries only (counts, bytes, shapes seen).
    **changes
        Settings fields to change, e.g. ``FDBNL(min_nodes=3)``.
    """

    algorithm = "base"
    settings_class: ClassVar[type[RunSettings]] = RunSettings
    #: Whether a restarted SuperNode may take its client's place mid-run: True when every
    #: piece of protocol state lives on the server (by partition id), so the new node loses
    #: nothing; False when clients keep state in ``context.state`` (the run then stops,
    #: naming the client, when one leaves).
    rejoinable: ClassVar[bool] = True
    progress_keys: tuple[str, ...] = ("n_clients", "dropped", "seconds")
    round_label = "round"
    screen_factor: ClassVar[float] = SCREEN_FACTOR
    screen_floor: ClassVar[float] = SCREEN_FLOOR
    #: Properties a node may leave out (e.g. a user's own NumPyClient that states no variable
    #: names); a node that reports one must report the federation's value.
    optional_props: ClassVar[tuple[str, ...]] = ("names", "y-name")

    def __init__(self, settings: RunSettings | None = None, *,
                 evaluate_fn: EvaluateFn | None = None,
                 checkpoint: Callable[[RunResult], None] | None = None,
                 audit: bool = False, **changes: Any) -> None:
        base = self.settings_class() if settings is None else settings
        if not isinstance(base, self.settings_class):
            raise TypeError(f"{type(self).__name__} takes {self.settings_class.__name__}, got "
                            f"{type(base).__name__}")
        unknown = sorted(set(changes) - {f for f, _ in base.items()})
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown settings {unknown}; "
                            f"{self.settings_class.__name__} has {[f for f, _ in base.items()]}")
        self.settings = base.replace(**changes) if changes else base
        self.evaluate_fn = evaluate_fn
        self.checkpoint = checkpoint
        self.nodes: dict[int, NodeInfo] = {}  # by client id (partition id)
        self.wire_log = WireLog(audit=audit)
        self.reply_metrics: dict[int, dict[str, Any]] = {}
        self._reset()

    def _reset(self) -> None:
        self._round = 0
        self._bytes = {"up": 0, "down": 0}
        self._exchanges = {"round": 0, "total": 0}  # round trips: a deployment's unit of cost
        self._dropped: list[str] = []
        self._accepted = 0
        self._took_part: set[int] = set()  # client ids with at least one valid reply
        self._max_rounds: int | None = None
        self._timeout: float | None = None
        self._grid: Grid | None = None
        self._unresponsive: dict[int, str] = {}  # node id -> since when and why, in words
        self._probation: set[int] = set()  # node ids waited for only grace_s
        self._late: dict[str, tuple[int, str]] = {}  # message id -> (node id, message type)
        self._known: set[int] = set()  # node ids asked query.info (never asked twice)

    @property
    def min_nodes(self) -> int:
        """Fewest valid replies an exchange needs."""
        return self.settings.min_nodes

    @property
    def node_wait_s(self) -> float:
        """How long discovery waits for SuperNodes."""
        return self.settings.node_wait_s

    @property
    def timeout_s(self) -> float:
        """Reply timeout of one exchange (``start(timeout=...)`` overrides the settings')."""
        return self.settings.timeout_s if self._timeout is None else self._timeout

    @property
    def grace_s(self) -> float:
        """Wait for a node on probation or a new SuperNode (at most :attr:`timeout_s`)."""
        return min(self.settings.grace_s, self.timeout_s)

    # Flower's FedAvg-style hooks are not used: the protocol runs in start().
    def configure_train(self, server_round, arrays, config, grid):  # noqa: D102
        raise NotImplementedError(f"{type(self).__name__} drives the Grid from start()")

    aggregate_train = configure_evaluate = aggregate_evaluate = configure_train

    def summary(self) -> None:
        """Log the strategy's settings."""
        log(INFO, "%s: %s", type(self).__name__, self.config())

    def config(self) -> dict[str, Any]:
        """Settings that go into ``result.json``."""
        return self.settings.asdict()

    # ---- round hooks (one exchange per round) ------------------------------------------
    phase = "local"

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Initialise server state once the nodes are known."""
        raise NotImplementedError

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Replace the initial model by ``arrays`` (after :meth:`setup`)."""
        raise ValueError(f"{type(self).__name__} has no model to warm-start: pass no "
                         "initial_arrays")

    def select(self) -> list[int]:
        """Client ids taking part in this round."""
        return sorted(self.nodes)

    def payload(self, cid: int) -> Payload:
        """Arrays and config sent to client ``cid`` this round."""
        raise NotImplementedError

    def reply_shapes(self) -> list[Shape]:
        """Shapes of the arrays every client must return."""
        raise NotImplementedError

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Update server state from the accepted replies {cid: arrays}."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """Per-round numbers for the history (losses, residuals, penalties)."""
        return {}

    def estimates(self) -> dict[str, Any]:
        """Current learned matrices."""
        return {}

    def round_estimates(self) -> dict[str, Any]:
        """What ``evaluate_fn`` scores after each round (default: :meth:`estimates`); differs
        where a protocol reports nothing until it completes (checkpoints hold no estimate)."""
        return self.estimates()

    def done(self) -> bool:
        """Stop rule of the algorithm (the round budget is the base's)."""
        return False

    def show(self, rec: Mapping[str, Any]) -> bool:
        """Whether round ``rec`` gets a progress line (default: every round)."""
        return True

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Properties every node must agree on (default: majority of d and p, then the
        majority of the variable names among the nodes with that d and p)."""
        keys = [k for k in ("d", "p") if all(k in i.props for i in infos)]
        if not keys:
            return majority_props(infos, ("names",))
        common = Counter(tuple(i.props[k] for k in keys) for i in infos).most_common(1)[0][0]
        want = dict(zip(keys, common, strict=True))
        agree = [i for i in infos if all(i.props[k] == v for k, v in want.items())]
        return {**want, **majority_props(agree, ("names",))}

    def agreed_names(self, d: int, prefix: str = "x") -> list[str]:
        """The variable names the kept nodes reported (they agree), else ``x0, x1, ...``."""
        for info in self.nodes.values():
            names = split(info.props.get("names"))
            if names is not None and len(names) == d:
                return names
        return default_names(d, prefix)

    def result_names(self) -> dict[str, Any]:
        """Labels of the estimates for ``RunResult.names``: ``{estimate: labels}``, where
        labels is one list (rows and columns) or ``{"rows": [...], "cols": [...]}``; other
        keys (``variables``, ...) describe the data. Default: none."""
        return {}

    # ---- machinery ---------------------------------------------------------------------
    def _send(self, grid: Grid, node_cfg: Mapping[int, RecordDict], message_type: str
              ) -> dict[int, Message]:
        messages = []
        for node, content in node_cfg.items():
            messages.append(Message(content, dst_node_id=node, message_type=message_type,
                                    group_id=str(self._round)))
            arrays = content.array_records.get("arrays")
            self.wire_log.add(self._round, message_type, "down", node,
                              list(arrays.values()) if arrays else [],
                              content.config_records.get("config", {}).keys())
        return {r.metadata.src_node_id: r for r in self._send_and_receive(grid, messages)}

    def _send_and_receive(self, grid: Grid, messages: list[Message]) -> list[Message]:
        """Push, then pull with a short, growing interval (Flower's own loop sleeps 3 s).

        Node health (see the module docstring): a message to an unresponsive node is not
        pushed and gets an error reply saying so; a node on probation (and a new node asked
        ``query.info``) is waited for ``grace_s``, every other node ``timeout_s``. A node whose
        wait runs out becomes unresponsive and the message stays in :attr:`_late`, so a late
        answer is noticed between rounds. The SuperLink's own error replies (node
        unavailable) come back as replies of the node they were meant for.
        """
        out: list[Message] = []
        send: list[Message] = []
        for m in messages:
            node = m.metadata.dst_node_id
            if node in self._unresponsive and node not in self._probation:
                out.append(self._error_reply(m, f"not sent: {self._unresponsive[node]}; "
                                                "waiting for it to answer or rejoin"))
                arrays = m.content.array_records.get("arrays")
                self._bytes["down"] -= array_bytes(arrays.to_numpy_ndarrays() if arrays else [])
            else:
                send.append(m)
        if not send:
            return out
        ids = list(grid.push_messages(send))
        if len(ids) != len(send):  # e.g. HttpGrid: payload too large, nothing pushed
            ids = [None] * len(send)
        t0 = time.time()
        sent: dict[str, Message] = {}
        deadline: dict[str, float] = {}
        for m, mid in zip(send, ids, strict=True):
            node = m.metadata.dst_node_id
            if not mid:  # a node that left is noticed by refresh_nodes; retried otherwise
                out.append(self._error_reply(m, "the SuperLink did not take the message "
                                                f"(node {node} not registered?)"))
                continue
            sent[mid] = m
            deadline[mid] = t0 + (self.grace_s if node in self._probation else self.timeout_s)
        wait = 0.002
        while deadline:
            for r in grid.pull_messages(list(deadline)):
                mid = r.metadata.reply_to_message_id
                if mid in deadline:
                    del deadline[mid]
                    out.append(self._take_reply(sent[mid], r))
            now = time.time()
            for mid in [i for i, t in deadline.items() if t <= now]:
                del deadline[mid]
                self._timed_out(sent[mid], now - t0)
            if deadline:
                time.sleep(max(0.0, min(wait, min(deadline.values()) - now)))
                wait = min(1.5 * wait, 0.2)
        return out

    def _take_reply(self, msg: Message, r: Message) -> Message:
        """A reply to ``msg``: the node is live again, or the SuperLink says it is gone."""
        node = msg.metadata.dst_node_id
        if r.metadata.src_node_id == node:  # the node itself answered (content or error)
            if node in self._unresponsive:
                log(INFO, "%s answers again", self.who(node))
            self._unresponsive.pop(node, None)
            self._probation.discard(node)
            return r
        reason = _last_line(r.error.reason) if r.has_error() else "reply from another node"
        self._unresponsive[node] = (f"unavailable since round {self._round} "
                                    f"({reason.rstrip('.')})")
        self._probation.discard(node)
        return self._error_reply(msg, f"node {node}: {reason}")

    def _timed_out(self, msg: Message, waited: float) -> None:
        """No reply to ``msg`` in time: its node is unresponsive; the reply may come late."""
        node, kind = msg.metadata.dst_node_id, msg.metadata.message_type
        self._late[msg.metadata.message_id] = (node, kind)
        self._probation.discard(node)
        if node not in self._unresponsive:
            self._unresponsive[node] = f"no reply to {kind} since round {self._round}"
            log(WARNING, "%s did not answer %s within %.3gs: later exchanges go on without "
                "it until it answers or rejoins (then it is waited for %.3gs)", self.who(node),
                kind, waited, self.grace_s)

    def _error_reply(self, msg: Message, reason: str) -> Message:
        """An error reply to ``msg`` as if from its node (what the exchange drops, named)."""
        if not msg.metadata.message_id:
            msg.metadata.__dict__["_message_id"] = msg.object_id
        return Message(Error(code=int(ErrorCode.NODE_UNAVAILABLE), reason=reason), reply_to=msg)

    def who(self, node: int) -> str:
        """``client <partition id> (node <node id>)``, or ``node <node id>`` if unknown."""
        cid = next((c for c, i in self.nodes.items() if i.node_id == node), None)
        return f"node {node}" if cid is None else f"client {cid} (node {node})"

    def drop(self, who: str, why: str) -> None:
        """Log and count a dropped node or reply."""
        self._dropped.append(f"{who}: {why}")
        log(WARNING, "dropped %s: %s", who, why)

    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """Wait for the SuperNodes, ask each who it is, keep the consistent ones.

        A node whose ``query.info`` reply is missing, an error or malformed (see
        :func:`parse_info`), disagrees with the majority's properties or repeats a partition
        id is dropped, named; the run goes on with the others.
        """
        t0 = time.time()
        infos: dict[int, NodeInfo] = {}
        asked: set[int] = set()
        expected = self.min_nodes
        while True:
            ids = sorted(set(grid.get_node_ids()) - asked)
            if ids:
                asked |= set(ids)
                replies = self._send(grid, {n: RecordDict({"config": ConfigRecord(
                    {"algorithm": self.algorithm, **self.info_config()})}) for n in ids},
                    "query.info")
                for node in ids:
                    info = parse_info(node, replies.get(node), self.timeout_s)
                    if isinstance(info, str):
                        self.drop(_node_named(node, replies.get(node)), info)
                        continue
                    infos[node] = info
                    expected = max(expected, info.num_partitions)
            if len(asked) >= expected or time.time() - t0 > self.node_wait_s:
                break
            time.sleep(0.5)
        self._known |= asked
        if len(infos) < self.min_nodes:
            raise TooFewReplies(f"{len(infos)} usable SuperNodes after {time.time() - t0:.0f}s,"
                                f" min-nodes={self.min_nodes}{_dropped_so_far(self._dropped)}")
        want = self.expected_props(list(infos.values()))
        nodes: dict[int, NodeInfo] = {}
        for info in sorted(infos.values(), key=lambda i: (i.cid, i.node_id)):
            bad = {k: info.props.get(k) for k, v in want.items() if info.props.get(k) != v
                   and not (k in self.optional_props and k not in info.props)}
            who = f"client {info.cid} (node {info.node_id})"
            if bad:
                self.drop(who, f"reports {bad}, the federation has {want}")
            elif info.cid in nodes:
                self.drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is "
                               f"node {nodes[info.cid].node_id})")
            else:
                nodes[info.cid] = info
        if len(nodes) < self.min_nodes:
            raise TooFewReplies(f"{len(nodes)} consistent clients, min-nodes={self.min_nodes}"
                                f"{_dropped_so_far(self._dropped)}")
        log(INFO, "%s: %d clients %s", type(self).__name__, len(nodes), want)
        return nodes

    def refresh_nodes(self, grid: Grid) -> None:
        """Between rounds: notice late answers, clients whose node left, and rejoins.

        Cheap by design: one ``grid.get_node_ids()`` (local to the SuperLink), one pull of
        the replies the server stopped waiting for, and ``query.info`` only to node ids never
        asked before, only while a client is missing, waited for at most ``grace_s`` (a
        later answer is taken at the next round).
        """
        self._poll_late(grid)
        present = set(grid.get_node_ids())
        for cid, info in sorted(self.nodes.items()):
            node = info.node_id
            if node not in present:
                if not self.rejoinable:
                    raise ProtocolStopped(
                        f"client {cid} (node {node}) left the federation before round "
                        f"{self._round}; {type(self).__name__} keeps protocol state on the "
                        "node (context.state), which a restarted SuperNode has lost, so the "
                        "client cannot rejoin")
                if not self._unresponsive.get(node, "").startswith("left"):
                    log(WARNING, "client %d (node %d) left the federation before round %d; "
                        "waiting for it to rejoin", cid, node, self._round)
                    self._unresponsive[node] = (f"left the SuperLink before round "
                                                f"{self._round}")
                self._probation.discard(node)
            elif self._unresponsive.get(node, "").startswith(("left", "unavailable")):
                self._probation.add(node)  # online again under the same node id: retry it
        missing = [c for c, i in self.nodes.items()
                   if i.node_id in self._unresponsive and i.node_id not in self._probation]
        new = sorted(present - self._known)
        if not missing or not new:
            return
        self._known |= set(new)
        self._probation |= set(new)
        replies = self._send(grid, {n: RecordDict({"config": ConfigRecord(
            {"algorithm": self.algorithm, **self.info_config()})}) for n in new}, "query.info")
        for node in new:
            if node in replies:
                self._take_info(node, replies[node])

    def _poll_late(self, grid: Grid) -> None:
        """Replies the server stopped waiting for: a node that answers is put on probation,
        a late ``query.info`` answer may be a rejoin."""
        if not self._late:
            return
        for r in grid.pull_messages(list(self._late)):
            mid = r.metadata.reply_to_message_id
            if mid not in self._late:
                continue
            node, kind = self._late.pop(mid)
            if kind == "query.info" and r.metadata.src_node_id == node:
                self._take_info(node, r)
            elif node in self._unresponsive:  # answered, or the SuperLink's word (message
                # expired, node unavailable): retry it; refresh_nodes sets apart nodes gone
                self._probation.add(node)
                log(INFO, "%s: late reply to %s; its next message is waited for %.3gs",
                    self.who(node), kind, self.grace_s)

    def _take_info(self, node: int, reply: Message) -> None:
        """A ``query.info`` answer between rounds: a restarted node takes its client's place."""
        self._probation.discard(node)
        self._unresponsive.pop(node, None)  # it answered
        info = parse_info(node, reply, self.grace_s)
        if isinstance(info, str):
            self.drop(_node_named(node, reply), info)
            return
        who, old = f"client {info.cid} (node {node})", self.nodes.get(info.cid)
        if old is None:
            self.drop(who, "joined after discovery; this run's clients were fixed then")
        elif old.node_id not in self._unresponsive:
            self.drop(who, f"duplicate partition-id {info.cid} (client {info.cid} is node "
                           f"{old.node_id}, which still answers)")
        elif not self.rejoinable:
            raise ProtocolStopped(
                f"client {info.cid} came back as node {node} (was node {old.node_id}) and has "
                f"lost the protocol state {type(self).__name__} keeps on the node "
                "(context.state); the run cannot go on without it")
        elif info.props != old.props:
            diff = {k: (old.props.get(k), info.props.get(k))
                    for k in sorted(set(old.props) | set(info.props))
                    if old.props.get(k) != info.props.get(k)}
            self.drop(who, f"came back with other properties {{key: (was, now)}} = {diff}")
        else:
            self._unresponsive.pop(old.node_id, None)
            self._probation.discard(old.node_id)
            self.nodes[info.cid] = info
            log(INFO, "client %d rejoined as node %d (was node %d); its server-held state "
                "carries on", info.cid, node, old.node_id)

    def reply_bound(self, phase: str) -> float | None:
        """Largest |x| a float reply to ``train.<phase>`` may hold (None: only
        :data:`MAX_ABS`). A protocol that knows a bound from what it sent declares it here; it
        is what protects an exchange with a single reply, where there is nothing to compare."""
        return None

    def screen(self, phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        """Magnitude outliers among the well-formed replies of one exchange, {cid: why}
        (:func:`outliers` with :meth:`reply_bound`, :attr:`screen_factor` and
        :attr:`screen_floor`)."""
        return outliers(replies, bound=self.reply_bound(phase), factor=self.screen_factor,
                        floor=self.screen_floor)

    def info_config(self) -> dict[str, Any]:
        """Config sent with ``query.info`` (settings every client must share, if any)."""
        return {}

    def exchange(self, grid: Grid, phase: str, payloads: Mapping[int, Payload],
                 expected: Expected | Mapping[int, Expected], *, need: int | None = None,
                 every: bool = False) -> dict[int, list[np.ndarray]]:
        """Send ``train.<phase>`` to each client id; return the valid replies by client id.

        Error replies, missing replies and replies with the wrong count, shapes or dtypes
        (floats must be float64) or with non-finite floats are dropped and logged
        (``expected``: one list for all, or one per client id; see :func:`reply_problem`);
        then the well-formed replies are screened for magnitude (:meth:`screen`) before any is
        returned, so nothing a protocol aggregates or sends on holds an outlier. Fewer than
        ``need`` valid replies (default: ``min_nodes``; 1 for a query to one client) raise
        :class:`TooFewReplies`; with ``every``, any dropped reply raises
        :class:`ProtocolStopped` naming that client. The accepted replies' metrics are left in
        :attr:`reply_metrics`.
        """
        need = self.min_nodes if need is None else int(need)
        self._exchanges["round"] += 1
        self._exchanges["total"] += 1
        contents = {}
        for cid, (arrays, cfg) in payloads.items():
            self._bytes["down"] += array_bytes(arrays)
            contents[self.nodes[cid].node_id] = RecordDict({
                "arrays": ArrayRecord([np.asarray(a) for a in arrays]),
                "config": ConfigRecord({"algorithm": self.algorithm, **cfg,
                                        "server-round": self._round}),
            })
        replies = self._send(grid, contents, f"train.{phase}")
        ok: dict[int, list[np.ndarray]] = {}
        self.reply_metrics = {}
        for cid in payloads:
            node = self.nodes[cid].node_id
            r = replies.get(node)
            want = expected[cid] if isinstance(expected, Mapping) else expected
            problem, arrays = None, []
            if r is None:
                problem = f"no reply to train.{phase} in {self.timeout_s:.3g} s"
            elif r.has_error():
                problem = _last_line(r.error.reason)
            elif "arrays" not in r.content.array_records:
                problem = "reply without arrays"
            else:
                arrays = r.content["arrays"].to_numpy_ndarrays()
                self._bytes["up"] += array_bytes(arrays)
                self.wire_log.add(self._round, f"train.{phase}", "up", node, arrays)
                problem = reply_problem(arrays, want)
            if problem:
                self.drop(f"client {cid}", f"{phase}: {problem}")
                if every:
                    raise ProtocolStopped(f"client {cid} failed in phase {phase}: {problem}")
                continue
            ok[cid] = arrays
            self.reply_metrics[cid] = (dict(r.content["metrics"])
                                       if "metrics" in r.content.metric_records else {})
        for cid, why in sorted(self.screen(phase, ok).items()):
            self.drop(f"client {cid}", f"{phase}: {why}")
            del ok[cid]
            self.reply_metrics.pop(cid, None)
            if every:
                raise ProtocolStopped(f"client {cid} failed in phase {phase}: {why}")
        self._accepted = len(ok)
        self._took_part |= set(ok)
        if len(ok) < need:
            raise TooFewReplies(f"round {self._round}: {len(ok)} valid replies to "
                                f"train.{phase}, min-nodes={need}")
        return ok

    # ---- rounds ------------------------------------------------------------------------
    def rounds(self, result: RunResult) -> Iterator[dict[str, Any]]:
        """Open a round per iteration until :meth:`done` or the round budget is spent.

        The loop body runs the round's exchanges and fills the yielded record with the
        algorithm's numbers; the base then adds clients, drops, bytes, the evaluation and
        seconds, appends it to the history, logs a progress line and checkpoints.
        """
        while not self.done() and not self.budget_spent(result):
            rec = self.open_round()
            if self._round > 1 and self._grid is not None:
                self.refresh_nodes(self._grid)
            yield rec
            self.close_round(result, rec)

    def budget_spent(self, result: RunResult) -> bool:
        """``start(num_rounds=...)`` rounds are recorded."""
        return self._max_rounds is not None and len(result.history) >= self._max_rounds

    def open_round(self) -> dict[str, Any]:
        """Start a round: its number, byte counters, timer, drop count."""
        self._round += 1
        self._bytes = {"up": 0, "down": 0}
        self._exchanges["round"] = 0
        self._t_round, self._n_dropped = time.time(), len(self._dropped)
        return {"round": self._round}

    def close_round(self, result: RunResult, rec: dict[str, Any]) -> None:
        """Finish a round's record (clients, drops, bytes, evaluation, seconds) and keep it."""
        rec.setdefault("round", self._round)
        rec.update({"n_clients": self._accepted,
                    "dropped": len(self._dropped) - self._n_dropped,
                    "bytes_up": self._bytes["up"], "bytes_down": self._bytes["down"],
                    "exchanges": self._exchanges["round"]})
        if self.evaluate_fn is not None:
            ev = self.evaluate_fn(self.round_estimates(), sorted(self.nodes))
            rec.update(ev)
            result.evaluations[int(rec["round"])] = dict(ev)
        rec["seconds"] = time.time() - self._t_round
        self.record_round(result, rec, show=self.show(rec))

    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The protocol loop: one exchange per round until :meth:`done`."""
        for rec in self.rounds(result):
            replies = self.exchange(grid, self.phase,
                                    {c: self.payload(c) for c in self.select()},
                                    self.reply_shapes())
            self.aggregate(replies)
            rec.update(self.record())

    def record_round(self, result: RunResult, rec: dict[str, Any], *,
                     show: bool = True, label: str | None = None) -> None:
        """Append a finished round to the history, log its progress line, checkpoint."""
        result.history.append(rec)
        if show:
            label = label or self.round_label
            log(INFO, "[%s %s %s] %s", self.algorithm, label, rec.get(label, self._round),
                _progress(rec, self.progress_keys))
        if self.checkpoint is not None:
            result.estimates = self.estimates()
            result.names = self.result_names()
            result.status = "running"
            self.checkpoint(result)

    def start(self, grid: Grid, initial_arrays: Any = None, num_rounds: int | None = None,
              timeout: float | None = None, train_config: Any = None,
              evaluate_config: Any = None, evaluate_fn: EvaluateFn | None = None
              ) -> RunResult:
        """Run the whole protocol on ``grid`` and return its :class:`RunResult`.

        Flower's contract: ``initial_arrays`` (an ``ArrayRecord`` or list of arrays)
        warm-starts the algorithm's model where it has one, and is rejected where it has
        none; ``num_rounds`` bounds the recorded rounds (default: the algorithm's own stop
        rule and budget); ``timeout`` is the reply timeout of one exchange in seconds;
        ``evaluate_fn(estimates, client_ids) -> dict`` replaces the strategy's evaluator.
        ``train_config`` and ``evaluate_config`` are not used (each protocol sends its own
        settings) and must stay None. A run that loses too many clients stops with
        ``status`` saying why and keeps every finished round; it never averages fewer than
        ``min_nodes`` valid replies.
        """
        name = type(self).__name__
        for arg, value in (("train_config", train_config),
                           ("evaluate_config", evaluate_config)):
            if value is not None:
                raise ValueError(f"{name}.start: {arg} is not used; every setting is in "
                                 f"{self.settings_class.__name__}")
        if num_rounds is not None and (isinstance(num_rounds, bool)
                                       or not isinstance(num_rounds, int) or num_rounds < 1):
            raise ValueError(f"{name}.start: num_rounds = {num_rounds!r}, need an int >= 1")
        if timeout is not None and not float(timeout) > 0:
            raise ValueError(f"{name}.start: timeout = {timeout!r}, need seconds > 0")
        warm = None
        if initial_arrays is not None:
            if type(self).warm_start is CausalStrategy.warm_start:
                self.warm_start([])  # raises: no model
            warm = as_arrays(initial_arrays)
        if evaluate_fn is not None:
            self.evaluate_fn = evaluate_fn
        self._reset()
        self._max_rounds = num_rounds
        self._timeout = None if timeout is None else float(timeout)
        self._grid = grid
        t0 = time.time()
        self.summary()
        result = RunResult(self.algorithm, self.config(), status="running")
        try:
            if self.checkpoint is not None:  # a "running" file from the start
                self.checkpoint(result)
            self.nodes = self.discover(grid)
            self.setup(self.nodes)
            if warm is not None:
                self.warm_start(warm)
            self.run_rounds(grid, result)
            result.status = "completed"
        except TooFewReplies as e:
            result.status = f"stopped: {e}"
            log(ERROR, "%s stopped early: %s", self.algorithm, e)
        except BaseException as e:  # keep finished rounds with the error, then re-raise
            result.status = (f"failed: {type(e).__name__}: {e}" if isinstance(e, Exception)
                             else f"interrupted: {type(e).__name__}")
            log(ERROR, "%s", traceback.format_exc())
            self._finish(result, t0)
            self._final_checkpoint(result)
            raise
        self._finish(result, t0)
        self._final_checkpoint(result)
        return result

    def _finish(self, result: RunResult, t0: float) -> None:
        """Final estimates and metrics (subclasses add theirs after calling this).

        ``metrics["clients"]`` counts the clients that took part (a valid reply at least
        once), ``metrics["clients_discovered"]`` those discovery kept. An error while scoring
        the final estimates is recorded in ``result.errors``, never replaces the status.
        """
        try:
            if self.nodes and self._round:
                result.estimates = self.estimates()
                result.names = self.result_names()
                if self.evaluate_fn is not None:
                    result.metrics.update(self.evaluate_fn(result.estimates,
                                                           sorted(self.nodes)))
        except Exception as e:  # noqa: BLE001 - the run's outcome stands; say what failed
            result.errors.append(f"final evaluation: {type(e).__name__}: {e}")
            log(ERROR, "%s: final evaluation failed: %s", self.algorithm, traceback.format_exc())
        result.metrics.update({"rounds": self._round, "clients": len(self._took_part),
                               "clients_discovered": len(self.nodes),
                               "dropped": list(self._dropped)})
        result.timing = {"wall_s": time.time() - t0, "rounds": self._round,
                         "exchanges": self._exchanges["total"]}

    def _final_checkpoint(self, result: RunResult) -> None:
        """Checkpoint the final status (a failing checkpoint never masks the outcome)."""
        if self.checkpoint is not None:
            try:
                self.checkpoint(result)
            except Exception:  # noqa: BLE001
                log(ERROR, "%s: final checkpoint failed: %s", self.algorithm,
                    traceback.format_exc())

    def wire_summary(self) -> dict[str, dict[str, Any]]:
        """Per ``"<phase> <direction>"``: messages, array bytes, shapes seen (see
        :class:`WireLog`)."""
        return self.wire_log.summary()


def majority_props(infos: Sequence[NodeInfo], keys: Sequence[str]) -> dict[str, Any]:
    """The most common value of each of ``keys`` among the nodes that report it (ties: the
    lowest partition id's), for optional properties such as the variable names."""
    out = {}
    for k in keys:
        have = sorted((i for i in infos if k in i.props), key=lambda i: (i.cid, i.node_id))
        if have:
            out[k] = Counter(i.props[k] for i in have).most_common(1)[0][0]
    return out


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error reply"


def _node_named(node: int, reply: Message | None) -> str:
    """``node <id>``, with the partition id its reply claims when there is one."""
    try:
        pid = reply.content["properties"]["partition-id"]  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no reply, error reply, no properties, no partition-id
        return f"node {node}"
    return f"node {node} (partition-id {pid!r})"


def _dropped_so_far(dropped: Sequence[str]) -> str:
    return f"; dropped: {'; '.join(dropped)}" if dropped else ""


def _progress(rec: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={rec[k]:.4g}" if isinstance(rec[k], float) else f"{k}={rec[k]}"
                    for k in keys if k in rec)
