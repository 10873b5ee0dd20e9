"""Replicated FDBNL/PFDBNL runs: replicas ride in the same messages, each is an ordinary run.

The oracle of a replicated run is the reference loop run replica by replica on that
replica's rows with its lambdas; the fit on all rows is bit-identical to an unreplicated run.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr import stability
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn import replicas as rep
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.dbn.model import FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.stability import complementary_halves, selection_frequency, stability_bound
from tests.helpers.dbn import RC, run_inprocess

K = 4


def replica_reference(rc: dict, table: list[rep.Replica], rounds: int):
    """Every replica by the reference loop on its own rows (at most ``rounds`` rounds)."""
    pf = rc["algorithm"] == "pfdbnl"
    s = (PFDBNLSettings if pf else FDBNLSettings).from_run_config(rc)
    ref = dbn.pfdbnl_reference if pf else dbn.fdbnl_reference
    data = [client_data(rc, i, K) for i in range(K)]
    out = []
    for r in table:
        moms = [dbn.moments(Xt[idx], Xl[idx]) for Xt, Xl in data
                for idx in [rep.replica_rows(len(Xt), r.rows, s.seed, s.holdout)]]
        out.append(ref(moms, s.replace(lambda_w=r.lambda_w, lambda_a=r.lambda_a,
                                       max_rounds=rounds))[0])
    return out


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,rounds", [("fdbnl", 40), ("pfdbnl", 6)])
def test_replicas_are_ordinary_runs_in_one_message(algorithm, rounds):
    rc = {**RC, "algorithm": algorithm, "dbn.num-rounds": rounds}
    plain, g0 = run_inprocess(rc, K)
    result, g1 = run_inprocess({**rc, "dbn.replicas": 4}, K)
    assert result.status == "completed"
    # the fit on all rows is the unreplicated run, bit for bit, in as many exchanges
    for key in ("W", "A", "W_thresholded", "A_thresholded", "W_local", "A_local"):
        if key in plain.estimates:
            assert np.array_equal(plain.estimates[key], result.estimates[key]), key
    assert len(result.history) == len(plain.history)
    assert len(g1.sent) == len(g0.sent)
    # each half-sample replica is the reference loop on its half of every client's rows
    cls = PFDBNLSettings if algorithm == "pfdbnl" else FDBNLSettings
    strat_table = rep.replicas_of(cls.from_run_config({**rc, "dbn.replicas": 4}))
    refs = replica_reference(rc, strat_table, len(plain.history))
    tau = PFDBNLSettings.from_run_config(rc).tau_w
    W_f = selection_frequency([st.W for st in refs[1:]], tau)
    np.testing.assert_allclose(result.estimates["W_frequency"], W_f, atol=1e-12)
    assert set(np.unique(W_f)) <= {0, 0.25, 0.5, 0.75, 1.0}
    assert not np.array_equal(refs[1].W, refs[0].W) and not np.array_equal(refs[1].W, refs[2].W)
    stab = result.metrics["stability"]
    assert stab["replicas"] == 4 and stab["candidates"] == 5 * 4 + 5 * 5
    assert stab["false_edge_bound"] == pytest.approx(
        stability_bound(stab["mean_selected"], stab["candidates"], stab["threshold"]))
    if algorithm == "pfdbnl":
        W_lf = result.estimates["W_local_frequency"]
        assert W_lf.shape == (K, 5, 5)
        W_loc = [replica_reference(rc, [r], len(plain.history))[0].W_local[1]
                 for r in strat_table[1:]]
        np.testing.assert_allclose(W_lf[1], selection_frequency(W_loc, tau), atol=1e-12)
        assert result.frequencies(client=1)[("x0", "x1", 0)] == W_lf[1][0, 1]


@pytest.mark.integration
def test_the_replicated_message_carries_arrays_and_numbers_only():
    rc = {**RC, "dbn.replicas": 2, "dbn.lambda-select": "holdout", "dbn.num-rounds": 5}
    _, grid = run_inprocess(rc, K)
    train = [m for m in grid.sent if m.metadata.message_type == "train.local_replicas"]
    assert train
    R = 5 * (1 + 1 + 2)  # every lambda: training block, all rows, two halves
    arrays = train[0].content.array_records["arrays"]
    assert [tuple(a.shape) for a in arrays.values()][:4] == [(R, 5, 5), (R, 5, 5), (R, 5, 5),
                                                             (R, 5, 5)]
    replies = [m for m in grid.received if m.metadata.message_type == "train.local_replicas"]
    for m in replies:
        shapes = [tuple(a.shape) for a in m.content.array_records["arrays"].values()]
        assert shapes[2][1] == 4  # held-out loss per tau: numbers, never rows
        n_rows = 40
        assert all(n_rows not in s for s in shapes)


@pytest.mark.integration
def test_holdout_chooses_by_the_one_standard_error_rule():
    rc = {**RC, "dbn.lambda-select": "holdout", "dbn.num-rounds": 20}
    result, _ = run_inprocess(rc, K)
    est = result.estimates
    mean, se, edges = est["holdout_score"], est["holdout_se"], est["holdout_edges"]
    assert mean.shape == se.shape == edges.shape == (5, 4)
    g, t = stability.one_standard_error(mean, se, edges)
    assert float(est["lambda_chosen"]) == est["lambda_path"][g]
    assert float(est["tau_chosen"]) == est["tau_path"][t]
    # the rule: within one s.e. of the lowest score, no candidate has fewer edges
    lo = np.unravel_index(np.argmin(mean), mean.shape)
    assert mean[g, t] <= mean[lo] + se[lo]
    assert edges[g, t] == edges[mean <= mean[lo] + se[lo]].min()
    assert result.metrics["penalty"]["lambda"] == est["lambda_path"][g]
    assert result.metrics["penalty"]["score"] == mean[g, t]
    assert np.array_equal(est["W_thresholded"], dbn.threshold(est["W"], est["tau_path"][t]))
    assert result.thresholds()["W"] == est["tau_path"][t]
    # the reported graph is the fit on all rows at the chosen lambda
    ref = replica_reference(rc, [rep.Replica(rep.ALL_ROWS, est["lambda_path"][g],
                                             est["lambda_path"][g])], 20)[0]
    np.testing.assert_allclose(est["W"], ref.W, atol=1e-10)


def test_held_out_score_and_rule():
    losses = {0: np.array([[1.0, 2.0]]), 1: np.array([[3.0, 2.0]])}
    mean, se = stability.holdout_score(losses, {0: 1, 1: 3})
    np.testing.assert_allclose(mean, [[2.5, 2.0]])
    np.testing.assert_allclose(se, [[np.sqrt(0.25 * 2.25 + 0.75 * 0.25), 0.0]])
    mean = np.array([[1.0, 1.05, 3.0], [0.9, 2.0, 2.0]])
    se = np.full_like(mean, 0.2)
    edges = np.array([[4, 2, 0], [9, 5, 1]])
    one_se = stability.one_standard_error
    assert one_se(mean, se, edges) == (0, 1)  # fewest edges within 0.9 + 0.2
    assert one_se(mean, np.zeros_like(mean), edges) == (1, 0)  # no slack: the lowest


def test_halves_are_complementary_and_reproducible():
    a, b = complementary_halves(11, 1, 7), complementary_halves(11, 2, 7)
    assert len(a) == len(b) == 5 and not set(a) & set(b)
    assert np.array_equal(a, complementary_halves(11, 1, 7))
    assert not np.array_equal(a, complementary_halves(11, 3, 7))
    with pytest.raises(ValueError, match=">= 1"):
        complementary_halves(11, 0, 7)
    assert rep.train_rows(50, 0.2) == 40
    with pytest.raises(ValueError, match="need 2 or more"):
        rep.train_rows(2, 0.5)


@pytest.mark.parametrize("change,match", [
    ({"dbn.replicas": 3}, "must be even"),
    ({"dbn.lambda-path": "0.1,x"}, "comma-separated numbers"),
    ({"dbn.tau-path": ""}, "comma-separated numbers"),
    ({"dbn.stability-threshold": 0.5}, "stability-threshold"),
    ({"dbn.holdout": 1.0}, "holdout"),
])
def test_replica_settings_are_checked(change, match):
    with pytest.raises(ValueError, match=match):
        FDBNLSettings.from_run_config(change)


def test_a_client_refuses_a_bad_replica_message():
    from fedcausal_flwr.dbn.client import FDBNLClient

    Xt, Xlag = client_data(RC, 0, K)
    c = FDBNLClient(Xt, Xlag)
    z, zl = np.zeros((2, 5, 5)), np.zeros((2, 5, 5))
    good = [z, zl, z, zl, np.array([0, 1]), np.ones((2, 5))]
    cfg = {"phase": "local_replicas", "replica-seed": 0, "holdout": 0.2, "taus": ""}
    arrays, n, _ = c.fit(good, cfg)
    assert [a.shape for a in arrays] == [(2, 5, 5), (2, 5, 5), (2, 0)]
    with pytest.raises(ValueError, match="whole numbers"):
        c.fit([z, zl, z, zl, np.array([0, 10**6]), np.ones((2, 5))], cfg)
    with pytest.raises(ValueError, match="holdout"):
        c.fit(good, {**cfg, "holdout": 1.5})
    for key in ("replica-seed", "holdout"):  # a subsample's rows need both: no defaults
        with pytest.raises(ValueError, match=f"message has no '{key}'"):
            c.fit(good, {k: v for k, v in cfg.items() if k != key})
    # halves only from the run's own seed, and at most one per row (40 rows: 40)
    with pytest.raises(ValueError, match="not this run's seed 0"):
        c.fit(good, {**cfg, "replica-seed": 7})
    c.fit([z, zl, z, zl, np.array([0, 40]), np.ones((2, 5))], cfg)
    with pytest.raises(ValueError, match="at most as many halves as its 40 rows"):
        c.fit([z, zl, z, zl, np.array([0, 41]), np.ones((2, 5))], cfg)
    with pytest.raises(ValueError):
        c.fit([z, zl, z, zl, np.array([0, 1, 2]), np.ones((2, 5))], cfg)


def test_more_halves_than_a_client_may_answer_fails_before_any_round():
    from fedcausal_flwr.client_app import app as client_app
    from fedcausal_flwr.testing import InProcessGrid

    rc = {**RC, "dbn.replicas": 42}  # 40 rows a client: at most 40 halves
    grid = InProcessGrid(client_app, K, rc)
    with pytest.raises(ValueError, match="'dbn.replicas' = 42: a client with 40 rows"):
        app_dbn.strategy("fdbnl", rc).start(grid=grid)
    assert not [m for m in grid.sent if m.metadata.message_type.startswith("train")]
    rc = {**RC, "dbn.lambda-select": "holdout", "dbn.holdout": 0.99}
    with pytest.raises(ValueError, match="'dbn.holdout': holdout 0.99 of 40 rows leaves 0"):
        app_dbn.strategy("fdbnl", rc).start(grid=InProcessGrid(client_app, K, rc))


@pytest.mark.integration
def test_frequencies_reach_every_view_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    nx = pytest.importorskip("networkx")
    pd = pytest.importorskip("pandas")
    rc = {**RC, "dbn.replicas": 4, "dbn.lambda-select": "holdout", "dbn.num-rounds": 15}
    result, _ = run_inprocess(rc, K)
    freq = result.frequencies()
    W_f = result.estimates["W_frequency"]
    assert freq[("x0", "x1", 0)] == W_f[0, 1]
    assert ("x0", "x0", 0) not in freq and ("x0", "x0", 1) in freq
    stable = result.stable_edges(0.75)
    assert {(s, t, lag) for s, t, _, lag, _ in stable} == {
        k for k, f in freq.items() if f >= 0.75}
    G = result.to_networkx(multigraph=True)
    for s, t, lag in G.edges(keys=True):
        assert G.edges[s, t, lag]["frequency"] == freq[(s, t, lag)]
    frames = result.to_pandas()
    assert isinstance(frames["W_frequency"], pd.DataFrame)
    np.testing.assert_array_equal(frames["A1_frequency"].to_numpy(),
                                  result.estimates["A_frequency"])
    assert isinstance(G, nx.MultiDiGraph)
    # a threshold applies to weights, never to frequencies
    assert np.array_equal(result.threshold(0.5).estimates["W_frequency"], W_f)
    from fedcausal_flwr.plots import save_with_plots

    save_with_plots(result, tmp_path)
    assert {"confidence.png", "penalty.png", "graphs.png"} <= {p.name for p in tmp_path.iterdir()}
    assert not result.errors
    with pytest.raises(ValueError, match="replicas"):
        run_inprocess({**RC, "dbn.num-rounds": 3}, K)[0].stable_edges()
