"""FedPC: its statistics equal the pooled methods' (causal-learn's PC with Fisher z, tigramite's
ParCorr), the pooled moments equal the stacked rows', and the federated run equals the
reference loop."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.constraint import learn, model, search
from fedcausal_flwr.constraint.data import client_series, windows
from fedcausal_flwr.constraint.settings import FedPCSettings


def _sem(seed: int, d: int = 8, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = np.triu(rng.uniform(.5, 1.5, (d, d)) * rng.choice([-1, 1], (d, d))
                * (rng.random((d, d)) < 0.3), 1)
    perm = rng.permutation(d)
    W = W[np.ix_(perm, perm)]
    return rng.standard_normal((n, d)) @ np.linalg.inv(np.eye(d) - W)


def _endpoints(g: np.ndarray) -> np.ndarray:
    """causal-learn's graph (-1 tail, 1 arrow) as our endpoint matrix."""
    G = np.zeros(g.shape, int)
    G[(g == -1) & (g.T == 1)] = 1
    G[(g == -1) & (g.T == -1)] = 1
    return G


def test_pooled_moments_equal_the_stacked_rows_with_missing_cells():
    rng = np.random.default_rng(0)
    X = rng.normal(5.0, 2.0, (120, 4))
    X[rng.random(X.shape) < 0.2] = np.nan
    parts = [model.moments(X[:30]), model.moments(X[30:70]), model.moments(X[70:])]
    R = model.correlation(model.pooled(parts))
    for i in range(4):
        for j in range(4):
            both = ~np.isnan(X[:, i]) & ~np.isnan(X[:, j])
            want = np.corrcoef(X[both, i], X[both, j])[0, 1]
            assert abs(R[i, j] - want) < 1e-10


@pytest.mark.parametrize("seed", range(10))
def test_pc_on_pooled_moments_equals_causal_learn_on_the_pooled_rows(seed):
    pc = pytest.importorskip("causallearn.search.ConstraintBased.PC").pc
    from causallearn.utils.cit import CIT

    X = _sem(seed)
    pooled = model.pooled([model.moments(X[k::3]) for k in range(3)])  # 3 clients
    R = model.correlation(pooled)
    sk = search.skeleton(X.shape[1], lambda i, j, S: model.ci_test(R, pooled.n, i, j, S), 0.05)
    theirs = pc(X, 0.05, "fisherz", show_progress=False)
    assert np.array_equal(search.pc_graph(sk), _endpoints(theirs.G.graph))
    fisherz = CIT(X, "fisherz")
    for i, j, S in [(0, 1, ()), (2, 5, (0, 3)), (1, 7, (2, 3, 4))]:
        assert abs(fisherz(i, j, S) - model.ci_test(R, pooled.n, i, j, S)[1]) < 1e-8


def test_partial_correlation_t_test_equals_tigramite_parcorr():
    parcorr = pytest.importorskip("tigramite.independence_tests.parcorr")
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((200, 5)) @ rng.normal(size=(5, 5))
    pooled = model.pooled([model.moments(Z[:90]), model.moments(Z[90:])])
    R = model.correlation(pooled)
    test = parcorr.ParCorr()
    for i, j, S in [(0, 1, (2,)), (3, 4, (0, 1, 2)), (1, 2, ())]:
        z = Z[:, list(S)] if S else None
        val, p = test.run_test_raw(Z[:, [i]], Z[:, [j]], z)
        r, ours = model.ci_test(R, pooled.n, i, j, S, "t")
        assert abs(r - val) < 1e-8 and abs(ours - p) < 1e-8


def test_likelihood_ratio_orients_a_non_gaussian_pair():
    rng = np.random.default_rng(2)
    x = rng.laplace(size=5000) / np.sqrt(2)  # super-Gaussian sources (the tanh form)
    y = 0.8 * x + 0.6 * rng.laplace(size=5000) / np.sqrt(2)
    E = np.c_[x, y]
    E = (E - E.mean(0)) / E.std(0)
    R = model.likelihood_ratio(*model.tanh_moments(E))
    assert R[0, 1] > 0 > R[1, 0]


def test_time_tiers_point_lagged_edges_into_the_present():
    rc = {"d": 5, "edges": 5, "n": 200}
    series, _, _ = client_series(rc, 1, 3)
    out = learn.reference([np.vstack(windows(s, 1)) for s in series], FedPCSettings(lags=1), 5)
    G = out["contemporaneous"]
    assert out["lagged"].shape == (1, 5, 5)
    assert ((G == 1) & (G.T == 1)).sum() == 0  # every kept contemporaneous edge oriented
    assert out["lagged"][0].trace() > 0  # the synthetic series are autocorrelated


@pytest.mark.integration
def test_federated_run_equals_the_reference_loop():
    from fedcausal_flwr.client_app import app as client_app
    from tests.helpers.faults import SMALL, run_app

    rc, k = SMALL["fedpc"]
    result = run_app("fedpc", client_app, k)
    assert result.status == "completed"
    assert [h["phase"] for h in result.history] == ["moments", "ratio"]
    section = {key.split(".", 1)[1]: v for key, v in rc.items() if key.startswith("constraint.")}
    series, _, _ = client_series(section, 1, k)
    ref = learn.reference([np.vstack(windows(s, 1)) for s in series],
                          FedPCSettings(lags=1), section["d"])
    for key, want in ref.items():
        assert np.array_equal(np.asarray(result.estimates[key]), want), key


@pytest.mark.integration
def test_replicas_give_edge_frequencies_in_the_same_exchanges():
    from fedcausal_flwr.client_app import app as client_app
    from tests.helpers.faults import SMALL, run_app

    rc, k = SMALL["fedpc"]
    result = run_app("fedpc", client_app, k, rc={**rc, "constraint.replicas": 4})
    assert result.status == "completed" and len(result.history) == 2
    section = {key.split(".", 1)[1]: v for key, v in rc.items() if key.startswith("constraint.")}
    series, _, _ = client_series(section, 1, k)
    ref = learn.reference([np.vstack(windows(s, 1)) for s in series],
                          FedPCSettings(lags=1, replicas=4), section["d"])
    freq = np.asarray(result.estimates["graph_frequency"])
    assert np.array_equal(freq, ref["graph_frequency"])
    assert set(np.unique(freq)) <= {0.0, 0.25, 0.5, 0.75, 1.0} and 0 < freq.max()
    assert result.metrics["stability"]["replicas"] == 4
    stable = result.stable_edges()
    assert all(f >= 0.6 for *_, f in stable)
