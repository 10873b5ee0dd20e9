"""Issue 24, item 1: VFedCD aligns own CSVs by private set intersection, no shared secret.

- The ring DH-PSI of :mod:`fedcausal_flwr.secure.psi` finds exactly the plaintext intersection
  (3 parties; empty, partial and full overlaps), every party's rows in one common order.
- What reaches the server: no ID, no unblinded point ``H(id)``, and no singly-blinded value
  ``k_j H(id)`` except the owner's own first message; no ``ids`` at discovery.
- An in-process run of 3 parties' own CSVs aligned by PSI learns the B of the keyed-hash path
  on the same data (the row order differs, so up to summation order), and a party with
  ``id-key`` beside parties without stops the run, named.
"""

from __future__ import annotations

import csv
from functools import reduce

import numpy as np
import pytest

from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.secure import psi
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.faults import SMALL

RC = {**SMALL["vfedcd"][0], "vertical.data": "node", "vertical.parts": "2,2,2",
      "vertical.num-epochs": 2, "vertical.batch": 64, "min-nodes": 3, "node-wait-s": 5.0,
      "round-timeout-s": 30.0}
CONSENT = {"vfedcd-accept-backends": "mock", "vfedcd-min-key-bits": 256}


def ring(sets: list[list[str]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The protocol's arithmetic without the relay: each party's permutation and its positions
    of the shared values (what the server sends it)."""
    K = len(sets)
    keys = [psi.new_key() for _ in sets]
    perms = [psi.random_order(len(s)) for s in sets]
    cur = {m: psi.blinded(psi.hashed_points(s), keys[m], perms[m]) for m, s in enumerate(sets)}
    for h in range(1, K):
        cur = {(j - h) % K: psi.reblinded(cur[(j - h) % K], keys[j]) for j in range(K)}
    return perms, psi.common_positions([cur[m] for m in range(K)])


@pytest.mark.parametrize("overlap", ["empty", "partial", "full", "one-empty-set"])
def test_the_intersection_equals_the_plaintext_one_in_one_common_order(overlap):
    rng = np.random.default_rng(101)
    universe = [f"id-{i}" for i in range(60)]
    if overlap == "empty":
        sets = [universe[0:20], universe[20:40], universe[40:60]]
    elif overlap == "full":
        sets = [list(rng.permutation(universe[:25])) for _ in range(3)]
    elif overlap == "one-empty-set":
        sets = [universe[:10], [], universe[:10]]
    else:
        sets = [[u for u in universe if rng.random() < 0.6] for _ in range(3)]
    perms, positions = ring(sets)
    plain = reduce(set.intersection, (set(s) for s in sets))
    aligned = [[sets[m][r] for r in psi.rows_of(perms[m], positions[m], len(sets[m]))]
               for m in range(3)]
    assert aligned[0] == aligned[1] == aligned[2]  # one common order
    assert sorted(aligned[0]) == sorted(plain) and len(set(aligned[0])) == len(plain)
    if overlap == "partial":
        assert 0 < len(plain) < min(map(len, sets))  # the case is a real partial overlap


def test_a_server_cannot_name_rows_out_of_range_or_twice():
    with pytest.raises(ValueError, match="out of range or repeated"):
        psi.rows_of(np.arange(5), [1, 1], 5)
    with pytest.raises(ValueError, match="out of range or repeated"):
        psi.rows_of(np.arange(5), [5], 5)
    with pytest.raises(ValueError, match="not a valid point"):
        psi.reblinded(np.zeros((1, psi.POINT_BYTES), np.uint8), psi.new_key())


# ---- the App's path: own CSVs, 3 parties -----------------------------------------------
IDS = [f"patient-{i:04d}-zq" for i in range(30)]


def own_csvs(tmp_path, held, key: dict[int, str] | None = None) -> dict[int, dict]:
    """Three parties' CSVs (id, a, b) of one 30 x 6 sample; party m holds rows ``held[m]``
    (in that order) and node config ``id-key`` ``key[m]`` where given."""
    X = np.random.default_rng(7).standard_normal((len(IDS), 6))
    X[:, 2] += X[:, 0]
    X[:, 4] -= 0.8 * X[:, 3]
    out = {}
    for m in range(3):
        path = tmp_path / f"p{m}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", f"a{m}", f"b{m}"])
            w.writerows([[IDS[r], *X[r, 2 * m:2 * m + 2]] for r in held[m]])
        out[m] = {"data-path": str(path), **CONSENT,
                  **({"id-key": key[m]} if key and m in key else {})}
    return out


HELD = [range(30), range(29, -1, -1), [r for r in range(30) if r % 7]]  # 25 shared


def run(tmp_path, cfgs):
    grid = InProcessGrid(client_app, 3, RC, cfgs)
    return glue("vfedcd").strategy("vfedcd", RC).start(grid=grid), grid


@pytest.mark.integration
def test_psi_run_learns_the_keyed_hash_runs_graph(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDCAUSAL_ID_KEY", raising=False)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    got, grid = run(tmp_path / "a", own_csvs(tmp_path / "a", HELD))
    keyed, _ = run(tmp_path / "b", own_csvs(tmp_path / "b", HELD, dict.fromkeys(range(3), "k")))
    assert got.status == keyed.status == "completed", (got.status, keyed.status)
    assert got.metrics["samples"] == {**keyed.metrics["samples"], "aligned_by": "psi"} == {
        "shared": 25, "unused": {"party 0": 5, "party 1": 5}, "aligned_by": "psi"}
    assert keyed.metrics["samples"]["aligned_by"] == "ids"
    sent = [m.metadata.message_type for m in grid.sent]
    assert sent[:7] == ["query.info"] * 3 + ["train.vfedcd_psi_blind"] * 3 + \
        ["train.vfedcd_psi_hop"] * 1
    assert sent.count("train.vfedcd_psi_hop") == 3 * 2  # K - 1 hops of K parties
    # one full batch: the rows' order (keyed-hash vs blinded-value sort) only reorders sums
    np.testing.assert_allclose(got.estimates["B"], keyed.estimates["B"], rtol=0, atol=1e-9)
    assert np.abs(got.estimates["B"]).max() > 0


def test_parties_that_align_differently_stop_the_run_named(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDCAUSAL_ID_KEY", raising=False)
    res, grid = run(tmp_path, own_csvs(tmp_path, HELD, {1: "k"}))
    assert res.status.startswith("stopped"), res.status
    assert "party 1 by sample ids" in res.status and "party 0 by private set" in res.status
    assert {m.metadata.message_type for m in grid.sent} == {"query.info"}


def _records(message) -> tuple[list[np.ndarray], str]:
    """A message's arrays and the text of its other records."""
    c = message.content
    arrays = [a.numpy() for rec in c.array_records.values() for a in rec.values()]
    text = repr(dict(c.config_records)) + repr(dict(c.metric_records))
    return arrays, text


@pytest.mark.integration
def test_no_id_no_hash_and_no_other_partys_singly_blinded_value_reaches_the_server(
        tmp_path, monkeypatch):
    monkeypatch.delenv("FEDCAUSAL_ID_KEY", raising=False)
    keys: list[bytes] = []
    draw = psi.new_key
    monkeypatch.setattr(psi, "new_key", lambda: keys.append(draw()) or keys[-1])
    res, grid = run(tmp_path, own_csvs(tmp_path, HELD))
    assert res.status == "completed", res.status
    assert len(keys) == 3
    held = [[IDS[r] for r in h] for h in HELD]
    H = {m: {bytes(p) for p in psi.hashed_points(held[m])} for m in range(3)}
    every_H = set().union(*H.values())
    single = {bytes(p) for k in keys for p in psi.reblinded(psi.hashed_points(IDS), k)}
    own = {}  # party m's first message: its own points times its own key, nothing else
    for r in grid.received:
        arrays, text = _records(r)
        assert not any(i in text for i in IDS)
        assert not any(i.encode() in a.tobytes() for a in arrays for i in IDS)
        values = {bytes(row) for a in arrays if a.ndim == 2 and a.shape[1] == 32 for row in a}
        assert not values & every_H  # no unblinded hash
        if r.metadata.message_type == "train.vfedcd_psi_blind":
            m = r.metadata.src_node_id
            own[m] = values
            assert any(values == {bytes(p) for p in psi.reblinded(
                np.array([list(x) for x in H[p]], np.uint8), k)} for k in keys for p in H)
        else:
            assert not values & single, r.metadata.message_type  # never one key only
        if r.metadata.message_type == "query.info":
            assert "'ids'" not in text and "'alignment': 'psi'" in text
    assert len(own) == 3
