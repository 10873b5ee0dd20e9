"""The exchange: send a phase's messages, wait for the replies, keep only the valid ones.

One :meth:`Exchange.run` sends ``train.<phase>`` to some clients, drops (named, with the
reason) every error reply, missing reply and reply whose arrays break the declared shapes
(:func:`~fedcausal_flwr.federation.replies.reply_problem`), runs the rest through its reply
filters (:class:`~fedcausal_flwr.federation.replies.ReplyFilter`: the magnitude screen, the
Byzantine screen where the protocol has one, a user's own), and counts bytes and round trips;
:meth:`Exchange.send` is the transport under it (also used by discovery): pushes and pulls on
Flower's ``Grid``, as the roster's node health says.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.federation.errors import ProtocolStopped, TooFewReplies
from fedcausal_flwr.federation.limits import Limits
from fedcausal_flwr.federation.nodes import last_line
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.federation.replies import Expected, ReplyFilter, array_bytes, reply_problem
from fedcausal_flwr.federation.roster import Roster
from fedcausal_flwr.federation.wire import WireLog

Payload = tuple[list[np.ndarray], dict[str, Any]]


class Exchange:
    """Messages to the roster's nodes and their validated replies.

    Parameters
    ----------
    grid : Grid
        Flower's Grid the messages go through (``push_messages``, ``pull_messages``).
    roster : Roster
        The clients' nodes and their health (what is sent, and how long it is waited for).
    recorder : Recorder
        Where rounds, bytes, round trips, drops and participation are counted.
    limits : Limits
        ``min_nodes`` (the default ``need``), ``timeout_s`` and ``grace_s``.
    filters : sequence of ReplyFilter
        Run in order on the well-formed replies of each exchange (:attr:`filters`).
    algorithm : str
        Sent in every message's config.
    wire_log : WireLog, optional
        Where every message is counted (default: a new one).
    """

    def __init__(self, grid: Grid, roster: Roster, recorder: Recorder,
                 limits: Limits | None = None, filters: Sequence[ReplyFilter] = (), *,
                 algorithm: str = "base", wire_log: WireLog | None = None) -> None:
        self.grid, self.roster, self.recorder = grid, roster, recorder
        self.limits = limits or roster.limits
        self.filters: list[ReplyFilter] = list(filters)
        self.algorithm = algorithm
        self.wire_log = WireLog() if wire_log is None else wire_log
        self.reply_metrics: dict[int, dict[str, Any]] = {}
        self.timed_out: dict[str, Message] = {}  # the last send's messages not answered in time

    def run(self, phase: str, payloads: Mapping[int, Payload],
            expected: Expected | Mapping[int, Expected], *, need: int | None = None,
            every: bool = False, metrics: Sequence[str] = ()) -> dict[int, list[np.ndarray]]:
        """Send ``train.<phase>`` to each client id; return the valid replies by client id.

        Error replies, missing replies and replies with the wrong count, shapes or dtypes
        (floats must be float64) or with non-finite floats are dropped and logged
        (``expected``: one list for all, or one per client id; see :func:`reply_problem`);
        then the well-formed replies go through :attr:`filters` in order (the magnitude
        screen, the Byzantine screen, whose drops are counted in the round's ``flagged``) before
        any is returned, so nothing a protocol aggregates or sends on holds an outlier. Fewer
        than ``need`` valid replies (default: ``min_nodes``; 1 for a query to one client)
        raise :class:`TooFewReplies`; with ``every``, any dropped reply raises
        :class:`ProtocolStopped` naming that client. A reply without a finite number for each
        of ``metrics`` (e.g. ``("loss",)``) is dropped the same way. The accepted replies'
        metrics are left in :attr:`reply_metrics`. A reply from a node that restarted under
        its node id (:meth:`Roster.check_incarnation`) stops a protocol that keeps state on
        the node.

        Late is not dead: when replies are missing after the reply timeout and too few
        well-formed replies are in (fewer than ``need``; with ``every``, any missing), the
        exchange is retried once for the missing nodes (:meth:`_retry`): the server waits
        for their late replies at most one more ``timeout_s``, without sending anything
        again. The retry is logged (WARNING, naming the nodes) and counted in the round's
        record (``retries``); its cost is one more reply timeout at most per exchange. An
        exchange whose replies all arrive in time sends and waits exactly as without it.
        """
        rec, nodes = self.recorder, self.roster.nodes
        need = self.limits.min_nodes if need is None else int(need)
        rec.exchanges["round"] += 1
        rec.exchanges["total"] += 1
        contents = {}
        for cid, (arrays, cfg) in payloads.items():
            rec.bytes["down"] += array_bytes(arrays)
            contents[nodes[cid].node_id] = RecordDict({
                "arrays": ArrayRecord([np.asarray(a) for a in arrays]),
                "config": ConfigRecord({"algorithm": self.algorithm, **cfg,
                                        "server-round": rec.round}),
            })
        replies = self.send(contents, f"train.{phase}")
        retried = self._retry(phase, payloads, replies, expected, need, every)
        ok: dict[int, list[np.ndarray]] = {}
        self.reply_metrics = {}
        for cid in payloads:
            node = nodes[cid].node_id
            r = replies.get(node)
            want = expected[cid] if isinstance(expected, Mapping) else expected
            problem, arrays = None, []
            if r is None:
                problem = f"no reply to train.{phase} in {self.limits.timeout_s:.3g} s"
                if node in retried:
                    problem += ", nor in the retry"
            elif r.has_error():
                problem = last_line(r.error.reason)
            elif "arrays" not in r.content.array_records:
                problem = "reply without arrays"
            else:
                arrays = r.content["arrays"].to_numpy_ndarrays()
                rec.bytes["up"] += array_bytes(arrays)
                self.wire_log.add(rec.round, f"train.{phase}", "up", node, arrays)
                problem = reply_problem(arrays, want) or metrics_problem(r, metrics)
            if problem:
                rec.drop(f"client {cid}", f"{phase}: {problem}")
                if every:
                    raise ProtocolStopped(f"client {cid} failed in phase {phase}: {problem}")
                continue
            self.roster.check_incarnation(cid, r)
            ok[cid] = arrays
            self.reply_metrics[cid] = (dict(r.content["metrics"])
                                       if "metrics" in r.content.metric_records else {})
        for screen in self.filters:
            for cid, why in sorted(screen(phase, ok).items()):
                if getattr(screen, "flags", False):
                    rec.flag(cid)
                rec.drop(f"client {cid}", f"{phase}: {why}")
                del ok[cid]
                self.reply_metrics.pop(cid, None)
                if every:
                    raise ProtocolStopped(f"client {cid} failed in phase {phase}: {why}")
        rec.accepted = len(ok)
        rec.took_part |= set(ok)
        if len(ok) < need:
            late = sorted(c for c in payloads if nodes[c].node_id in retried
                          and nodes[c].node_id not in replies)
            raise TooFewReplies(f"round {rec.round}: {len(ok)} valid replies to "
                                f"train.{phase}, min-nodes={need}" + (
                                    f"; no reply after a retry from client(s) {late}"
                                    if late else ""))
        return ok

    def _retry(self, phase: str, payloads: Mapping[int, Payload],
               replies: dict[int, Message], expected: Expected | Mapping[int, Expected],
               need: int, every: bool) -> set[int]:
        """Wait once more (at most ``timeout_s``) for the replies missing after the timeout,
        if the exchange would stop without them; the late replies join ``replies``. Returns
        the node ids waited for (empty: no retry)."""
        nodes, roster = self.roster.nodes, self.roster
        missing = {nodes[c].node_id: c for c in payloads if nodes[c].node_id not in replies}
        pending = {mid: m for mid, m in self.timed_out.items()
                   if m.metadata.dst_node_id in missing}
        if not pending:
            return set()
        if not every:
            good = 0
            for cid in payloads:
                r = replies.get(nodes[cid].node_id)
                if r is None or r.has_error() or "arrays" not in r.content.array_records:
                    continue
                want = expected[cid] if isinstance(expected, Mapping) else expected
                good += reply_problem(r.content["arrays"].to_numpy_ndarrays(), want) is None
            if good >= need:
                return set()
        waited = {m.metadata.dst_node_id for m in pending.values()}
        timeout_s = self.limits.timeout_s
        self.recorder.retries += 1
        log(WARNING, "round %d: %s did not answer train.%s within %.3gs; retrying once: "
            "waiting at most %.3gs more for their replies", self.recorder.round,
            ", ".join(roster.who(n) for n in sorted(waited)), phase, timeout_s, timeout_s)
        deadline, wait = time.time() + timeout_s, 0.002
        while pending:
            for r in self.grid.pull_messages(list(pending)):
                mid = r.metadata.reply_to_message_id
                if mid in pending:
                    msg = pending.pop(mid)
                    roster.late_taken(mid)
                    replies[msg.metadata.dst_node_id] = self._take_reply(msg, r)
            now = time.time()
            if not pending or now >= deadline:
                break
            time.sleep(max(0.0, min(wait, deadline - now)))
            wait = min(1.5 * wait, 0.2)
        return waited

    # ---- transport -------------------------------------------------------------------
    def send(self, node_cfg: Mapping[int, RecordDict], message_type: str
             ) -> dict[int, Message]:
        """Send each node its content as ``message_type``; the replies by node id."""
        messages = []
        rnd, wire_log = self.recorder.round, self.wire_log
        for node, content in node_cfg.items():
            messages.append(Message(content, dst_node_id=node, message_type=message_type,
                                    group_id=str(rnd)))
            arrays = content.array_records.get("arrays")
            wire_log.add(rnd, message_type, "down", node,
                         list(arrays.values()) if arrays else [],
                         content.config_records.get("config", {}).keys())
        return {r.metadata.src_node_id: r for r in self.send_and_receive(messages)}

    def send_and_receive(self, messages: list[Message]) -> list[Message]:
        """Push, then pull with a short, growing interval (Flower's own loop sleeps 3 s).

        Node health (see :mod:`~fedcausal_flwr.federation.roster`): a message to an
        unresponsive node is not pushed and gets an error reply saying so; a node on probation
        (and a new node asked ``query.info``) is waited for ``grace_s``, every other node
        ``timeout_s``. A node whose wait runs out becomes unresponsive and the message stays
        in ``roster.late``, so a late answer is noticed between rounds. The SuperLink's own
        error replies (node unavailable) come back as replies of the node they were meant
        for.
        """
        roster, grid = self.roster, self.grid
        self.timed_out = {}  # message id -> message, no reply in time (see _retry)
        out: list[Message] = []
        send: list[Message] = []
        for m in messages:
            if (why := roster.skipped(m.metadata.dst_node_id)) is not None:
                out.append(_error_reply(m, f"not sent: {why}; "
                                           "waiting for it to answer or rejoin"))
                arrays = m.content.array_records.get("arrays")
                self.recorder.bytes["down"] -= array_bytes(arrays.to_numpy_ndarrays()
                                                           if arrays else [])
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
            if not mid:  # a node that left is noticed by Roster.refresh; retried otherwise
                out.append(_error_reply(m, "the SuperLink did not take the message "
                                           f"(node {node} not registered?)"))
                continue
            sent[mid] = m
            deadline[mid] = t0 + roster.wait_s(node)
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
                self.timed_out[mid] = sent[mid]
                self._timed_out(sent[mid], now - t0)
            if deadline:
                time.sleep(max(0.0, min(wait, min(deadline.values()) - now)))
                wait = min(1.5 * wait, 0.2)
        return out

    def _take_reply(self, msg: Message, r: Message) -> Message:
        """A reply to ``msg``: the node is live again, or the SuperLink says it is gone."""
        roster, node = self.roster, msg.metadata.dst_node_id
        if r.metadata.src_node_id == node:  # the node itself answered (content or error)
            if roster.answered(node):
                log(INFO, "%s answers again", roster.who(node))
            return r
        reason = last_line(r.error.reason) if r.has_error() else "reply from another node"
        roster.mark_unavailable(node, reason)
        return _error_reply(msg, f"node {node}: {reason}")

    def _timed_out(self, msg: Message, waited: float) -> None:
        """No reply to ``msg`` in time: its node is unresponsive; the reply may come late."""
        roster = self.roster
        node, kind = msg.metadata.dst_node_id, msg.metadata.message_type
        roster.expect_late(msg.metadata.message_id, node, kind)
        if roster.mark_unresponsive(node, kind):
            log(WARNING, "%s did not answer %s within %.3gs: later exchanges go on without "
                "it until it answers or rejoins (then it is waited for %.3gs)",
                roster.who(node), kind, waited, self.limits.grace_s)


def metrics_problem(reply: Message, names: Sequence[str]) -> str | None:
    """Why ``reply`` lacks one of the metrics ``names`` as a finite number (None: it has
    them all)."""
    if not names:
        return None
    if "metrics" not in reply.content.metric_records:
        return f"reply without its metrics record (needs {', '.join(map(repr, names))})"
    got = reply.content["metrics"]
    for name in names:
        if name not in got:
            return f"reply without the metric {name!r}"
        value = got[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not np.isfinite(value):
            return f"metric {name!r} = {value!r} is not a finite number"
    return None


def _error_reply(msg: Message, reason: str) -> Message:
    """An error reply to ``msg`` as if from its node (what the exchange drops, named)."""
    if not msg.metadata.message_id:
        msg.metadata.__dict__["_message_id"] = msg.object_id
    return Message(Error(code=int(ErrorCode.NODE_UNAVAILABLE), reason=reason), reply_to=msg)
