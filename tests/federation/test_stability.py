"""The one confidence result (fedcausal_flwr.stability) against hand-computed oracles."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.stability import (
    edge_stability,
    holdout_score,
    one_standard_error,
    selection_frequency,
)

# four replicas' selected graphs over two variables; entry (1, 1) is a self-loop every
# replica selects, which is no candidate edge
STACK = np.array([[[1, 1], [0, 1]],
                  [[0, 1], [1, 1]],
                  [[0, 1], [1, 1]],
                  [[1, 0], [1, 1]]], dtype=bool)
OFF_DIAGONAL = ~np.eye(2, dtype=bool)


def test_edge_stability_of_a_tiny_stack_is_the_hand_computed_one():
    conf = edge_stability(STACK, 0.75, OFF_DIAGONAL)
    # frequencies: (0,0) 2/4, (0,1) 3/4, (1,0) 3/4, (1,1) 4/4
    np.testing.assert_array_equal(conf.frequency, [[0.5, 0.75], [0.75, 1.0]])
    # stable: candidates with frequency >= 0.75; the self-loop is none
    np.testing.assert_array_equal(conf.stable, [[False, True], [True, False]])
    # q: candidate edges per replica 1, 2, 2, 1 -> 1.5; p = 2; bound 1.5^2 / (0.5 * 2)
    assert conf.summary() == {"replicas": 4, "threshold": 0.75, "candidates": 2,
                              "mean_selected": 1.5, "false_edge_bound": 2.25,
                              "stable_edges": 2}


def test_edge_stability_at_pi_one_and_without_a_candidate_mask():
    conf = edge_stability(STACK, 1.0)
    assert conf.candidates == 4 and conf.mean_selected == 3.0  # 3 entries in each replica
    assert conf.false_edge_bound == pytest.approx(3.0 ** 2 / 4)
    assert conf.summary()["stable_edges"] == 1  # only the self-loop, now a candidate


def test_edge_stability_frequency_is_selection_frequency():
    rng = np.random.default_rng(3)
    graphs = rng.normal(size=(6, 3, 3)) * (rng.random((6, 3, 3)) > 0.3)
    sel = (np.abs(graphs) >= 0.4) & (graphs != 0)
    np.testing.assert_array_equal(edge_stability(sel, 0.6).frequency,
                                  selection_frequency(graphs, 0.4))


def test_edge_stability_refuses_what_has_no_meaning():
    with pytest.raises(ValueError, match="at least one replica"):
        edge_stability(np.zeros((0, 2, 2), dtype=bool), 0.75)
    with pytest.raises(ValueError, match=r"threshold must be in \(0.5, 1\]"):
        edge_stability(STACK, 0.5)


def test_one_standard_error_rule_by_hand():
    mean = np.array([[1.0, 0.95], [0.9, 1.3]])
    se = np.full_like(mean, 0.1)
    edges = np.array([[5, 3], [4, 2]])
    # lowest 0.9 (1, 0); within 0.9 + 0.1: (0, 0), (0, 1), (1, 0); fewest edges: (0, 1)
    assert one_standard_error(mean, se, edges) == (0, 1)
    # ties in edges: the first in path order
    assert one_standard_error(mean, se, np.array([[4, 4], [4, 1]])) == (0, 0)


def test_holdout_score_by_hand():
    mean, se = holdout_score({0: np.array([1.0, 2.0]), 1: np.array([3.0, 2.0])}, {0: 1, 1: 3})
    # weights 1/4, 3/4: mean 2.5 and 2; variance 1/4 (1.5)^2 + 3/4 (0.5)^2 = 0.75, K - 1 = 1
    np.testing.assert_allclose(mean, [2.5, 2.0])
    np.testing.assert_allclose(se, [np.sqrt(0.75), 0.0])
    with pytest.raises(ValueError, match="no client"):
        holdout_score({}, {})
