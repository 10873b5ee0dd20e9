"""FedTrees: importances are the forests' own and scale-free, the sites' average is the pooled
score, and the federated run equals the reference loop."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.data.series import client_series, windows
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.data import TreesData
from fedcausal_flwr.trees.settings import FedTreesSettings


def _nonlinear(seed: int, n: int = 300, d: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """x0 drives x1 through a square, x2 drives x3 through a threshold: no linear lag model
    sees x0 -> x1 (its correlation is zero)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    X[0] = rng.standard_normal(d)
    for t in range(1, n):
        e = rng.standard_normal(d)
        X[t, 0] = e[0]
        X[t, 1] = X[t - 1, 0] ** 2 - 1 + 0.3 * e[1]
        X[t, 2] = e[2]
        X[t, 3] = np.sign(X[t - 1, 2]) + 0.3 * e[3]
    T = np.zeros((d, d), int)
    T[0, 1] = T[2, 3] = 1
    return X, T


def test_forests_find_lagged_edges_a_linear_model_cannot():
    X, T = _nonlinear(0)
    Z = np.vstack(windows([X], 1))
    Xl, Y = model.window_regression(Z, 4)
    S = model.summary(model.forest_importance(Xl, Y, 50, "all", 0), 4)
    assert S[0, 1] == S[:, 1].max() and S[2, 3] == S[:, 3].max()
    assert np.array_equal(model.graph(S, 2.0, 4), T)
    beta = np.linalg.lstsq(np.c_[Xl, np.ones(len(Xl))], Y, rcond=None)[0][:4]
    assert abs(beta[0, 1]) < 0.2 < S[0, 1]  # the square: no linear trace


def test_importances_ignore_the_scale_of_inputs_and_target():
    X, _ = _nonlinear(1, n=120)
    Xl, Y = model.window_regression(np.vstack(windows([X], 1)), 4)
    a = model.forest_importance(Xl, Y, 10, "sqrt", 3)
    b = model.forest_importance(Xl * [1, 300, 0.01, 5] + 7, Y, 10, "sqrt", 3)
    assert np.array_equal(a, b)  # the random cut points scale with their input
    c = model.forest_importance(Xl, Y * 40 - 2, 10, "sqrt", 3)
    assert np.allclose(a, c, atol=0.02)  # equal up to rounding in the choice of a split
    assert np.allclose(a.sum(axis=0), 1.0)


def test_rows_with_missing_cells_are_left_out_and_a_constant_target_scores_zero():
    X, _ = _nonlinear(2, n=80)
    X[:, 3] = 1.0
    Z = np.vstack(windows([X], 1))
    Z[5, 2] = np.nan
    Xl, Y = model.window_regression(Z, 4)
    assert len(Xl) == len(Z) - 1 and not np.isnan(Xl).any()
    imp = model.forest_importance(Xl, Y, 5, "sqrt", 0)
    assert np.array_equal(imp[:, 3], np.zeros(4)) and np.allclose(imp[:, :3].sum(0), 1)


def test_the_pooled_score_is_the_row_weighted_mean_and_a_rule_bounds_a_liar():
    rng = np.random.default_rng(0)
    imps = [rng.dirichlet(np.ones(6), size=3).T for _ in range(5)]
    rows = [10, 20, 30, 40, 50]
    want = sum(w * i for w, i in zip(rows, imps, strict=True)) / sum(rows)
    assert np.allclose(model.pooled(imps, rows), want)
    from functools import partial

    from fedcausal_flwr.federation.robust import robust_mean

    liar = [*imps[:4], imps[4] * 1e3]
    med = model.pooled(liar, rows, partial(robust_mean, rule="median"))
    assert med.max() <= max(i.max() for i in imps[:4])


def test_site_frequencies_count_the_sites_that_keep_an_edge():
    I1 = np.array([[0.0, 0.9], [1.0, 0.1]])  # 2 inputs, 2 targets, p = 1
    I2 = np.array([[0.0, 0.1], [1.0, 0.9]])
    est, sites = model.estimates([I1, I2], [1, 1], 2, 1.5)
    assert sites.shape == (2, 2, 2)
    assert est["graph_frequency"][0, 1] == 0.5 and est["graph_frequency"][1, 0] == 1.0
    assert np.array_equal(est["graph"], [[0, 0], [1, 0]])  # 0.5 < 1.5 / 2 <= 1.0


def test_client_sends_only_its_importances():
    from fedcausal_flwr.trees.client import FedTreesClient

    X, _ = _nonlinear(3, n=60)
    Z = np.vstack(windows([X], 1))
    c = FedTreesClient(Z, d=4)
    arrays, n, metrics = c.importance([], FedTreesSettings(trees=5, lags=1).to_wire())
    assert [a.shape for a in arrays] == [(4, 4)] and n == len(Z) and metrics == {}
    with pytest.raises(ValueError, match="at least 10"):
        FedTreesClient(Z[:5], d=4)
    with pytest.raises(ValueError, match="window rows of 4"):
        FedTreesClient(Z[:, :5], d=4)


@pytest.mark.integration
def test_federated_run_equals_the_reference_loop():
    from fedcausal_flwr.client_app import app as client_app
    from tests.helpers.faults import SMALL, run_app

    rc, k = SMALL["fedtrees"]
    result = run_app("fedtrees", client_app, k)
    assert result.status == "completed"
    assert [h["phase"] for h in result.history] == ["importance"]
    section = {key.split(".", 1)[1]: v for key, v in rc.items() if key.startswith("trees.")}
    s = FedTreesSettings.from_run_config(section)
    series, _, _ = client_series(section, s.lags, k, TreesData)
    ref = model.reference([np.vstack(windows(x, s.lags)) for x in series], section["d"], s.trees,
                          s.max_features, s.forest_seed, s.min_leaf, s.edge_factor)
    for key, want in ref.items():
        assert np.array_equal(np.asarray(result.estimates[key]), want), key
    assert result.metrics["stability"]["replicas"] == k
