"""The roster, the exchange and the recorder on their own: a fake Grid, no strategy.

Each piece is built from the values it needs; the exchange sends through a tiny Grid stub
(``push_messages``, ``pull_messages``, ``get_node_ids``: Flower's transport seam), and the
checks are what was sent, what was dropped and how node health moved. Last, a toy reply filter
added to an FDBNL run, without touching the family, ends the run as if that client had gone
silent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedcausal_flwr.appconfig import glue, view
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.errors import ProtocolStopped, TooFewReplies
from fedcausal_flwr.federation.exchange import Exchange
from fedcausal_flwr.federation.limits import Limits
from fedcausal_flwr.federation.nodes import NodeInfo
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.federation.replies import MagnitudeScreen
from fedcausal_flwr.federation.robust import ByzantineScreen
from fedcausal_flwr.federation.roster import Health, NodeHealth, Roster
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies import FDBNL
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.faults import SMALL, run_app, same_result, silent_app

Respond = Callable[[Message], Message | None]


def answer(msg: Message, *arrays: np.ndarray) -> Message:
    """The node's reply to ``msg`` carrying ``arrays``."""
    return Message(RecordDict({"arrays": ArrayRecord([np.asarray(a) for a in arrays])}),
                   reply_to=msg)


def echo(msg: Message) -> Message:
    """Every node answers its partition number, as one float."""
    return answer(msg, np.array([float(msg.metadata.dst_node_id - 10)]))


class FakeGrid:
    """A tiny Grid: node ids, and ``respond(message)`` for each message pushed (None: the
    node never answers; a node id not in :attr:`nodes` is refused, as by a SuperLink)."""

    def __init__(self, nodes: Iterable[int], respond: Respond = echo) -> None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
        self.nodes, self.respond = list(nodes), respond
        self.sent: list[Message] = []
        self._replies: dict[str, Message] = {}

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> list[str | None]:
        ids: list[str | None] = []
        for m in messages:
            if m.metadata.dst_node_id not in self.nodes:
                ids.append(None)
                continue
            m.metadata.__dict__["_message_id"] = m.object_id
            self.sent.append(m)
            if (r := self.respond(m)) is not None:
                self._replies[m.metadata.message_id] = r
            ids.append(m.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def to(self, node: int) -> list[Message]:
        """The messages pushed to ``node``."""
        return [m for m in self.sent if m.metadata.dst_node_id == node]


def federation(k: int = 3, respond: Respond = echo, filters=(), **limits):
    """Clients 0..k-1 on nodes 10..10+k-1: the grid, recorder, roster and exchange."""
    grid = FakeGrid(range(10, 10 + k), respond)
    recorder = Recorder("toy")
    lim = Limits(**{"timeout_s": 0.2, "grace_s": 0.05, "min_nodes": 2, **limits})
    roster = Roster(recorder, lim, name="Toy",
                    nodes={c: NodeInfo(10 + c, c, k, {}) for c in range(k)})
    exchange = Exchange(grid, roster, recorder, lim, filters, algorithm="toy")
    recorder.open_round()
    return grid, recorder, roster, exchange


def payloads(k: int = 3) -> dict[int, tuple[list[np.ndarray], dict]]:
    return {c: ([np.zeros(2)], {"step": c}) for c in range(k)}


def test_an_exchange_sends_each_client_its_payload_and_keeps_the_valid_replies():
    def respond(msg: Message) -> Message:
        if msg.metadata.dst_node_id == 12:
            return answer(msg, np.zeros((1, 1)))  # a matrix where a vector is due
        return echo(msg)

    grid, recorder, _, exchange = federation(respond=respond)
    ok = exchange.run("p", payloads(), [(1,)])
    assert sorted(ok) == [0, 1] and ok[1][0].tolist() == [1.0]
    assert [m.metadata.message_type for m in grid.sent] == ["train.p"] * 3
    cfg = grid.to(11)[0].content["config"]
    assert (cfg["algorithm"], cfg["step"], cfg["server-round"]) == ("toy", 1, 1)
    assert recorder.dropped == ["client 2: p: array 0 has shape (1, 1), expected (1,)"]
    assert recorder.bytes == {"down": 48, "up": 24} and recorder.accepted == 2  # 3 replies in
    assert recorder.took_part == {0, 1} and recorder.exchanges["round"] == 1
    with pytest.raises(TooFewReplies, match="round 1: 2 valid replies to train.p, min-nodes=3"):
        exchange.run("p", payloads(), [(1,)], need=3)
    with pytest.raises(ProtocolStopped, match="client 2 failed in phase p"):
        exchange.run("p", payloads(), [(1,)], every=True)


def test_a_node_that_does_not_answer_is_not_sent_to_again_until_it_answers():
    quiet = {12}

    def respond(msg: Message) -> Message | None:
        return None if msg.metadata.dst_node_id in quiet else echo(msg)

    grid, recorder, roster, exchange = federation(respond=respond)
    assert sorted(exchange.run("p", payloads(), [(1,)])) == [0, 1]
    assert recorder.dropped == ["client 2: p: no reply to train.p in 0.2 s"]
    assert roster.health(12) == NodeHealth(Health.UNRESPONSIVE,
                                           "no reply to train.p since round 1")
    assert list(roster.late.values()) == [(12, "train.p")]
    recorder.open_round()
    exchange.run("p", payloads(), [(1,)])
    assert len(grid.to(12)) == 1  # not sent again
    assert recorder.dropped[-1] == ("client 2: p: not sent: no reply to train.p since round 1; "
                                    "waiting for it to answer or rejoin")
    quiet.clear()
    grid._replies[next(iter(roster.late))] = echo(grid.to(12)[0])  # the late answer
    roster.refresh(exchange)  # noticed between rounds: on probation, waited grace_s
    assert roster.health(12).probation and roster.wait_s(12) == 0.05
    assert roster.wait_s(11) == 0.2 and roster.skipped(12) is None
    assert sorted(exchange.run("p", payloads(), [(1,)])) == [0, 1, 2]
    assert roster.health(12) == NodeHealth()  # live again


def test_a_superlink_error_makes_the_node_unavailable():
    def respond(msg: Message) -> Message:
        if msg.metadata.dst_node_id != 12:
            return echo(msg)
        r = Message(Error(code=0, reason="node 12 is gone."), reply_to=msg)
        r.metadata.__dict__["_src_node_id"] = 0  # the SuperLink answers for the node
        return r

    _, recorder, roster, exchange = federation(respond=respond)
    exchange.run("p", payloads(), [(1,)])
    assert recorder.dropped == ["client 2: p: node 12: node 12 is gone."]
    assert roster.health(12) == NodeHealth(Health.UNAVAILABLE,
                                           "unavailable since round 1 (node 12 is gone)")


def test_node_health_changes_only_through_the_roster_verbs():
    recorder = Recorder()
    roster = Roster(recorder, Limits(timeout_s=9.0, grace_s=1.0),
                    nodes={0: NodeInfo(10, 0, 2, {}), 1: NodeInfo(11, 1, 2, {})})
    recorder.open_round()
    assert roster.health(10) == NodeHealth() and not roster.answered(10)
    assert roster.mark_unresponsive(10, "train.p")
    assert not roster.mark_unresponsive(10, "train.q")  # the first reason stays
    assert roster.skipped(10) == "no reply to train.p since round 1"
    roster.retry(10)
    assert roster.skipped(10) is None and roster.wait_s(10) == 1.0
    assert roster.health(10).state is Health.UNRESPONSIVE  # retried, still down
    recorder.open_round()
    assert roster.leave(10) and not roster.leave(10)
    assert roster.health(10) == NodeHealth(Health.LEFT, "left the SuperLink before round 2")
    roster.mark_unavailable(11, "expired.")
    assert roster.skipped(11) == "unavailable since round 2 (expired)"
    assert roster.answered(11) and roster.health(11) == NodeHealth()
    roster.rejoin(0, NodeInfo(20, 0, 2, {}))
    assert roster.nodes[0].node_id == 20 and roster.health(10) == NodeHealth()
    assert roster.who(20) == "client 0 (node 20)" and roster.who(10) == "node 10"


def test_discovery_and_a_node_that_leaves_and_comes_back():
    def respond(msg: Message) -> Message:
        node = msg.metadata.dst_node_id
        pid = {13: 1}.get(node, node - 10)  # node 13 claims partition 1 again
        return Message(RecordDict({"properties": ConfigRecord(
            {"partition-id": pid, "num-partitions": 3, "d": 2})}), reply_to=msg)

    grid = FakeGrid([10, 11, 12, 13], respond)
    recorder = Recorder()
    lim = Limits(min_nodes=2, timeout_s=0.2, grace_s=0.05, node_wait_s=1.0)
    roster = Roster(recorder, lim, name="Toy")
    exchange = Exchange(grid, roster, recorder, lim)
    nodes = roster.discover(exchange, {"algorithm": "toy"})
    assert {c: i.node_id for c, i in nodes.items()} == {0: 10, 1: 11, 2: 12}
    assert recorder.dropped[0].startswith("client 1 (node 13): duplicate partition-id 1")
    assert grid.sent[0].content["config"]["algorithm"] == "toy"
    roster.nodes = nodes
    recorder.open_round()
    recorder.open_round()
    grid.nodes.remove(12)
    roster.refresh(exchange)
    assert roster.health(12).state is Health.LEFT and roster.skipped(12) is not None
    grid.nodes.append(12)  # back under its node id: retried
    recorder.open_round()
    roster.refresh(exchange)
    assert roster.health(12).probation
    stops = Roster(recorder, lim, name="Toy", rejoinable=False, nodes=nodes)
    grid.nodes.remove(12)
    with pytest.raises(ProtocolStopped, match="Toy keeps protocol state on the node"):
        stops.refresh(exchange)


def test_reply_filters_run_in_order_and_a_flagging_filter_counts_its_drops():
    def toy(phase, replies):
        return {1: "toy says no"} if 1 in replies else {}

    class Flagger:
        flags = True

        def __call__(self, phase, replies):
            return {c: "flagged" for c in replies if c == 0}

    _, recorder, _, exchange = federation(k=4, filters=[toy, Flagger()], min_nodes=1)
    assert sorted(exchange.run("p", payloads(4), [(1,)])) == [2, 3]
    assert recorder.dropped == ["client 1: p: toy says no", "client 0: p: flagged"]
    assert recorder.flagged == {0: 1}
    rec = {"round": 1}
    recorder.close_round(RunResult("toy", {}), rec)
    assert rec["flagged"] == [0] and rec["dropped"] == 2


def test_the_two_screens_are_reply_filters():
    magnitude = MagnitudeScreen(bound=lambda phase: 1.0 if phase == "p" else None)
    assert set(magnitude("p", {0: [np.array([5.0])]})) == {0}
    assert magnitude("q", {0: [np.array([5.0])]}) == {}
    assert set(MagnitudeScreen()("q", {0: [np.ones(2)], 1: [np.ones(2)], 2: [np.full(2, 1e9)]}
                                 )) == {2}
    honest = {c: [np.array([1.0 + 0.01 * c, 2.0])] for c in range(5)}
    byz = ByzantineScreen(view=lambda phase, c, a: a, cohort=lambda phase, c: None,
                          factor=2.5, floor=0.05)
    assert byz("p", honest) == {} and byz.flags
    lie = {**honest, 3: [-honest[3][0]]}
    assert list(byz("p", lie)) == [3]


def test_a_toy_reply_filter_added_to_an_fdbnl_run_ends_it_as_if_the_client_went_silent():
    """Partition 2's replies dropped from round 3 by a filter added to the strategy (the
    family untouched): the run ends exactly as the run in which partition 2 goes silent."""
    rc, k = SMALL["fdbnl"]
    rc = {**rc, "dbn.num-rounds": 5}
    strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", rc))

    def toy(phase, replies):
        return {2: "toy filter"} if strategy.recorder.round >= 3 and 2 in replies else {}

    strategy.reply_filters.append(toy)
    filtered = strategy.start(grid=InProcessGrid(client_app, k, rc))
    silent = run_app("fdbnl", silent_app(client_app, "silent", k, pid=2, start=3), k, rc=rc)
    assert filtered.status == silent.status == "completed"
    assert same_result(filtered, silent)
    assert [h["n_clients"] for h in filtered.history][:4] == [4, 4, 3, 3]
    assert "client 2: local: toy filter" in filtered.metrics["dropped"]
    assert FDBNL(reply_filters=[toy]).reply_filters[-1] is toy  # or at construction
