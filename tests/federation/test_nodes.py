"""Nodes that misbehave or come and go (issue 11, items 2-4), in process.

Discovery drops a node with a malformed ``query.info`` reply, named; a restarted SuperNode
(new node id, same partition id) rejoins between rounds with the server-held state; a hung
node costs the reply timeout once, is skipped afterwards and is retried when it answers. Each
result is compared with the run in which the faulty client simply failed (an error reply) in
the same rounds, or with the uninterrupted run.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.strategies import FDBNL, PFDBNL, FedCF, FedGC, FedIV, VFedCD
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.nodes import RC, failing_app, run, same

pytestmark = pytest.mark.integration  # every test here is a whole in-process run


def test_malformed_info_replies_are_dropped_named_and_the_run_goes_on():
    modes = {1: "no-properties", 2: "no-partition-id", 3: "string-partition-id", 4: "crash"}
    result, grid, _ = run(RC, 6, failing_app(info=modes))
    assert result.status == "completed" and result.metrics["clients"] == 2
    dropped = " | ".join(result.metrics["dropped"])
    assert f"node {grid.node_id(1)}: query.info reply without a 'properties' record" in dropped
    assert f"node {grid.node_id(2)}: query.info reply without 'partition-id'" in dropped
    assert (f"node {grid.node_id(3)} (partition-id 'two'): query.info reply has partition-id "
            "= 'two', not an integer >= 0") in dropped
    assert f"node {grid.node_id(4)}: error reply to query.info: RuntimeError: info crashed" \
        in dropped
    assert all(h["n_clients"] == 2 for h in result.history)
    # the same as a run in which those four clients failed every round
    ref, _, _ = run(RC, 6, failing_app(fail={c: set(range(100)) for c in modes}))
    same(result, ref)


def test_duplicate_partition_id_names_both_nodes():
    grid = InProcessGrid(failing_app(), 3, RC)
    twin = grid.add_node(1)  # a second SuperNode started with partition-id=1
    result = app_dbn.strategy("fdbnl", RC).start(grid=grid)
    assert result.status == "completed" and result.metrics["clients"] == 3
    assert twin == 1003
    (why,) = result.metrics["dropped"]
    assert why.startswith("client 1 (node 1003): duplicate partition-id 1 (client 1 is node "
                          "1001); give each SuperNode its own partition-id")


@pytest.mark.parametrize("algorithm", ["fdbnl", "pfdbnl"])
def test_a_restarted_node_rejoins_and_the_result_is_the_uninterrupted_one(algorithm):
    rc = {**RC, "algorithm": algorithm, "heterogeneous": algorithm == "pfdbnl"}
    new = {}
    result, grid, _ = run(rc, 3, events={3: lambda g: new.setdefault(1, g.restart_node(1))})
    assert new[1] == grid.node_id(1) != 1001
    assert all(h["n_clients"] == 3 and h["dropped"] == 0 for h in result.history)
    assert any(m.metadata.dst_node_id == new[1] and m.metadata.message_type == "train."
               + ("personal" if algorithm == "pfdbnl" else "local") for m in grid.sent)
    ref, _, _ = run(rc, 3)
    same(result, ref)
    if algorithm == "pfdbnl":
        np.testing.assert_allclose(result.estimates["W_local"], ref.estimates["W_local"],
                                   atol=1e-12)


def test_a_node_gone_for_a_round_rejoins_later():
    # partition 1's SuperNode dies after round 3 and comes back (new id) after round 4
    events = {3: lambda g: g.remove_node(g.node_id(1)), 4: lambda g: g.add_node(1)}
    result, grid, _ = run(RC, 3, events=events)
    assert [h["n_clients"] for h in result.history] == [3, 3, 3, 2, 3, 3, 3, 3]
    assert [d for d in result.metrics["dropped"] if "client 1" in d] == [
        "client 1: local: not sent: left the SuperLink before round 4; waiting for it "
        "to answer or rejoin"]
    ref, _, _ = run(RC, 3, failing_app(fail={1: {4}}))
    same(result, ref)


def test_a_hung_node_costs_the_timeout_once():
    # partition 2 hangs after round 2 and never answers again; timeout 0.5 s
    rc = {**RC, "num-rounds": 10}
    sent_to_hung: list[int] = []  # rounds after the hang in which a message went to it

    def hang(g: InProcessGrid) -> None:
        hung, push = g.node_id(2), g.push_messages
        g.hang(hung)

        def counting(messages):
            messages = list(messages)
            sent_to_hung.extend(1 for m in messages if m.metadata.dst_node_id == hung)
            return push(messages)

        g.push_messages = counting

    result, grid, _ = run(rc, 3, events={2: hang}, timeout=0.5)
    assert result.status == "completed"
    assert [h["n_clients"] for h in result.history] == [3, 3] + [2] * 8
    assert result.history[2]["seconds"] >= 0.5  # round 3 waited for it, the timeout
    assert sent_to_hung == [1]  # and only round 3: nothing later is sent to it, or waited for
    named = [d for d in result.metrics["dropped"] if d.startswith("client 2:")]
    assert len(named) == 8 and "no reply to train.local" in named[0]
    assert all("not sent: no reply to train.local since round 3" in d for d in named[1:])
    ref, _, _ = run(rc, 3, failing_app(fail={2: set(range(3, 100))}))
    same(result, ref)


def test_a_hung_node_that_answers_late_is_retried():
    # partition 2 hangs after round 2 and wakes after round 4: it answers the round-3 message
    # late, so round 5 sends to it again (waiting only node-grace-s) and it takes part
    rc = {**RC, "node-grace-s": 0.3}
    result, grid, _ = run(rc, 3, timeout=0.5, events={
        2: lambda g: g.hang(g.node_id(2)), 4: lambda g: g.wake(g.node_id(2))})
    assert [h["n_clients"] for h in result.history] == [3, 3, 2, 2, 3, 3, 3, 3]
    ref, _, _ = run(rc, 3, failing_app(fail={2: {3, 4}}))
    same(result, ref)


def test_a_hung_node_that_is_restarted_rejoins():
    rc = {**RC, "num-rounds": 6}
    result, grid, _ = run(rc, 3, timeout=0.5, events={
        2: lambda g: g.hang(g.node_id(2)), 3: lambda g: g.restart_node(2)})
    assert [h["n_clients"] for h in result.history] == [3, 3, 2, 3, 3, 3]
    ref, _, _ = run(rc, 3, failing_app(fail={2: {3}}))
    same(result, ref)


class StatefulFDBNL(FDBNL):
    """FDBNL as if its clients kept protocol state on the node."""

    rejoinable = False


def test_a_protocol_with_state_on_the_node_stops_naming_the_client():
    result, grid, _ = run(RC, 3, cls=StatefulFDBNL,
                          events={3: lambda g: g.restart_node(1)})
    assert result.status.startswith("stopped: client 1 (node 1001) left the federation "
                                    "before round 4")
    assert "cannot rejoin" in result.status and len(result.history) == 3
    # the old node still registered but silent, and a new node for its partition
    result, grid, _ = run(RC, 3, cls=StatefulFDBNL, timeout=0.5, events={
        2: lambda g: g.hang(g.node_id(1)), 3: lambda g: g.add_node(1)})
    assert result.status.startswith("stopped: client 1 came back as node 1003 (was node "
                                    "1001) and has lost the protocol state")
    assert [c.rejoinable for c in (FDBNL, PFDBNL, FedIV, FedGC, FedCF, VFedCD)] == [
        True, True, True, False, False, False]


def test_a_returning_node_with_other_properties_is_not_taken():
    def other_data(g):
        g.remove_node(g.node_id(1))
        g.add_node(1, {"num-partitions": 4})  # other data: another split of the series

    result, grid, _ = run(RC, 3, events={3: other_data})
    assert [h["n_clients"] for h in result.history][3:] == [2] * 5
    assert any("client 1 (node 1003): came back with other properties" in d
               for d in result.metrics["dropped"])
