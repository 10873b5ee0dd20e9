"""Late is not dead (issue 20), in process.

Discovery waits up to ``node-wait-s`` for ``min-nodes`` usable SuperNodes whatever the reply
timeout (a ``query.info`` reply later than ``round-timeout-s`` is taken); an exchange left with
too few valid replies after the reply timeout waits once more, at most one more timeout, for
the late ones (nothing is sent again), and a node that misses that too still stops the run,
named. :meth:`InProcessGrid.delay` makes a node's next replies late.
"""

from __future__ import annotations

import logging

import pytest

from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.nodes import RC, run, same

pytestmark = pytest.mark.integration  # every test here is a whole in-process run

TIMEOUT = 0.5


def late(node_of: int, seconds: float, count: int = 1):
    """An event: partition ``node_of``'s next ``count`` replies come ``seconds`` late."""
    return lambda g: g.delay(g.node_id(node_of), seconds, count)


class SlowStart(InProcessGrid):
    """Every node answers its first message (``query.info``) ``delay_s`` late: a cold app
    install on each SuperNode."""

    delay_s = 0.8

    def add_node(self, *args, **kwargs):  # noqa: D102
        node = super().add_node(*args, **kwargs)
        self.delay(node, self.delay_s)
        return node


def test_query_info_later_than_the_reply_timeout_but_within_node_wait_is_used(monkeypatch):
    import tests.helpers.nodes as tn

    monkeypatch.setattr(tn, "InProcessGrid", SlowStart)
    rc = {**RC, "num-rounds": 3, "node-wait-s": 5.0}
    result, grid, wall = run(rc, 3, timeout=TIMEOUT)
    assert result.status == "completed", result.status
    assert result.metrics["dropped"] == []
    assert [h["n_clients"] for h in result.history] == [3, 3, 3]
    assert SlowStart.delay_s <= wall  # it waited for the late discovery replies
    monkeypatch.setattr(tn, "InProcessGrid", InProcessGrid)
    ref, ref_grid, _ = run(rc, 3, timeout=TIMEOUT)
    same(result, ref)
    assert len(grid.sent) == len(ref_grid.sent)  # no message sent twice


def test_a_node_late_for_one_exchange_is_waited_for_once_more(caplog):
    # min-nodes = 3 of 3: partition 2's round-3 reply comes after the 0.5 s timeout but within
    # the retry's 0.5 s more; the run goes on and equals the uninterrupted run
    rc = {**RC, "num-rounds": 5, "min-nodes": 3}
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result, grid, wall = run(rc, 3, timeout=TIMEOUT, events={2: late(2, 0.75)})
    assert result.status == "completed", result.status
    assert [h["n_clients"] for h in result.history] == [3] * 5
    assert [h.get("retries", 0) for h in result.history] == [0, 0, 1, 0, 0]
    assert result.metrics["dropped"] == []
    assert any("retrying once" in r.getMessage() and "client 2" in r.getMessage()
               for r in caplog.records)
    ref, ref_grid, _ = run(rc, 3, timeout=TIMEOUT)
    same(result, ref)
    assert len(grid.sent) == len(ref_grid.sent)  # the retry waits; it sends nothing again
    assert all("retries" not in h for h in ref.history)  # honest records unchanged


def test_a_node_that_misses_the_retry_too_stops_the_run_named():
    rc = {**RC, "num-rounds": 5, "min-nodes": 3}
    result, grid, wall = run(rc, 3, timeout=TIMEOUT, events={2: lambda g: g.hang(g.node_id(2))})
    assert result.status.startswith("stopped") and "min-nodes=3" in result.status, result.status
    assert "no reply after a retry from client(s) [2]" in result.status
    assert len(result.history) == 2
    named = [d for d in result.metrics["dropped"] if d.startswith("client 2:")]
    assert len(named) == 1 and "nor in the retry" in named[0], result.metrics["dropped"]
    assert 2 * TIMEOUT <= wall  # the timeout, then the retry's


def test_a_late_reply_past_the_retry_counts_as_missing():
    rc = {**RC, "num-rounds": 5, "min-nodes": 3}
    result, _, _ = run(rc, 3, timeout=TIMEOUT, events={2: late(2, 3 * TIMEOUT)})
    assert result.status.startswith("stopped"), result.status
    assert any(d.startswith("client 2:") and "nor in the retry" in d
               for d in result.metrics["dropped"])
