"""FedIV's robust rule (issue 35): with ``robust-rule`` set, the server's step is the
coordinate-wise trimmed mean (or median) of the players' deltas
(``federation.robust.robust_mean``), so one client's sign flip or zeros moves it by no more
than the honest deltas' spread; the Flower path equals the reference loop with the same rule,
and the run's ``metrics["robustness"]`` names the rule and what it bounds."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.robust import robust_mean
from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.strategies import FedIVSettings
from tests.helpers.faults import SMALL, lying_app, run_app


@pytest.mark.parametrize("factor", [-1.0, 0.0, 50.0])
def test_server_update_with_the_rule_stays_within_the_honest_deltas(factor):
    rng = np.random.default_rng(1)
    params = [rng.normal(size=(4, 3)), rng.normal(size=3)]
    deltas = {c: [0.1 * p + 0.01 * rng.normal(size=p.shape) for p in params] for c in range(5)}
    deltas[1] = [factor * d for d in deltas[1]]
    w = dg.client_weights({c: 10 for c in deltas}, "uniform")
    honest = [d for c, d in deltas.items() if c != 1]
    for rule in ("trimmed-mean", "median"):
        got = dg.server_update(params, deltas, w, partial(robust_mean, rule=rule, trim=0.2))
        for j, p in enumerate(params):
            H = np.stack([d[j] for d in honest])
            step = got[j] - p
            assert np.all(step >= H.min(axis=0) - 1e-12) and np.all(step <= H.max(axis=0) + 1e-12)
    mean = dg.server_update(params, deltas, w)
    if factor != 0.0:  # the plain mean follows the liar out of the honest range
        H = np.stack([d[0] for d in honest])
        assert np.any((mean[0] - params[0] < H.min(axis=0)) | (mean[0] - params[0] > H.max(axis=0)))
    # no rule: exactly the weighted mean (bit for bit the code before the rule)
    want = [p + sum(w[c] / sum(w.values()) * d[j] for c, d in sorted(deltas.items()))
            for j, p in enumerate(params)]
    for a, b in zip(mean, want, strict=True):
        assert np.array_equal(a, b)


def _reference(rc: dict, k: int, combine):
    data = [iv.client_data(rc, i, k) for i in range(k)]
    tr = [dg.batch(d["train"].x, d["train"].y, d["train"].z) for d in data]
    basis = dg.rff(2, int(rc["iv.iv-val-features"]), int(rc["seed"]))
    val = [(dg.batch(d["val"].x, d["val"].y, d["val"].z), dg.features(d["val"].z, basis))
           for d in data]
    return dg.fedgda_reference(tr, FedIVSettings.from_run_config(rc), int(rc["seed"]), val,
                               combine=combine)


def test_flower_path_with_the_rule_equals_the_reference_and_names_it():
    rc = {**SMALL["fediv"][0], "iv.robust-rule": "trimmed-mean", "iv.iv-rounds": 2}
    res = run_app("fediv", client_app, 5, rc=rc)
    assert res.status == "completed"
    st = _reference(rc, 5, partial(robust_mean, rule="trimmed-mean", trim=0.2))
    for a, b in zip(res.estimates["g_params"], st.theta, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=0, atol=1e-10)
    rob = res.metrics["robustness"]
    assert rob["rule"] == "trimmed-mean" and rob["trim"] == 0.2 and "unscreened" not in rob
    assert "deltas" in rob["bounded"] and rob["flagged"] == {}


@pytest.mark.parametrize("attack", ["sign-flip", "zeros"])
def test_a_lying_client_under_the_rule_is_reported(attack):
    """A liar under the Byzantine screen's threshold is not flagged; the result says which
    rule bounded the aggregate (and, with the rule off, that the aggregate is unscreened)."""
    for rule in ("mean", "median"):
        rc = {**SMALL["fediv"][0], "iv.robust-rule": rule, "iv.iv-rounds": 2}
        res = run_app("fediv", lying_app(client_app, attack, [1]), 5, rc=rc)
        rob = res.metrics["robustness"]
        assert res.status == "completed" and rob["rule"] == rule
        assert ("unscreened" in rob) == (rule == "mean")
        assert isinstance(rob["flagged"], dict)
