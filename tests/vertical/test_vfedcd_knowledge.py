"""VFedCD prior knowledge and missing values (issue 22).

- Knowledge keys (``vertical.forbid``, ``require``, ``tiers``, ``exogenous``) are checked
  against the federation's variable names at setup: an unknown name or a required cycle fails
  the run before any ``train.*`` message.
- A forbidden entry of B is exactly 0 in every step's graph fragments and in the result, and
  never in the DAG whatever ``tau``; a required edge is always in the DAG.
- Missing cells (NaN) are 0 as inputs and out of the loss; each party's share is reported; a
  share above ``vertical.max-missing`` stops the run before any ``train.*`` message.
- Without knowledge and missing cells a run gives the graph of the one before this change.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data
from fedcausal_flwr.data.csvdata import read_csv
from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical import app as vertical
from fedcausal_flwr.vertical import decoder, dispatch, loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import party_data
from fedcausal_flwr.vertical.model import VFedCDSettings

# the paper's settings on a small data set (as tests/vertical/test_app_vfedcd.py), mock backend
RC = {**VFedCDSettings.paper().app_config(), "algorithm": "vfedcd", "vertical.d": 6,
      "vertical.edges": 8, "vertical.n": 20, "vertical.num-epochs": 2, "vertical.batch": 8,
      "vertical.he-backend": "mock", "vertical.key-bits": 256, "node-wait-s": 5.0,
      "vertical.gamma": 0.5, "seed": 4, "vertical.insecure-test-keys": True,
      "vertical.vfedcd-accept-backends": "mock", "vertical.vfedcd-accept-modes":
      "vfedcd,ctv,framework", "vertical.vfedcd-min-key-bits": 256,
      "vertical.loss": "nll", "vertical.optimizer": "adam", "vertical.lr": 0.05}
KNOWLEDGE = ("forbid", "require", "tiers", "exogenous")
# B (hex floats) and the DAG of this run (vfedcd and framework modes) before knowledge and
# missing values existed (main at 6f10408, whose sha256 prefixes of B and the DAG these match)
GOLDEN = json.loads((Path(__file__).parent / "golden_main.json").read_text())


def assert_golden(mode: str, B: np.ndarray, dag: np.ndarray) -> None:
    """B to 1e-9 relative (another numpy, scipy or CPU moves its last bits), the DAG exactly."""
    want = np.array([[float.fromhex(x) for x in row] for row in GOLDEN[mode]["B"]])
    np.testing.assert_allclose(np.asarray(B, float), want, rtol=1e-9, atol=1e-300, err_msg=mode)
    np.testing.assert_array_equal(np.asarray(dag, float), GOLDEN[mode]["dag"], err_msg=mode)


def run(rc: dict, app=client_app, k: int = 3, node_configs=None):
    grid = InProcessGrid(app, k, rc, node_configs)
    return vertical.strategy("vfedcd", rc).start(grid=grid), grid


def trains(grid) -> list[str]:
    return [m.metadata.message_type for m in grid.sent
            if m.metadata.message_type.startswith("train.")]


@pytest.mark.integration
def test_without_knowledge_or_missing_cells_runs_are_the_runs_before():
    absent = {k: v for k, v in RC.items() if k.split(".")[-1] not in KNOWLEDGE}
    res, grid = run(absent)  # keys absent, secure dispatch through Flower
    assert_golden("vfedcd", res.estimates["B"], res.estimates["dag"])
    assert "knowledge" not in res.metrics and set(res.estimates) == {"B", "dag"}
    assert "missing" not in res.metrics
    assert not any(k.startswith("knowledge") for m in grid.sent
                   for k in m.content.config_records.get("config", {}))
    rc = {**RC, "vertical.mode": "framework", **{f"vertical.{k}": "" for k in KNOWLEDGE}}
    xs = [party_data(rc, i, 3)[0] for i in range(3)]  # keys empty: the reference loop
    s = VFedCDSettings.from_run_config(rc)
    assert V.prior_masks(s, [f"x{i}" for i in range(6)]) is None
    B = V.graph(loop.train_reference(xs, s).F, [2, 2, 2])
    assert_golden("framework", B, V.dag_at_threshold(B, s.tau))


def test_knowledge_syntax_and_names_are_checked_naming_the_key():
    s = VFedCDSettings.from_run_config({"vertical.forbid": "x0->x1", "vertical.tiers": "x5 < x4"})
    assert s.forbid == "x0->x1" and s.knowledge()
    with pytest.raises(ValueError, match="vertical 'forbid'.*not an edge"):
        VFedCDSettings.from_run_config({"vertical.forbid": "x0-x1"})
    with pytest.raises(ValueError, match="no variable named 'y'"):
        V.prior_masks(VFedCDSettings(require="y->x1"), ["x0", "x1"])


@pytest.mark.parametrize(("knowledge", "words"), [
    ({"vertical.forbid": "x0->nope"}, "no variable named 'nope'"),
    ({"vertical.require": "x0->x1, x1->x2, x2->x0"}, "cycle x0 -> x1 -> x2 -> x0"),
])
def test_bad_knowledge_fails_before_any_round(knowledge, words):
    grid = InProcessGrid(client_app, 3, {**RC, **knowledge})
    strategy = vertical.strategy("vfedcd", {**RC, **knowledge})
    saved = []
    strategy.checkpoint = lambda r: saved.append(r.status)
    with pytest.raises(ValueError, match=words):
        strategy.start(grid=grid)
    assert trains(grid) == [] and saved[-1].startswith("failed") and words in saved[-1]


def test_dag_never_holds_a_forbidden_edge_and_always_the_required_ones():
    rng = np.random.default_rng(0)
    B = rng.uniform(0, 1, (4, 4))
    forbid, require = np.zeros((4, 4), bool), np.zeros((4, 4), bool)
    forbid[0, 1] = forbid[2, 3] = True
    require[3, 0] = True
    B[3, 0] = 0.0  # a required edge of weight 0
    B[0, 1] = B[2, 3] = 2.0  # the strongest entries are forbidden
    prior = Masks(forbid, require, np.zeros((0, 4), bool), np.zeros((0, 4), bool))
    for tau in (0.0, 0.5, 10.0):
        G = V.dag_at_threshold(B, tau, prior)
        assert V.is_dag(G) and not G[forbid].any() and G[require].all()
    assert V.dag_at_threshold(B, 0.0)[forbid].any()  # without the masks tau 0 takes them


@pytest.mark.integration
def test_forbidden_entries_are_zero_at_every_step_and_required_ones_kept():
    rc = {**RC, "vertical.forbid": "x1->x0, *->x3", "vertical.require": "x5->x2",
          "vertical.tiers": "x4 < x0", "vertical.tau": 100.0, "vertical.dp-b": 0.0}
    s = VFedCDSettings.from_run_config(rc)
    prior = V.prior_masks(s, [f"x{i}" for i in range(6)])
    assert prior.forbid_W[1, 0] and prior.forbid_W[:, 3].sum() == 5 and prior.forbid_W[0, 4]
    assert prior.forbid_W[2, 5]  # the reverse of a required edge closes a cycle
    xs = [party_data(rc, i, 3)[0] for i in range(3)]
    seen = []
    real = dispatch.receive

    def spy(ctvs, graphs):  # every step's graph fragments, as the parties sent them
        seen.append(V.assemble([sum(g[f"B.t{t}"] for g in graphs.values()) for t in range(3)]))
        real(ctvs, graphs)

    dispatch.receive = spy
    try:
        parties, ctv = dispatch.run_local(xs, s, parties_backend(), 2, prior=prior)
    finally:
        dispatch.receive = real
    assert len(seen) == 5 and all(np.all(B[prior.forbid_W] == 0) for B in seen)
    assert (np.abs(seen[-1]) > 0).sum() > 20  # the rest is learned
    F = dispatch.fragments_of(parties)
    ref = loop.train_reference(xs, s, prior=prior)
    np.testing.assert_allclose(V.graph(F, [2, 2, 2]), V.graph(ref.F, [2, 2, 2]), atol=1e-12)
    res, _ = run(rc)  # the Flower path: the server sends the masks, the parties hold them
    B = res.estimates["B"]
    np.testing.assert_allclose(B, V.graph(ref.F, [2, 2, 2]), rtol=0, atol=1e-12)
    assert np.all(B[prior.forbid_W] == 0)
    assert np.array_equal(res.estimates["dag"], prior.require_W.astype(float))  # tau 100
    assert np.array_equal(res.estimates["B_forbidden"], prior.forbid_W.astype(float))
    assert np.array_equal(res.estimates["B_required"], prior.require_W.astype(float))
    assert res.metrics["knowledge"] == {"forbidden": int(prior.forbid_W.sum()), "required": 1}
    assert res.names["B_forbidden"] == [f"x{i}" for i in range(6)]
    kept = {(s, t) for s, t, _, _ in res.edges(tau=1e9)}  # required edges at any threshold
    assert kept == {("x5", "x2")}
    assert res.threshold(1e9).estimates["B"][5, 2] == B[5, 2]


def parties_backend():
    from fedcausal_flwr.secure.shares import backend

    return backend("mock", 256)


def test_required_edges_carry_no_l1_and_no_ctv_gradient():
    prior = V.prior_masks(VFedCDSettings(require="x0->x1"), ["x0", "x1", "x2"])
    B = np.full((3, 3), 0.5)
    u = v = np.ones(3) / np.sqrt(3)
    G = V.ctv_gradient(B, 1.0, u, v, 5, 0.1, prior)[0]
    assert G[0, 1] == 0 and G[1, 0] == 0 and G[0, 2] != 0  # required; forbidden (reverse)
    s = VFedCDSettings(lambda1=0.1, require="x0->x1")
    held = dispatch._held(prior, [1, 2], 0, 1, s)
    assert held["lambda1"][0, :, 0].tolist() == [0.0, 0.1]  # x0->x1 free of L1, x0->x2 not
    assert held["keep"][0, :, 0].tolist() == [1.0, 1.0]


def test_the_loss_over_observed_cells():
    rng = np.random.default_rng(1)
    e = rng.standard_normal((6, 2))
    lv = np.array([0.3, -0.2])
    for log_var in (None, lv):  # nothing missing: the ordinary loss
        full = decoder.residual_loss(e, log_var)
        masked = decoder.observed_loss(e, log_var)
        assert np.isclose(full[0], masked[0]) and np.allclose(full[1], masked[1])
    e2 = e.copy()
    e2[[0, 3], 1] = np.nan
    L, r, g = decoder.residual_loss(e2, lv)
    obs = ~np.isnan(e2)
    by_hand = sum((0.5 * lv[j] + 0.5 * e2[obs[:, j], j] ** 2 * np.exp(-lv[j])).sum()
                  for j in range(2)) / 6
    assert np.isclose(L, by_hand) and np.all(r[~obs] == 0) and np.all(np.isfinite(r))
    assert np.isclose(g[1], 0.5 * 4 / 6 - 0.5 * (e2[obs[:, 1], 1] ** 2).sum() / 6 * np.exp(-lv[1]))


def missing_app(share: dict[int, float], extra: int = 0) -> ClientApp:
    """The App's built-in parties with a share of their cells missing (MCAR, seeded); party 1
    also holds ``extra`` complete rows no other party has."""
    def make(context) -> dict:
        rc, nc = context.run_config, context.node_config
        pid = int(nc["partition-id"])
        x, _, cols = party_data(rc, pid, int(nc["num-partitions"]))
        x = x.copy()
        x[np.random.default_rng(pid).random(x.shape) < share.get(pid, 0.0)] = np.nan
        ids = np.arange(len(x))
        if pid == 1 and extra:
            x, ids = np.vstack([x, np.ones((extra, x.shape[1]))]), np.arange(len(x) + extra)
        return {"x": x, "columns": cols, "sample_ids": ids, "accept_backends": "mock"}

    return register(ClientApp(), "vfedcd", make)


@pytest.mark.integration
def test_missing_cells_train_on_what_was_observed_and_are_reported():
    res, grid = run(RC, app=missing_app({0: 0.2, 2: 0.1}))
    assert res.status == "completed"
    xs = [party_data(RC, i, 3)[0].copy() for i in range(3)]
    for pid, p in ((0, 0.2), (2, 0.1)):
        xs[pid][np.random.default_rng(pid).random(xs[pid].shape) < p] = np.nan
    ref = loop.train_reference(xs, VFedCDSettings.from_run_config(RC))
    np.testing.assert_allclose(res.estimates["B"], V.graph(ref.F, [2, 2, 2]), rtol=0,
                               atol=1e-12)
    assert np.all(np.isfinite(res.estimates["B"]))
    assert res.metrics["missing"] == {str(i): float(np.isnan(x).mean())
                                      for i, x in enumerate(xs)}
    assert res.metrics["missing"]["0"] > 0 and res.metrics["missing"]["1"] == 0
    raw = np.hstack(xs)
    for m in grid.sent + grid.received:  # no cell crosses: mock "ciphertexts" are fragments
        for rec in m.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                if a.dtype == np.float64:
                    assert not np.isin(np.round(raw, 8), np.round(a, 8)).any()
        for rec in m.content.metric_records.values():
            assert set(rec) <= {"num-examples", "loss", "missing"}


def test_a_party_above_max_missing_stops_the_run_before_any_round():
    res, grid = run({**RC, "vertical.max-missing": 0.1}, app=missing_app({1: 0.3}))
    assert res.status.startswith("stopped") and trains(grid) == []
    for words in ("party 1 has 28.1% of its cells missing", "'vertical.max-missing' = 0.1"):
        assert words in res.status, res.status
    assert res.estimates == {}
    # below the limit over all its rows, above it over the rows the parties share: the
    # first reply tells, and the run stops there, before setup and any round
    res, grid = run({**RC, "vertical.max-missing": 0.2}, app=missing_app({1: 0.3}, extra=16))
    assert res.status.startswith("stopped") and trains(grid) == ["train.vfedcd_keys"] * 3
    assert "party 1 has 28.1% of its cells missing (of the shared rows)" in res.status


def test_the_plain_modes_hold_the_knowledge_too():
    rc = {**RC, "vertical.mode": "framework", "vertical.forbid": "x0->x2, x3->x4",
          "vertical.require": "x1->x5", "vertical.num-epochs": 1}
    res, _ = run(rc)
    s = VFedCDSettings.from_run_config(rc)
    prior = V.prior_masks(s, [f"x{i}" for i in range(6)])
    ref = loop.train_reference([party_data(rc, i, 3)[0] for i in range(3)], s, prior=prior)
    np.testing.assert_allclose(res.estimates["B"], V.graph(ref.F, [2, 2, 2]), rtol=0,
                               atol=1e-12)
    assert np.all(res.estimates["B"][prior.forbid_W] == 0) and res.estimates["dag"][1, 5] == 1


def test_own_csvs_with_empty_cells_and_named_knowledge(tmp_path):
    X = np.random.default_rng(4).standard_normal((12, 4))
    cfgs = {}
    for pid in range(2):
        path = tmp_path / f"p{pid}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", f"p{pid}u", f"p{pid}v"])
            for r in range(12):
                cells = [f"{v:.6f}" for v in X[r, 2 * pid:2 * pid + 2]]
                if pid == 1 and r in (2, 5):
                    cells[r % 2] = "" if r == 2 else "NA"  # empty and NA cells: missing
                w.writerow([str(r), *cells])
        cfgs[pid] = {"data-path": str(path), "id-key": "k", "vfedcd-accept-backends": "mock",
                     "vfedcd-min-key-bits": 256}
    rc = {**RC, "vertical.data": "node", "vertical.parts": "2,2", "vertical.num-epochs": 1,
          "min-nodes": 2, "vertical.forbid": "p1v->p0u", "vertical.require": "p0u->p1v",
          "vertical.tau": 100.0}
    app = register(ClientApp(), "vfedcd", lambda context: node_data("vfedcd", context))
    res, grid = run(rc, app=app, k=2, node_configs=cfgs)
    assert res.status == "completed"
    sent = [dict(m.content.config_records.get("config", {})) for m in grid.sent]
    masks = [c for c in sent if "knowledge-forbid" in c]  # what reaches the parties: indices
    assert len(masks) == 4 and all(c["knowledge-require"] == "3" for c in masks)
    assert all(c["knowledge-forbid"] == "12" for c in masks)  # p1v->p0u, reverse of required
    assert not any(n in str(c) for c in sent for n in ("p0u", "p0v", "p1u", "p1v"))
    assert res.metrics["missing"] == {"0": 0.0, "1": 2 / 24}
    assert res.names["B"] == ["p0u", "p0v", "p1u", "p1v"]
    assert res.estimates["B"][3, 0] == 0 and res.estimates["dag"][0, 3] == 1
    assert res.estimates["dag"].sum() == 1
    bad = tmp_path / "noid.csv"
    bad.write_text("id,a\n1,0.5\n,0.7\n2,\n")
    with pytest.raises(ValueError, match="row 3, column 1 \\('id'\\): empty id label"):
        read_csv(bad, "party 0", id_column="id", allow_missing=True)
