"""Clients bound to node ids (issue 20, "Trust no one"), in process.

``partition-id`` is self-declared by each node. With ``bind-partitions=true`` (what the launcher's
authenticated deployment sets; under SuperNode authentication Flower gives a registered key the
same node id at every start) a client's partition stays with the node id that held it at
discovery: that node may leave and come back under its id, and another node id claiming the
partition is refused, named, and never sent a phase. :meth:`InProcessGrid.add_node` with
``node_id`` is an authenticated SuperNode back under its key; without it, another key.
"""

from __future__ import annotations

import logging

import pytest

from fedcausal_flwr.strategies import FDBNL
from tests.helpers.nodes import RC, failing_app, run, same

pytestmark = pytest.mark.integration  # every test here is a whole in-process run

BOUND = {**RC, "bind-partitions": True}


def impostor_then_return(claimed: int = 1):
    """Events: after round 3 the node of ``claimed`` leaves and another node id claims its
    partition; after round 4 the node comes back under its own id."""
    seen: dict[str, int] = {}

    def leave(g) -> None:
        seen["real"] = g.node_id(claimed)
        g.remove_node(seen["real"])
        seen["impostor"] = g.add_node(claimed)

    def back(g) -> None:
        g.add_node(claimed, node_id=seen["real"])

    return {3: leave, 4: back}, seen


def phases_sent_to(grid, node: int) -> list[str]:
    """The message types ``grid`` sent to ``node``."""
    return [m.metadata.message_type for m in grid.sent if m.metadata.dst_node_id == node]


def test_a_bound_partition_refuses_another_node_and_takes_its_own_back(caplog):
    events, seen = impostor_then_return()
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result, grid, _ = run(BOUND, 3, events=events)
    assert result.status == "completed", result.status
    assert (seen["real"], seen["impostor"]) == (1001, 1003)
    refusal = ("node 1003 (partition-id 1): claims client 1, whose partition is bound to node "
               "1001 (bind-partitions=true: only that node may rejoin); refused")
    assert refusal in result.metrics["dropped"]
    assert any(refusal in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    assert phases_sent_to(grid, 1003) == ["query.info"]  # asked who it is, then nothing
    # client 1 sat out round 4 only and came back under its own node id
    assert [h["n_clients"] for h in result.history] == [3, 3, 3, 2, 3, 3, 3, 3]
    assert "train.local" in phases_sent_to(grid, 1001)[-1:]
    assert result.config["bind_partitions"] is True
    ref, _, _ = run(RC, 3, failing_app(fail={1: {4}}))
    same(result, ref)


def test_without_binding_partitions_are_self_declared():
    # the same events with bind-partitions=false (the default): the other node takes client
    # 1's place, and the node that held it is a stranger when it comes back
    events, seen = impostor_then_return()
    result, grid, _ = run(RC, 3, events=events)
    assert result.status == "completed" and result.config["bind_partitions"] is False
    assert [h["n_clients"] for h in result.history] == [3] * 8
    assert phases_sent_to(grid, seen["impostor"])[1:] == ["train.local"] * 5
    assert phases_sent_to(grid, seen["real"]) == ["query.info"] + ["train.local"] * 3


def test_an_authenticated_restart_keeps_its_node_id_and_the_run_is_unchanged():
    result, grid, _ = run(BOUND, 3, events={3: lambda g: g.restart_node(1, keep_id=True)})
    assert result.status == "completed" and result.metrics["dropped"] == []
    assert grid.node_id(1) == 1001
    ref, _, _ = run(RC, 3)
    same(result, ref)


class StatefulFDBNL(FDBNL):
    """FDBNL as if its clients kept protocol state on the node."""

    rejoinable = False


def test_an_impostor_cannot_stop_a_protocol_with_state_on_the_node():
    # client 1's node hangs (still registered) and another node claims partition 1: unbound,
    # that stops a protocol that keeps state on the node (test_nodes); bound, it is refused
    # and the run goes on without client 1
    events = {2: lambda g: g.hang(g.node_id(1)), 3: lambda g: g.add_node(1)}
    result, grid, _ = run(BOUND, 3, cls=StatefulFDBNL, timeout=0.5, events=events)
    assert result.status == "completed", result.status
    assert any(d.startswith("node 1003 (partition-id 1): claims client 1, whose partition is "
                            "bound to node 1001") for d in result.metrics["dropped"])
    assert [h["n_clients"] for h in result.history] == [3, 3] + [2] * 6


def test_a_restart_under_the_same_node_id_stops_a_protocol_with_state_on_the_node():
    # under SuperNode authentication a SuperNode restarted between two rounds comes back
    # under its node id, so the SuperLink shows nothing; its context.state is empty. FedGC
    # keeps theta_m there: its reply says it is another life of the node, and the run stops
    # naming the client instead of going on from a silently re-initialised theta_m
    from fedcausal_flwr.appconfig import glue, view
    from fedcausal_flwr.client_app import app as client_app
    from fedcausal_flwr.testing import InProcessGrid
    from tests.helpers.faults import SMALL

    rc, k = dict(SMALL["fedgc"][0]), SMALL["fedgc"][1]
    grid = InProcessGrid(client_app, k, rc)
    strategy = glue("fedgc").strategy("fedgc", view("fedgc", rc))
    done: list[int] = []

    def restart_after_round_1(res) -> None:
        if len(res.history) == 1 and not done:
            done.append(grid.restart_node(1, keep_id=True))

    strategy.checkpoint = restart_after_round_1
    result = strategy.start(grid=grid)
    assert done == [1001]
    assert result.status.startswith("stopped: client 1 (node 1001) restarted under the same "
                                    "node id"), result.status
    assert len(result.history) == 1
