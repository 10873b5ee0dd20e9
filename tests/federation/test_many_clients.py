"""Issue 23's measurement (``simulations/bench/many_clients.py``) measures what it says: the
in-process round split into parts that are all there, Flower's records unpatched afterwards,
and Flower's extractor pass handing out one message per node."""

from __future__ import annotations

import time

import pytest
from flwr.app import ArrayRecord, Message

from fedcausal_flwr.federation import exchange
from tests.helpers.sims import script

many_clients = script("many_clients")


def test_inprocess_round_is_split_into_its_parts(tmp_path):
    to_numpy = ArrayRecord.to_numpy_ndarrays
    r = many_clients.inprocess_run(6, 2, tmp_path)
    assert r["status"] == "completed" and r["rounds"] == 2
    parts = r["per_round"]
    assert set(parts) == set(many_clients.PARTS_OF_ROUND)
    for name in ("clients", "flower_records", "exchange_bookkeeping", "screens", "algorithm",
                 "checkpoint"):
        assert parts[name] > 0, name
    assert abs(sum(parts.values()) - r["round_s"]) < 1e-9
    assert 0 < r["base_fraction"] < 1
    # the timers are gone: Flower's records and the exchange's names are Flower's again
    assert exchange.ArrayRecord is ArrayRecord and exchange.Message is Message
    assert ArrayRecord.to_numpy_ndarrays is to_numpy


@pytest.mark.integration
def test_flower_extractor_pass_hands_out_one_message_per_node():
    scan = many_clients.flower_scan(12)
    assert scan["handed_out"] == 12 and scan["next_pass_s"] > 0


def test_busy_loops_run_while_the_block_runs_and_stop_after(monkeypatch):
    started = []
    popen = many_clients.subprocess.Popen

    def spy(*args, **kwargs):
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(many_clients.subprocess, "Popen", spy)
    with many_clients.busy_loops(2):
        time.sleep(0.3)
        assert len(started) == 2 and all(p.poll() is None for p in started)
    assert all(p.poll() is not None for p in started)  # stopped by the PIDs it started
