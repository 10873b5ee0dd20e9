"""The robust aggregation rule (issue 35): the adaptive liar, who sees the honest updates and
scales its lie to sit just under the Byzantine screen's threshold, is never flagged; the
coordinate-wise trimmed mean and median bound what it moves the aggregate by the honest
clients' spread (Yin et al. 2018), where the plain mean does not."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.federation.robust import (
    CLIP_PASSES,
    byzantine_outliers,
    robust_mean,
    screen_ratios,
    trim_count,
)

FACTOR, FLOOR = 2.5, 0.05  # the App's byzantine-factor and -floor (dbn)


def _honest(rng, k, p=60, spread=0.1):
    v = rng.normal(size=p)
    return [v + spread * rng.normal(size=p) for _ in range(k)]


def adaptive_liars(honest, f, factor=FACTOR, floor=FLOOR):
    """f colluding liars that see the honest updates and all send c + t u, u = -sign(c) (pull
    every coordinate toward zero: an emptied graph), t the largest that keeps every liar's
    screen ratio under ``factor`` (bisection on the screen's own ratios): an upper bound."""
    c = np.median(np.stack(honest), axis=0)
    u = -np.sign(c) / np.sqrt(c.size)
    lo, hi = 0.0, 100.0 * float(np.linalg.norm(c))
    for _ in range(60):
        t = (lo + hi) / 2
        views = {i: [h] for i, h in enumerate(honest)}
        views.update({len(honest) + j: [c + t * u] for j in range(f)})
        r = screen_ratios(views, floor)
        lo, hi = (t, hi) if max(r[len(honest) + j] for j in range(f)) < factor else (lo, t)
    return [c + lo * u for _ in range(f)]


@pytest.mark.parametrize("k,f", [(5, 1), (10, 2)])
def test_adaptive_liar_is_unflagged_and_bounded_by_the_rule_not_by_the_mean(k, f):
    rng = np.random.default_rng(k)
    honest = _honest(rng, k - f)
    lies = adaptive_liars(honest, f)
    views = {i: [v] for i, v in enumerate(honest + lies)}
    assert byzantine_outliers(views, factor=FACTOR, floor=FLOOR) == {}  # under the screen
    H = np.stack(honest)
    lo, hi = H.min(axis=0), H.max(axis=0)
    for rule in ("trimmed-mean", "median"):
        got = robust_mean(honest + lies, rule, trim=0.2)
        assert np.all((got >= lo - 1e-12) & (got <= hi + 1e-12)), rule
    mean = robust_mean(honest + lies, "mean")
    assert np.any((mean < lo) | (mean > hi))  # the plain mean is moved outside: it can fail


@pytest.mark.parametrize("k,f", [(5, 1), (10, 2)])
def test_clipped_mean_moves_at_most_passes_tau_over_k_per_liar_whatever_it_sends(k, f):
    """Centred clipping: a liar's pull saturates at the clip radius (the median client's
    distance), so a lie 10^6 times farther moves the aggregate no more than one just over it."""
    rng = np.random.default_rng(k)
    honest = _honest(rng, k - f)
    c = np.median(np.stack(honest + adaptive_liars(honest, f)), axis=0)
    tau = np.median([np.linalg.norm(v - c) for v in honest + adaptive_liars(honest, f)])
    clean = robust_mean(honest + [np.mean(honest, axis=0)] * f, "clipped-mean")
    for scale in (1.0, 1e3, 1e6):
        lies = [scale * v for v in adaptive_liars(honest, f)]
        got = robust_mean(honest + lies, "clipped-mean")
        assert np.linalg.norm(got - clean) <= 2 * CLIP_PASSES * f * tau / k + 1e-9, scale
    assert np.linalg.norm(robust_mean(honest + lies, "mean") - clean) > 1e3 * tau


def test_clipped_mean_equals_the_mean_of_agreeing_clients_and_skips_nan():
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(robust_mean([v, v, v], "clipped-mean"), v)
    V = [np.array([1.0, np.nan]), np.array([1.0, 2.0]), np.array([1.0, 2.0])]
    np.testing.assert_allclose(robust_mean(V, "clipped-mean"), [1.0, 2.0])


def test_trimmed_mean_of_honest_updates_keeps_to_their_spread_and_skips_nan():
    V = [np.array([1.0, 2.0]), np.array([2.0, np.nan]), np.array([3.0, 4.0]),
         np.array([100.0, 5.0]), np.array([4.0, 6.0])]
    np.testing.assert_allclose(robust_mean(V, "trimmed-mean", 0.2), [3.0, 4.25])
    np.testing.assert_allclose(robust_mean(V, "median"), [3.0, 4.5])
    np.testing.assert_allclose(robust_mean(V, "mean"), [22.0, 4.25])
    assert robust_mean([np.array([np.nan])] * 3, "trimmed-mean").tolist() == [0.0]
    assert [trim_count(k, 0.2) for k in (2, 3, 5, 10)] == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="robust rule"):
        robust_mean(V, "krum")


def test_fdbnl_consensus_goes_through_the_rule():
    """The family's model takes the rule: one liar's 100x target does not move the trimmed
    consensus beyond the honest targets; the plain mean follows it."""
    from fedcausal_flwr.dbn.model import consensus_targets

    rng = np.random.default_rng(0)
    B = [np.eye(3) + 0.01 * rng.normal(size=(3, 3)) for _ in range(5)]
    B[1] = 100 * B[1]
    z = [np.zeros((3, 3))] * 5
    robust = consensus_targets(B, z, 1.0, lambda v: robust_mean(v, "trimmed-mean", 0.2))
    assert np.abs(robust - np.eye(3)).max() < 0.05
    assert np.abs(consensus_targets(B, z, 1.0) - np.eye(3)).max() > 10


@pytest.mark.parametrize("rule", ["mean", "trimmed-mean", "clipped-mean"])
def test_every_run_names_its_rule_what_it_flagged_and_what_is_unscreened(rule):
    from fedcausal_flwr.client_app import app as client_app
    from tests.helpers.faults import SMALL, run_app

    rc = {**SMALL["fdbnl"][0], "dbn.robust-rule": rule}
    res = run_app("fdbnl", client_app, 4, rc=rc)
    rob = res.metrics["robustness"]
    assert res.status == "completed" and rob["rule"] == rule and rob["flagged"] == {}
    assert "byzantine" in rob["screens"]
    assert ("unscreened" in rob) == (rule == "mean")
    assert ("consensus targets" in rob.get("bounded", "")) == (rule != "mean")
