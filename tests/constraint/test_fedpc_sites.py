"""FedPC with sites that hold different variables (``constraint.variables``): the graph is
over the union, a site's window sits in the federation's columns with no rows where it lacks
a variable, and the run equals the reference loop on those placed windows."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr import registry
from fedcausal_flwr.constraint import learn, model
from fedcausal_flwr.constraint.settings import FedPCSettings
from fedcausal_flwr.data.series import windows
from fedcausal_flwr.federation.client import register
from fedcausal_flwr.federation.sites import federation_window, union, window_columns
from fedcausal_flwr.testing import InProcessGrid

NAMES = ["flow", "heat", "valve", "temp", "load", "fan"]
#: site -> the variables it holds, in its own column order
HOLDS = {0: NAMES, 1: ["fan", "load", "temp", "heat", "flow"], 2: ["valve", "heat", "flow",
                                                                   "fan", "temp", "load"]}
RC = {"algorithm": "fedpc", "constraint.lags": 1, "min-nodes": 2,
      "node-wait-s": 5.0, "round-timeout-s": 30.0, "seed": 1}


def _series(seed: int, n: int = 150) -> np.ndarray:
    """A linear non-Gaussian VAR(1) with contemporaneous chain flow -> heat -> temp."""
    rng = np.random.default_rng(seed)
    d = len(NAMES)
    X = np.zeros((n, d))
    for t in range(1, n):
        e = rng.laplace(0, 1, d)
        x = 0.5 * X[t - 1] + e
        x[1] += 0.9 * x[0]
        x[3] += 0.8 * x[1]
        x[4] += 0.6 * X[t - 1, 2]
        X[t] = x
    return X


def _sites() -> dict[int, tuple[np.ndarray, list[str]]]:
    out = {}
    for c, names in HOLDS.items():
        X = _series(c)[:, [NAMES.index(v) for v in names]]
        out[c] = (np.vstack(windows([X], 1)), names)
    return out


def _run(rc: dict, sites: dict) -> object:
    def make(ctx):
        Z, names = sites[int(ctx.node_config["partition-id"])]
        return {"Z": Z, "names": names, "d": len(names)}

    app = ClientApp()
    register(app, "fedpc", make)
    s = FedPCSettings.from_run_config(rc)
    return registry.get("fedpc").strategy_class()(s).start(
        grid=InProcessGrid(app, len(sites), rc, None))


def test_a_window_is_placed_in_the_federations_columns_lag_by_lag():
    Z = np.arange(12.0).reshape(2, 6)  # [b_t, a_t, b_t-1, a_t-1, ...]: d 2, p 2
    out = federation_window(Z, ["b", "a"], ["a", "c", "b"], 2)
    assert out.shape == (2, 9)
    assert np.array_equal(out[0], [1, np.nan, 0, 3, np.nan, 2, 5, np.nan, 4], equal_nan=True)
    own, at = window_columns(["b", "a"], ["a", "b"], 1)
    assert own.tolist() == [0, 1, 2, 3] and at.tolist() == [1, 0, 3, 2]


def test_a_lacking_variable_has_no_rows_and_no_residual_that_needs_it():
    Z, names = _sites()[1]
    F = federation_window(Z, names, NAMES, 1)
    m = model.moments(F)
    lack = [NAMES.index("valve"), len(NAMES) + NAMES.index("valve")]
    assert (m.n[lack] == 0).all() and (m.n[:, lack] == 0).all()
    assert (m.n[np.ix_([0, 1], [0, 1])] == len(Z)).all()
    B = np.zeros((6, 6))
    B[NAMES.index("valve"), NAMES.index("load")] = 0.6  # load's regression uses valve(t-1)
    E = model.residuals(F, B, np.zeros(6), np.ones(6), np.arange(6), np.arange(6, 12))
    n, ET, EE = model.tanh_moments(E)
    assert np.isnan(E[:, [NAMES.index("valve"), NAMES.index("load")]]).all()
    assert n[NAMES.index("load")].sum() == 0 and n[0, 1] == len(Z)
    assert np.isfinite(ET).all() and np.isfinite(EE).all()


def test_likelihood_ratio_with_per_pair_counts_equals_the_scalar_on_complete_rows():
    rng = np.random.default_rng(0)
    E = rng.uniform(-1, 1, (200, 3))
    n, ET, EE = model.tanh_moments(E)
    assert (n == 200).all()
    assert np.array_equal(model.likelihood_ratio(n, ET, EE),
                          model.likelihood_ratio(200.0, ET, EE))
    assert (model.likelihood_ratio(np.zeros((3, 3)), ET, EE) == 0).all()


@pytest.mark.integration
def test_union_sites_run_equals_the_reference_on_the_placed_windows():
    sites = _sites()
    result = _run(RC, sites)
    assert result.status == "completed", result.status
    variables = union([names for _, names in sites.values()])
    assert result.names["variables"] == variables == NAMES
    ref = learn.reference([federation_window(Z, names, variables, 1)
                           for Z, names in sites.values()], FedPCSettings(lags=1), len(NAMES))
    for key, want in ref.items():
        assert np.array_equal(np.asarray(result.estimates[key]), want), key
    G = np.asarray(result.estimates["contemporaneous"])
    assert G[0, 1] == 1 and G[1, 3] == 1  # flow -> heat -> temp, learned across the sites


@pytest.mark.integration
def test_shared_drops_what_one_site_lacks_and_same_drops_the_site():
    sites = _sites()
    shared = _run({**RC, "constraint.variables": "shared"}, sites)
    assert shared.status == "completed", shared.status
    assert shared.names["variables"] == [v for v in NAMES if v != "valve"]
    same = _run({**RC, "constraint.variables": "same", "min-nodes": 1}, sites)
    assert same.status == "completed", same.status
    assert same.metrics["clients"] == 1  # sites 1 and 2 hold other lists: dropped, named
    assert {d.split(" (")[0] for d in same.metrics["dropped"]} >= {"client 1", "client 2"}
