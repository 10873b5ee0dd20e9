"""Metrics on small hand-worked graphs and cross-checks against brute-force definitions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.linalg import expm

from fedcausal_flwr.metrics import (
    edge_f1,
    graph_metrics,
    is_dag,
    mean_metrics,
    orientation_share,
    score_auc,
    swapped_rates,
)


def _graph(d, edges):
    M = np.zeros((d, d))
    for i, j in edges:
        M[i, j] = 1.0
    return M


def test_one_reversed_edge():
    m = graph_metrics(_graph(3, [(1, 0)]), _graph(3, [(0, 1)]))
    assert m["shd"] == 2 and m["shd_rev1"] == 1
    assert m["tpr"] == 0 and m["fdr"] == 1 and m["nnz"] == 1


def test_missing_and_extra_edges():
    truth = _graph(3, [(0, 1), (1, 2)])
    est = 0.7 * _graph(3, [(0, 1), (0, 2)])  # weights, not 0/1: binarized by != 0
    m = graph_metrics(est, truth)
    assert m == {"shd": 2, "shd_rev1": 2, "tpr": 0.5, "fdr": 0.5, "precision": 0.5, "nnz": 2}


def test_reversal_not_counted_when_both_directions_estimated():
    m = graph_metrics(_graph(2, [(0, 1), (1, 0)]), _graph(2, [(0, 1)]))
    assert m["shd"] == 1 and m["shd_rev1"] == 1


def test_zero_denominators():
    m = graph_metrics(np.zeros((3, 3)), np.zeros((3, 3)))
    assert m["tpr"] == 0 and m["fdr"] == 0 and m["precision"] == 0 and m["shd"] == 0
    m = graph_metrics(np.zeros((3, 3)), _graph(3, [(0, 2)]))
    assert m["tpr"] == 0 and m["fdr"] == 0 and m["shd"] == 1


def test_rectangular_lag_matrix_has_no_reversal():
    truth = np.array([[0, 1], [0, 0], [0, 0], [0, 0]])  # A stacked for p = 2, d = 2
    est = np.array([[0, 0], [1, 0], [0, 0], [0, 0]])
    m = graph_metrics(est, truth)
    assert m["shd"] == 2 and m["shd_rev1"] == 2


def test_ignore_diagonal():
    truth = _graph(3, [(0, 1)])
    est = _graph(3, [(0, 1), (2, 2)])
    assert graph_metrics(est, truth)["fdr"] == 0.5
    assert graph_metrics(est, truth, ignore_diagonal=True)["fdr"] == 0.0


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="same shape"):
        graph_metrics(np.zeros((2, 2)), np.zeros((3, 3)))


def test_swapped_rates_are_precision_and_one_minus_recall():
    truth = _graph(4, [(0, 1), (1, 2), (2, 3)])
    est = _graph(4, [(0, 1), (0, 3)])  # TP 1, FP 1, FN 2
    swapped = swapped_rates(est, truth)
    assert swapped["tpr"] == pytest.approx(1 / 2)  # precision
    assert swapped["fdr"] == pytest.approx(1 - 1 / 3)  # 1 - recall
    m = graph_metrics(est, truth)
    assert m["tpr"] == pytest.approx(1 / 3) and m["fdr"] == pytest.approx(1 / 2)


def test_auc_of_truth_against_itself_and_reversed_order():
    rng = np.random.default_rng(0)
    truth = (rng.random((6, 6)) < 0.3).astype(int)
    np.fill_diagonal(truth, 0)
    truth[0, 1], truth[1, 0] = 1, 0  # both classes present
    assert score_auc(truth, truth) == {"auroc": 1.0, "aupr": 1.0}
    assert score_auc(1.0 - truth, truth)["auroc"] == 0.0
    diag_noise = truth + 100.0 * np.eye(6)  # off-diagonal mask ignores the diagonal
    assert score_auc(diag_noise, truth)["auroc"] == 1.0
    assert score_auc(diag_noise, truth, mask=np.ones((6, 6), bool))["auroc"] < 1.0


def test_auroc_matches_pairwise_definition():
    rng = np.random.default_rng(1)
    truth = (rng.random((7, 7)) < 0.3).astype(int)
    scores = rng.standard_normal((7, 7))
    off = ~np.eye(7, dtype=bool)
    y, s = truth[off] != 0, np.abs(scores[off])
    pos, neg = s[y], s[~y]
    wins = sum((a > b) + 0.5 * (a == b) for a, b in itertools.product(pos, neg))
    assert score_auc(scores, truth)["auroc"] == pytest.approx(wins / (len(pos) * len(neg)))
    # AUPR as the mean precision at each positive's rank (no ties here)
    order = np.argsort(-s)
    hits = np.cumsum(y[order])
    aupr = np.mean([hits[r] / (r + 1) for r in range(len(s)) if y[order][r]])
    assert score_auc(scores, truth)["aupr"] == pytest.approx(aupr)


def test_auc_single_class_is_nan():
    out = score_auc(np.ones((3, 3)), np.zeros((3, 3)))
    assert np.isnan(out["auroc"]) and np.isnan(out["aupr"])


def test_is_dag_small_cases():
    assert is_dag(np.zeros((3, 3)))
    assert is_dag(_graph(4, [(0, 1), (1, 2), (0, 3), (3, 2)]))
    assert not is_dag(_graph(3, [(0, 1), (1, 2), (2, 0)]))
    assert not is_dag(_graph(3, [(1, 1)]))
    with pytest.raises(ValueError, match="square"):
        is_dag(np.zeros((4, 2)))


def test_is_dag_agrees_with_trace_exponential():
    rng = np.random.default_rng(2)
    for _ in range(200):
        B = (rng.random((5, 5)) < 0.2).astype(float)
        acyclic = abs(np.trace(expm(B)) - 5) < 1e-9  # h(W) = tr(e^{W o W}) - d
        assert is_dag(B) == acyclic


def test_mean_metrics():
    out = mean_metrics([{"shd": 2, "tpr": 0.5}, {"shd": 4, "tpr": 1.0}])
    assert out == {"shd": 3.0, "tpr": 0.75}
    with pytest.raises(ValueError, match="keys"):
        mean_metrics([{"shd": 1}, {"tpr": 1}])
    with pytest.raises(ValueError):
        mean_metrics([])


def test_orientation_share_by_hand():
    T = _graph(3, [(0, 1), (1, 2), (0, 2)])
    S = np.array([[0, 0.9, 0.1], [0.2, 0, 0.5], [0.1, 0.5, 0]])
    # 0->1: .9 > .2 (1); 1->2: .5 = .5 (1/2); 0->2: .1 = .1 (1/2)
    assert orientation_share(S, T) == pytest.approx(2 / 3)
    assert orientation_share(-S, T) == pytest.approx(2 / 3)  # |scores|
    assert orientation_share(S.T, T) == pytest.approx(1 / 3)


def test_orientation_share_of_a_symmetric_score_is_one_half():
    rng = np.random.default_rng(0)
    T = np.triu(rng.random((8, 8)) < 0.3, 1)
    S = rng.random((8, 8))
    assert orientation_share(S + S.T, T) == 0.5
    assert orientation_share(T.astype(float), T) == 1.0
    assert orientation_share(T.T.astype(float), T) == 0.0


def test_orientation_share_leaves_out_two_way_pairs_and_the_diagonal():
    T = _graph(3, [(0, 1), (1, 0), (1, 2), (2, 2)])
    S = np.array([[5, 0, 0], [1, 5, 1], [0, 1, 5.0]])
    assert orientation_share(S, T) == 0.5  # only 1->2 counts: a tie
    assert np.isnan(orientation_share(S, _graph(3, [(0, 1), (1, 0)])))
    with pytest.raises(ValueError, match="square"):
        orientation_share(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        orientation_share(np.full((2, 2), np.nan), np.eye(2))


def test_edge_f1_by_hand_and_against_precision_recall():
    T = _graph(4, [(0, 1), (1, 2), (2, 3)])
    E = _graph(4, [(0, 1), (2, 1), (0, 3)])  # 1 TP, 2 FP (one reversed), 2 FN
    assert edge_f1(E, T) == pytest.approx(2 / 6)
    m = graph_metrics(E, T)
    assert edge_f1(E, T) == pytest.approx(2 * m["precision"] * m["tpr"]
                                          / (m["precision"] + m["tpr"]))
    assert edge_f1(np.zeros((4, 4)), T) == 0.0 and edge_f1(T, T) == 1.0
    assert edge_f1(np.zeros((2, 2)), np.zeros((2, 2))) == 0.0
