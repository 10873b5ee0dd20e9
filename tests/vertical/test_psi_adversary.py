"""Issue 35, item 4: a PSI party that deviates is caught and named; set sizes are bounded.

- Size: a party's set larger than another party's node config ``max-psi-set`` stops the run at
  discovery (nothing blinded), naming both parties and the key; the run config cannot raise
  the limit; a party refuses such a set itself before any work per point.
- Group: a party whose own blinded set holds repeated points or encodings outside the group
  stops the run naming that party (node), not the ID column and not the next party.
- Order: a party that reorders, replaces, drops or re-keys the points of another party's set
  at its hop fails the hop's proof; the run stops naming it, the hop and whose set, before
  anything of it is relayed. Honest parties' proofs pass (the PSI tests in test_psi.py run
  through the same checks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict

from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.secure import psi
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical import dispatch, wire
from fedcausal_flwr.vertical.client import VFedCDClient
from tests.vertical.test_psi import HELD, RC, own_csvs

BAD = 1  # the deviating party


def tampering(pid: int, phase: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable:
    """The App's ClientApp, whose partition ``pid`` replaces the points of its ``phase``
    reply (the first array, ``psi``) by ``fn(points)``."""
    def call(msg, context):
        reply = client_app(msg, context)
        if msg.metadata.message_type == f"train.vfedcd_{phase}" and not reply.has_error() \
                and int(context.node_config["partition-id"]) == pid:
            arrays = reply.content["arrays"].to_numpy_ndarrays()
            arrays[0] = np.ascontiguousarray(fn(arrays[0]), dtype=np.uint8)
            reply.content["arrays"] = ArrayRecord(arrays)
        return reply
    return call


def start(tmp_path, monkeypatch, app=client_app, node: dict[int, dict] | None = None,
          rc: dict | None = None):
    monkeypatch.delenv("FEDCAUSAL_ID_KEY", raising=False)
    cfgs = own_csvs(tmp_path, HELD)
    for m, extra in (node or {}).items():
        cfgs[m] = {**cfgs[m], **extra}
    rc = {**RC, **(rc or {})}
    grid = InProcessGrid(app, 3, rc, cfgs)
    return glue("vfedcd").strategy("vfedcd", rc).start(grid=grid), grid


def phases(grid) -> set[str]:
    return {m.metadata.message_type for m in grid.sent}


def other_point(n: int = 1) -> np.ndarray:
    return psi.reblinded(psi.hashed_points([f"not-an-id-{i}" for i in range(n)]),
                         psi.new_key())


def swapped(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    out[[0, 1]] = out[[1, 0]]
    return out


def replaced(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    out[0] = other_point()[0]
    return out


# ---- the proof of a hop, on its own ----------------------------------------------------
def test_a_hops_proof_passes_for_the_honest_hop_and_fails_for_any_deviation():
    x = psi.reblinded(psi.hashed_points([f"id-{i}" for i in range(12)]), psi.new_key())
    key, label = psi.new_key(), psi.hop_label(1, 0, 1, 3)
    K, y = psi.commitment(key), psi.reblinded(x, key)
    assert psi.hop_proof_ok(x, y, K, psi.hop_proof(x, y, key, label), label)
    assert psi.hop_proof_ok(x[:0], y[:0], K, psi.hop_proof(x[:0], y[:0], key, label), label)
    other = psi.new_key()
    cheats = {"reversed": y[::-1], "two swapped": swapped(y), "one replaced": replaced(y),
              "another key": psi.reblinded(x, other), "one point dropped": y[:-1]}
    for what, bad in cheats.items():
        # the cheat's own best proof: made honestly over what it sends, with its own key
        k = other if what == "another key" else key
        proof = psi.hop_proof(x[:len(bad)], bad, k, label)
        assert not psi.hop_proof_ok(x, bad, K, proof, label), what
    proof = psi.hop_proof(x, y, key, label)
    assert not psi.hop_proof_ok(x, y, K, proof, psi.hop_label(2, 0, 1, 3))  # bound to its hop
    assert not psi.hop_proof_ok(x, y, psi.commitment(other), proof, label)
    assert not psi.hop_proof_ok(x, y, K, bytes(psi.PROOF_BYTES), label)
    junk = np.random.default_rng(5).integers(0, 256, y.shape, dtype=np.uint8)
    assert not psi.hop_proof_ok(x, junk, K, psi.hop_proof(x, y, key, label), label)


def test_a_set_with_repeated_or_invalid_points_is_named_as_such():
    pts = psi.reblinded(psi.hashed_points(["a", "b", "c"]), psi.new_key())
    assert psi.points_problem(pts) is None
    assert "repeated" in psi.points_problem(pts[[0, 1, 1]])
    bad = pts.copy()
    bad[2] = np.zeros(psi.POINT_BYTES, np.uint8)
    assert "point 2 of 3 is not a valid point" in psi.points_problem(bad)
    identity = np.zeros((1, psi.POINT_BYTES), np.uint8)
    identity[0, 0] = 1
    assert "not a valid point" in psi.points_problem(identity)


# ---- a party that deviates, through the App --------------------------------------------
@pytest.mark.parametrize("what, fn", [("reversed", lambda a: a[::-1]), ("two swapped", swapped),
                                      ("one replaced", replaced),
                                      ("another key", lambda a: psi.reblinded(a, psi.new_key())),
                                      ("random bytes", lambda a: np.random.default_rng(3)
                                       .integers(0, 256, a.shape, dtype=np.uint8))])
def test_a_party_that_tampers_with_a_set_at_its_hop_stops_the_run_named(
        tmp_path, monkeypatch, what, fn):
    res, grid = start(tmp_path, monkeypatch, tampering(BAD, "psi_hop", fn))
    st = res.status
    assert st.startswith("stopped"), (what, st)
    node = grid.node_id(BAD)
    assert f"party {BAD} (node {node}) at hop 1, on party 0's set" in st, (what, st)
    assert "ID column" not in st and "party 2 (node" not in st, (what, st)
    assert "train.vfedcd_keys" not in phases(grid)  # stopped before any key or training
    assert "train.vfedcd_plain_setup" not in phases(grid)


def test_a_hop_that_returns_fewer_points_stops_the_run_named(tmp_path, monkeypatch):
    res, grid = start(tmp_path, monkeypatch, tampering(BAD, "psi_hop", lambda a: a[:-1]))
    assert res.status.startswith("stopped"), res.status
    assert f"client {BAD} failed in phase vfedcd_psi_hop" in res.status, res.status


@pytest.mark.parametrize("what, fn, says", [
    ("repeated", lambda a: a[np.arange(len(a)) // 2], "repeated"),
    ("random bytes", lambda a: np.random.default_rng(3).integers(0, 256, a.shape,
                                                                dtype=np.uint8),
     "not a valid point of the prime-order group")])
def test_a_party_whose_own_set_is_not_distinct_group_points_is_named(
        tmp_path, monkeypatch, what, fn, says):
    res, grid = start(tmp_path, monkeypatch, tampering(BAD, "psi_blind", fn))
    st = res.status
    assert st.startswith("stopped"), (what, st)
    assert f"party {BAD} (node {grid.node_id(BAD)}) sent" in st and says in st, (what, st)
    assert "ID column" not in st and "party 2" not in st, (what, st)
    assert "train.vfedcd_psi_hop" not in phases(grid)  # nothing of it relayed


# ---- set sizes ---------------------------------------------------------------------------
def test_a_set_above_a_partys_own_limit_stops_the_run_at_discovery(tmp_path, monkeypatch):
    # party 1 holds 30 IDs, party 2 holds 25; party 0 accepts at most 26 (its node config);
    # the run config's keys of the same name are the submitter's, not party 0's: ignored
    res, grid = start(tmp_path, monkeypatch, node={0: {"max-psi-set": 26}},
                      rc={"max-psi-set": 10**6, "vertical.max-psi-set": 10**6})
    st = res.status
    assert st.startswith("stopped"), st
    assert "party 1 holds 30 IDs, above party 0's limit of 26" in st, st
    assert "party 2 holds" not in st and "'max-psi-set'" in st, st
    assert phases(grid) == {"query.info"}  # nothing blinded


def test_a_party_refuses_an_oversize_set_before_any_work_per_point(tmp_path, monkeypatch):
    # a server that does not check the limits: the party refuses at its hop, naming the set
    monkeypatch.setattr("fedcausal_flwr.vertical.strategy.VFedCD._check_psi_limits",
                        lambda *a: None)
    res, grid = start(tmp_path, monkeypatch, node={2: {"max-psi-set": 29}})
    st = res.status
    assert st.startswith("stopped"), st
    assert "party 2: hop 1: party 1's set of 30 points" in st and "'max-psi-set'" in st, st

    calls = []
    monkeypatch.setattr(psi, "reblinded", lambda *a: calls.append(a) or a[0])
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": 0, "num-partitions": 3,
                                                    "max-psi-set": 5},
                  state=RecordDict(), run_config={})
    party = VFedCDClient(np.zeros((4, 1)), np.array([0]), None, 0, 3, context=ctx,
                         psi_ids=["a", "b", "c", "d"])
    assert party.get_properties({})["max-psi-set"] == 5
    party.psi_blind([], {})
    calls.clear()
    big = np.zeros((6, psi.POINT_BYTES), np.uint8)
    msg = wire.layout("vfedcd_psi_hop", "down", 0, 1).pack({"psi": big})
    with pytest.raises(ValueError, match="party 0: hop 1: party 2's set of 6 points"):
        party.psi_hop(msg, {dispatch.PSI_HOP: 1})
    assert calls == []  # refused before re-blinding a single point
