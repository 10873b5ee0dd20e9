"""Data layer: lags, synthetic DBN simulator, DREAM4 / NetSim loaders, run-config dispatch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io

from fedcausal_flwr.data.dream4 import dream4_clients, load_dream4
from fedcausal_flwr.data.netsim import load_netsim, netsim_chunks, netsim_truth
from fedcausal_flwr.data.timeseries import lagged
from fedcausal_flwr.dbn.data import client_data, ground_truth
from fedcausal_flwr.dbn.synthetic import (
    client_dbn,
    companion_radius,
    data_seed,
    dbn_data,
    dbn_series,
    dbn_truth,
    federated_dbn,
    noise_scale_vector,
    stable_truth,
    truths_dbn,
)
from fedcausal_flwr.metrics import is_dag

# --- lagged ------------------------------------------------------------------------------

def test_lagged_hand_made_values():
    X = np.array([[1.0, 10], [2, 20], [3, 30], [4, 40]])
    Xt, Xlag = lagged(X, 2)
    expected = np.array([[0, 0, 0, 0], [1, 10, 0, 0], [2, 20, 1, 10], [3, 30, 2, 20]])
    np.testing.assert_array_equal(Xt, X)
    np.testing.assert_array_equal(Xlag, expected)
    Xt, Xlag = lagged(X, 2, pad="drop")
    np.testing.assert_array_equal(Xt, X[2:])
    np.testing.assert_array_equal(Xlag, expected[2:])


def test_lags_never_cross_segments():
    seg, L = np.repeat(np.arange(3), 5), 5
    X = np.column_stack([100.0 * seg + np.tile(np.arange(L), 3), seg])  # (segment, time) code
    Xt, Xlag = lagged(X, 2, segment_length=L, pad="drop")
    assert Xt.shape == (3 * (L - 2), 2) and Xlag.shape == (3 * (L - 2), 4)
    np.testing.assert_array_equal(Xt[:, 0] - Xlag[:, 0], 1)  # lag 1 = previous step
    np.testing.assert_array_equal(Xt[:, 0] - Xlag[:, 2], 2)  # lag 2 = two steps back
    np.testing.assert_array_equal(Xt[:, 1], Xlag[:, 1])  # same segment
    Xt, Xlag = lagged(X, 2, segment_length=L, pad="zero")
    t = np.arange(len(X)) % L
    assert Xt.shape == (len(X), 2) and not Xlag[t == 0].any()  # segment starts: no lags
    assert not Xlag[t == 1][:, 2:].any()
    np.testing.assert_array_equal(Xt[t >= 1, 0] - Xlag[t >= 1, 0], 1)
    np.testing.assert_array_equal(Xt[t >= 2, 0] - Xlag[t >= 2, 2], 2)


def test_lagged_errors():
    X = np.ones((5, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN/inf.*row 2, column 1"):
        lagged(X, 1)
    with pytest.raises(ValueError, match="fewer rows than the lag"):
        lagged(np.ones((2, 3)), 2)
    with pytest.raises(ValueError, match="fewer rows than the lag"):
        lagged(np.ones((6, 3)), 2, segment_length=2)
    with pytest.raises(ValueError, match="divide"):
        lagged(np.ones((7, 3)), 1, segment_length=2)
    with pytest.raises(ValueError, match="2-D"):
        lagged(np.ones(5), 1)
    with pytest.raises(ValueError, match="pad"):
        lagged(np.ones((5, 2)), 1, pad="edge")
    with pytest.raises(ValueError, match="lag order"):
        lagged(np.ones((5, 2)), 0)


# --- synthetic simulator -----------------------------------------------------------------

def test_truth_is_dag_with_expected_density():
    d, p, deg_w, deg_a, seeds = 10, 2, 4.0, 1.0, range(300)
    w_density, a_density = [], []
    for s in seeds:
        W, A = dbn_truth(s, d, p, deg_w, deg_a)
        assert W.shape == (d, d) and A.shape == (p * d, d)
        assert is_dag(W)
        nil = np.linalg.matrix_power((W != 0).astype(float), d)  # a DAG's adjacency is nilpotent
        assert not nil.any()
        w_density.append(np.count_nonzero(W) / (d * (d - 1) / 2))
        a_density.append(np.count_nonzero(A) / A.size)
    # 13,500 / 60,000 Bernoulli draws: sd of the mean is ~0.004 / ~0.0012
    assert abs(np.mean(w_density) - deg_w / d) < 0.03
    assert abs(np.mean(a_density) - deg_a / d) < 0.01


@pytest.mark.parametrize(("weights", "low", "high"), [("paper", 0.3, 0.5), ("code", 0.5, 2.0)])
def test_truth_weights_in_range(weights, low, high):
    d, eta = 8, 1.5
    W_all, A1_all, A2_all = [], [], []
    for s in range(40):
        W, A = dbn_truth(s, d, p=2, degree_w=3, degree_a=2, weights=weights, eta=eta)
        W_all.append(W[W != 0])
        A1_all.append(A[:d][A[:d] != 0])
        A2_all.append(A[d:][A[d:] != 0])
    for vals, scale in ((W_all, 1.0), (A1_all, 1.0), (A2_all, 1 / eta)):
        v = np.concatenate(vals)
        assert np.all(np.abs(v) >= scale * low - 1e-12)
        assert np.all(np.abs(v) <= scale * high + 1e-12)
        assert (v > 0).any() and (v < 0).any()


def test_truth_seed_forms_and_determinism():
    a, b = dbn_truth([3, 1], 6), dbn_truth([3, 1], 6)
    np.testing.assert_array_equal(a[0], b[0])
    c = dbn_truth([3, 2], 6)
    assert not np.array_equal(a[0], c[0]) or not np.array_equal(a[1], c[1])


def test_stable_truth_and_svar_checks():
    for s in range(20):
        W, A = stable_truth(s, 6, p=2)
        assert companion_radius(W, A) < 1
    W = np.zeros((3, 3))
    with pytest.raises(ValueError, match="stationary"):
        dbn_series(W, 1.5 * np.eye(3), 50, seed=0)
    with pytest.raises(ValueError, match="generator"):
        dbn_data(W, 0.5 * np.eye(3), 50, seed=0, generator="var")


def test_svar_data_follow_the_model():
    d, p, n = 4, 2, 20000
    W, A = stable_truth(1, d, p)
    Xt, Xlag = dbn_data(W, A, n, seed=5)
    assert Xt.shape == (n, d) and Xlag.shape == (n, p * d)
    np.testing.assert_array_equal(Xlag[1:, :d], Xt[:-1])  # one contiguous series
    np.testing.assert_array_equal(Xlag[1:, d:], Xlag[:-1, :d])
    U = Xt - Xt @ W - Xlag @ A  # structural residuals ~ N(0, I)
    assert np.abs(np.cov(U.T) - np.eye(d)).max() < 0.1
    assert np.abs(U.mean(axis=0)).max() < 0.05
    X = dbn_series(W, A, 30, seed=5)
    assert X.shape == (30, d) and np.isfinite(X).all()


def test_code_generator_matches_official_recipe():
    d, p, n = 5, 1, 20000
    W, A = dbn_truth(2, d, p)
    Xobs, Y = dbn_data(W, A, n, seed=1, generator="code")
    assert Xobs.shape == (n, d) and Y.shape == (n, p * d)
    X = Xobs - Y @ A  # latent i.i.d. SEM rows
    assert not Y[0].any()
    np.testing.assert_allclose(Y[1:], X[:-1], atol=1e-10)  # Y = zero-padded lag of X
    U = X - X @ W
    assert np.abs(np.cov(U.T) - np.eye(d)).max() < 0.1
    np.testing.assert_array_equal(dbn_series(W, A, n, 1, generator="code"), Xobs)


@pytest.mark.parametrize("generator", ["code", "svar"])
@pytest.mark.parametrize("heterogeneous", [False, True])
def test_client_dbn_equals_federated_slice(generator, heterogeneous):
    args = dict(d=5, p=2, generator=generator, heterogeneous=heterogeneous)
    clients, truths = federated_dbn(7, 4, 12, **args)
    assert len(clients) == 4 and len(truths) == 4
    for k in range(4):
        Xt, Xlag = client_dbn(7, k, 4, 12, **args)
        assert Xt.shape == (12, 5) and Xlag.shape == (12, 10)
        np.testing.assert_array_equal(Xt, clients[k][0])
        np.testing.assert_array_equal(Xlag, clients[k][1])
    for (W, A), (W2, A2) in zip(truths, truths_dbn(7, 4, **args), strict=True):
        np.testing.assert_array_equal(W, W2)
        np.testing.assert_array_equal(A, A2)


def test_client_dbn_simulates_a_homogeneous_federation_once_per_process(monkeypatch):
    """Issue 23: each client used to simulate the whole federation's series (O(K) per call,
    O(K^2) per exchange); now the series is kept per process, and the blocks stay the same
    bit for bit, also above the kept size and after a caller writes into its block."""
    from fedcausal_flwr.dbn import synthetic

    synthetic.homogeneous_rows.cache_clear()
    args = dict(d=4, p=1, generator="svar")
    clients, _ = federated_dbn(11, 5, 8, **args)
    calls = []
    real = synthetic.dbn_data
    monkeypatch.setattr(synthetic, "dbn_data", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    for k in range(5):
        Xt, Xlag = client_dbn(11, k, 5, 8, **args)
        Xt[:] = 0.0  # the caller's own copy: the kept rows do not change
        np.testing.assert_array_equal(client_dbn(11, k, 5, 8, **args)[1], clients[k][1])
        np.testing.assert_array_equal(client_dbn(11, k, 5, 8, **args)[0], clients[k][0])
    assert len(calls) == 1
    monkeypatch.setattr(synthetic, "CACHE_BYTES", 0)  # too large to keep: simulated per call
    np.testing.assert_array_equal(client_dbn(11, 3, 5, 8, **args)[0], clients[3][0])
    assert len(calls) == 2


def test_homogeneous_blocks_are_contiguous_and_truths_shared():
    clients, truths = federated_dbn(3, 3, 10, d=4, generator="code")
    W, A = truths[0]
    assert all(np.array_equal(W, t[0]) and np.array_equal(A, t[1]) for t in truths)
    Xt, Xlag = dbn_data(W, A, 30, data_seed(3), generator="code")
    np.testing.assert_array_equal(np.vstack([c[0] for c in clients]), Xt)
    np.testing.assert_array_equal(np.vstack([c[1] for c in clients]), Xlag)


def test_heterogeneous_truths_and_data_differ():
    clients, truths = federated_dbn(3, 3, 10, d=6, heterogeneous=True)
    for i in range(3):
        for j in range(i + 1, 3):
            assert not np.array_equal(truths[i][0], truths[j][0]) \
                or not np.array_equal(truths[i][1], truths[j][1])
            assert not np.array_equal(clients[i][0], clients[j][0])
    with pytest.raises(ValueError, match="client index"):
        client_dbn(3, 3, 3, 10, d=6)


def test_scale_free_graph_is_dag_with_hubs():
    """graph="sf": DAGs of mean degree ~4 whose in+out degrees are heavier-tailed than ER's."""
    d, er_max, sf_max, sf_edges = 20, [], [], []
    for s in range(100):
        W, _ = dbn_truth(s, d, graph="sf")
        assert is_dag(W)
        deg = (W != 0).sum(0) + (W != 0).sum(1)
        sf_max.append(deg.max())
        sf_edges.append(np.count_nonzero(W))
        er_max.append(((dbn_truth(s, d)[0] != 0).sum(0) + (dbn_truth(s, d)[0] != 0).sum(1)).max())
    assert abs(np.mean(sf_edges) - 2 * (d - 1) + 1) < 0.5  # m = 2 per node, 1 for node 2
    assert np.mean(sf_max) > np.mean(er_max) + 2
    assert np.array_equal(dbn_truth(4, d), dbn_truth(4, d, graph="er"))  # default unchanged
    with pytest.raises(ValueError, match="graph must be"):
        dbn_truth(0, 5, graph="ba")
    W, A = stable_truth(3, 10, graph="sf")
    assert companion_radius(W, A) < 1 and is_dag(W)


def test_noise_scales_set_the_noise_sd_per_variable():
    """noise_scales=(lo, hi): variable j's innovation sd is s_j in [lo, hi], from the data seed."""
    W, A = np.zeros((4, 4)), np.zeros((4, 4))  # no edges: x_t is the innovation itself
    sc = noise_scale_vector(4, 9, (0.5, 2.0))
    assert np.all((sc >= 0.5) & (sc <= 2.0)) and np.ptp(sc) > 0
    X = dbn_series(W, A, 20000, seed=9, noise_scales=(0.5, 2.0))
    np.testing.assert_allclose(X.std(0), sc, rtol=0.03)
    np.testing.assert_array_equal(dbn_series(W, A, 50, seed=9, noise_scales=None),
                                  dbn_series(W, A, 50, seed=9))
    Xc, _ = dbn_data(W, A, 20000, seed=9, generator="code", noise_scales=(0.5, 2.0))
    np.testing.assert_allclose(Xc.std(0), sc, rtol=0.03)
    with pytest.raises(ValueError, match="noise_scales"):
        noise_scale_vector(3, 0, (0.0, 1.0))
    clients, _ = federated_dbn(2, 2, 10, d=4, generator="svar", noise_scales=(0.5, 2.0))
    plain, _ = federated_dbn(2, 2, 10, d=4, generator="svar")
    assert not np.allclose(clients[0][0], plain[0][0])


# --- DREAM4 ------------------------------------------------------------------------------

def _tiny_dream4(folder: Path) -> Path:
    ts = folder / "insilico_size3_1_timeseries.tsv"
    rows = ['"Time"\t"G1"\t"G2"\t"G3"', "",
            "0\t0.1\t0.2\t0.3", "50\t0.4\t0.5\t0.6", "100\t0.7\t0.8\t0.9", "",
            "0\t1.1\t1.2\t1.3", "50\t1.4\t1.5\t1.6", "100\t1.7\t1.8\t1.9", ""]
    ts.write_text("\n".join(rows))
    pairs = [(i, j) for i in range(1, 4) for j in range(1, 4) if i != j]
    gold = [f"G{i}\tG{j}\t{int((i, j) in {(1, 2), (3, 1)})}" for i, j in pairs]
    (folder / "insilico_size3_1_goldstandard.tsv").write_text("\n".join(gold) + "\n")
    return ts


def test_dream4_tiny_file(tmp_path):
    series, genes, truth = load_dream4(_tiny_dream4(tmp_path))
    assert genes == ["G1", "G2", "G3"]
    assert len(series) == 2 and all(s.shape == (3, 3) for s in series)
    np.testing.assert_allclose(series[1][2], [1.7, 1.8, 1.9])
    expected = np.zeros((3, 3), int)
    expected[0, 1] = expected[2, 0] = 1
    np.testing.assert_array_equal(truth, expected)
    clients = dream4_clients(series, 2)
    np.testing.assert_allclose(clients[1][0], series[1][1:])
    np.testing.assert_allclose(clients[1][1], series[1][:-1])
    with pytest.raises(FileNotFoundError):
        load_dream4(_tiny_dream4(tmp_path), tmp_path / "none.tsv")


def test_dream4_missing_goldstandard_gives_none(tmp_path):
    ts = _tiny_dream4(tmp_path)
    (tmp_path / "insilico_size3_1_goldstandard.tsv").unlink()
    assert load_dream4(ts)[2] is None


def test_dream4_real_file(shared_data):
    path = shared_data("dream4/insilico_size100_1_timeseries.tsv")
    series, genes, truth = load_dream4(path)
    assert len(series) == 10 and all(s.shape == (21, 100) for s in series)
    assert genes[0] == "G1" and genes[-1] == "G100"
    assert truth.shape == (100, 100) and not np.diag(truth).any()
    gold = [line.split("\t") for line in path.with_name(
        path.name.replace("timeseries", "goldstandard")).read_text().splitlines()]
    assert len({(a, b) for a, b, _ in gold}) == 100 * 99  # every off-diagonal pair labelled
    assert truth.sum() == sum(int(c) for _, _, c in gold)
    clients = dream4_clients(series, 5)
    assert [c[0].shape for c in clients] == [(40, 100)] * 5
    np.testing.assert_array_equal(clients[0][1][:20], series[0][:-1])
    np.testing.assert_array_equal(clients[0][0][20:], series[1][1:])


# --- NetSim ------------------------------------------------------------------------------

def test_netsim_real_file(shared_data):
    path = shared_data("netsim/sim1.mat")
    ts, net = load_netsim(path)
    assert ts.shape == (50, 200, 5) and net.shape == (50, 5, 5)
    assert np.all(np.diagonal(net, axis1=1, axis2=2) == -1)
    raw = scipy.io.loadmat(str(path))["ts"]
    np.testing.assert_array_equal(ts[1], raw[200:400])
    truth = netsim_truth(net[0])
    assert np.all(np.diag(truth) == 1) and set(np.unique(truth)) <= {0, 1}


def test_netsim_tiny_file_and_chunks(tmp_path):
    rng = np.random.default_rng(0)
    S, T, d = 3, 20, 2
    ts = rng.standard_normal((S * T, d))
    net = np.stack([-np.eye(d) + np.diag([0.5], 1)] * S)
    path = tmp_path / "tiny.mat"
    scipy.io.savemat(str(path), {"ts": ts, "net": net})  # no Nnodes etc.: inferred
    ts3, net3 = load_netsim(path)
    np.testing.assert_array_equal(ts3[2], ts[2 * T:])
    np.testing.assert_array_equal(net3, net)
    chunks = netsim_chunks(ts3[0], 4, p=1)
    assert [c[0].shape for c in chunks] == [(4, d)] * 4
    np.testing.assert_array_equal(chunks[1][0], ts[6:10])
    np.testing.assert_array_equal(chunks[1][1], ts[5:9])


# --- run-config dispatch -----------------------------------------------------------------

def test_dispatch_synthetic_matches_client_dbn():
    cfg = {"data": "synthetic", "seed": 4, "d": 5, "lags": 1, "samples-per-client": 15,
           "generator": "code", "heterogeneous": "false"}
    Xt, Xlag = client_data(cfg, 1, 3)
    Xt2, Xlag2 = client_dbn(4, 1, 3, 15, d=5, generator="code")
    np.testing.assert_array_equal(Xt, Xt2)
    np.testing.assert_array_equal(Xlag, Xlag2)
    truths = ground_truth(cfg, 3)
    assert len(truths) == 3 and truths[0][0].shape == (5, 5)
    Xt_default, _ = client_data({}, 0, 2)
    assert Xt_default.shape == (100, 10)


def test_dispatch_errors(tmp_path):
    with pytest.raises(ValueError, match="synthetic.*dream4.*netsim"):
        client_data({"data": "sachs"}, 0, 2)
    missing = tmp_path / "nope.mat"
    with pytest.raises(FileNotFoundError, match=r"nope\.mat.*data-path"):
        client_data({"data": "netsim", "data-path": str(missing)}, 0, 2)
    with pytest.raises(FileNotFoundError, match="data-path"):
        ground_truth({"data": "dream4"}, 2)
    with pytest.raises(ValueError, match="partition_id"):
        client_data({}, 2, 2)


def test_dispatch_dream4(tmp_path):
    ts = _tiny_dream4(tmp_path)
    cfg = {"data": "dream4", "data-path": str(ts)}
    Xt, Xlag = client_data(cfg, 0, 2)
    series, _, truth = load_dream4(ts)
    np.testing.assert_array_equal(Xt, series[0][1:])
    np.testing.assert_array_equal(Xlag, series[0][:-1])
    gt = ground_truth(cfg, 2)
    assert len(gt) == 1
    np.testing.assert_array_equal(gt[0], truth)
    template = {"data": "dream4",
                "data-path": str(tmp_path / "insilico_size3_{client}_timeseries.tsv")}
    assert client_data(template, 0, 1)[0].shape == (4, 3)


def test_dispatch_netsim_subjects(tmp_path):
    rng = np.random.default_rng(1)
    S, T, d = 6, 12, 3
    ts = rng.standard_normal((S * T, d))
    net = np.stack([-np.eye(d) + s * np.diag(np.ones(d - 1), 1) for s in range(S)])
    path = tmp_path / "sim.mat"
    scipy.io.savemat(str(path), {"ts": ts, "net": net, "Nnodes": d, "Ntimepoints": T,
                                 "Nsubjects": S})
    het = {"data": "netsim", "data-path": str(path), "heterogeneous": True, "netsim-subject": 2}
    for k in range(2):
        s = 1 + 2 * k  # 0-based subject of 1-based netsim-subject 2 + 2k
        Xt, Xlag = client_data(het, k, 2)
        np.testing.assert_array_equal(Xt, ts[s * T + 1:(s + 1) * T])
        np.testing.assert_array_equal(Xlag, ts[s * T:(s + 1) * T - 1])
    truths = ground_truth(het, 2)
    np.testing.assert_array_equal(truths[1], netsim_truth(net[3]))
    hom = {"data": "netsim", "data-path": str(path), "netsim-subject": 3}
    Xt, _ = client_data(hom, 1, 3)
    np.testing.assert_array_equal(Xt, ts[2 * T + 5:2 * T + 8])
    assert all(np.array_equal(t, netsim_truth(net[2])) for t in ground_truth(hom, 3))
    with pytest.raises(ValueError, match="netsim-subject"):
        client_data(dict(het, **{"netsim-subject": 5}), 0, 2)


def test_vertical_edges_default_to_four_per_attribute():
    from fedcausal_flwr.vertical.data import pooled_data

    assert pooled_data({"d": 10, "n": 30})[1].sum() == 40  # the paper's E = 4d
    assert pooled_data({"d": 6, "n": 30})[1].sum() == 15  # capped at d(d-1)/2
    assert pooled_data({"d": 10, "edges": 7, "n": 30})[1].sum() == 7


def test_zscore_scaler_maps_test_rows_with_the_training_statistics():
    from fedcausal_flwr.vertical.data import fitted_scaler

    rng = np.random.default_rng(0)
    tr, te = rng.normal(3.0, 2.0, (200, 3)), rng.normal(3.0, 2.0, (50, 3))
    scale = fitted_scaler(tr)
    np.testing.assert_allclose(scale(tr).mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(scale(tr).std(0), 1, atol=1e-9)
    np.testing.assert_allclose(scale(te), (te - tr.mean(0)) / tr.std(0), atol=1e-9)


def test_yeo_johnson_scaler_unskews_log_normal_columns_and_keeps_gaussian_ones():
    from scipy.stats import skew

    from fedcausal_flwr.vertical.data import fitted_scaler

    rng = np.random.default_rng(1)
    g = rng.standard_normal((2000, 1))
    X = np.hstack([g, np.exp(1.5 * rng.standard_normal((2000, 1)))])
    assert skew(X[:, 1]) > 5
    Y = fitted_scaler(X, "yeo-johnson")(X)
    np.testing.assert_allclose(Y.mean(0), 0, atol=1e-9)
    assert abs(skew(Y[:, 1])) < 0.3
    assert np.corrcoef(Y[:, 0], g[:, 0])[0, 1] > 0.999  # a Gaussian column barely bends
    # monotone per column, and test rows use the training rows' exponent (no refit)
    te = np.exp(1.5 * rng.standard_normal((30, 1)) + 2.0)
    scale = fitted_scaler(X[:, 1:], "yeo-johnson")
    assert (np.diff(scale(np.sort(te, 0))[:, 0]) > 0).all()
    assert not np.allclose(scale(te), fitted_scaler(te, "yeo-johnson")(te))


def test_parties_take_the_run_configs_transform_fitted_on_their_training_rows():
    from fedcausal_flwr.vertical.data import party_data, pooled_data, split_standardised

    rc = {"d": 6, "n": 50, "transform": "yeo-johnson"}
    X = pooled_data(rc)[0]
    tr, te, cols = party_data(rc, 1, 2)
    want = split_standardised(X[:, cols], 0.2, "yeo-johnson")
    np.testing.assert_allclose(tr, want[0])
    np.testing.assert_allclose(te, want[1])
    assert not np.allclose(tr, split_standardised(X[:, cols], 0.2)[0])
    with pytest.raises(ValueError, match="transform"):
        party_data({**rc, "transform": "log"}, 0, 2)
