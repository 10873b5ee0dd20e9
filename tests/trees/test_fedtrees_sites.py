"""FedTrees with sites that hold different variables (``trees.variables``): a site grows
forests only for the targets it holds, on the inputs it holds; each importance is averaged
over the sites that hold both its input and its target; the run equals that loop."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr import registry
from fedcausal_flwr.data.series import windows
from fedcausal_flwr.federation.client import register
from fedcausal_flwr.federation.sites import union
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.client import FedTreesClient
from fedcausal_flwr.trees.settings import FedTreesSettings

NAMES = ["pump", "flow", "valve", "temp", "fan"]
#: site -> the variables it holds, in its own column order (site 1 lacks the valve)
HOLDS = {0: NAMES, 1: ["temp", "flow", "pump", "fan"], 2: ["fan", "valve", "temp", "pump",
                                                          "flow"]}
RC = {"algorithm": "fedtrees", "trees.trees": 30, "min-nodes": 2, "node-wait-s": 5.0,
      "round-timeout-s": 30.0, "seed": 1}


def _series(seed: int, n: int = 200) -> np.ndarray:
    """pump drives flow through a square, valve drives temp through a threshold."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, len(NAMES)))
    for t in range(1, n):
        e = rng.standard_normal(len(NAMES))
        X[t] = e
        X[t, 1] = X[t - 1, 0] ** 2 - 1 + 0.3 * e[1]
        X[t, 3] = np.sign(X[t - 1, 2]) + 0.3 * e[3]
    return X


def _sites(p: int) -> dict[int, tuple[np.ndarray, list[str]]]:
    return {c: (np.vstack(windows([_series(c)[:, [NAMES.index(v) for v in names]]], p)), names)
            for c, names in HOLDS.items()}


def _run(rc: dict, sites: dict):
    def make(ctx):
        Z, names = sites[int(ctx.node_config["partition-id"])]
        return {"Z": Z, "names": names, "d": len(names)}

    app = ClientApp()
    register(app, "fedtrees", make)
    return registry.get("fedtrees").strategy_class()(FedTreesSettings.from_run_config(rc)).start(
        grid=InProcessGrid(app, len(sites), rc, None))


def test_a_site_lacking_a_variable_informs_nothing_of_it():
    Z, names = _sites(2)[1]
    client = FedTreesClient(Z, 4, names)
    s = FedTreesSettings(trees=10)
    imp, = client.importance([], {**s.to_wire(), "variables": ",".join(NAMES)})[0]
    v = NAMES.index("valve")
    assert imp.shape == (10, 5)
    assert (imp[[v, 5 + v]] == 0).all() and (imp[:, v] == 0).all()
    holds = np.array([n != "valve" for n in NAMES])
    assert np.allclose(imp.sum(axis=0), 0.8 * holds)  # 4 of 5 inputs: shares sum to 4/5
    M = model.informed(holds, 2)
    assert M.shape == (10, 5) and not M[v].any() and M[0, 1]


def test_the_pooled_importance_averages_over_the_sites_that_inform_it():
    a, b = np.full((2, 2), 0.2), np.full((2, 2), 0.6)
    ma, mb = np.ones((2, 2), bool), np.array([[True, False], [True, True]])
    out = model.pooled([a, b], [1, 3], masks=[ma, mb])
    assert out[0, 1] == pytest.approx(0.2) and out[1, 0] == pytest.approx(0.5)
    assert model.pooled([a, b], [1, 3], masks=[~ma, ~ma]).sum() == 0


@pytest.mark.integration
def test_union_sites_run_equals_the_loop_and_finds_both_edges():
    rc = {**RC, "trees.lags": 1}
    sites = _sites(1)
    result = _run(rc, sites)
    assert result.status == "completed", result.status
    variables = union([names for _, names in sites.values()])
    assert result.names["variables"] == variables == NAMES
    s = FedTreesSettings.from_run_config(rc)
    imps, rows, masks = [], [], []
    for Z, names in sites.values():
        X, Y = model.window_regression(Z, len(names))
        ids = [NAMES.index(n) for n in names]
        imps.append(model.placed(model.forest_importance(
            X, Y, s.trees, s.max_features, s.forest_seed, s.min_leaf, ids), ids, len(NAMES)))
        rows.append(len(X))
        masks.append(model.informed(np.isin(NAMES, names), 1))
    ref = model.estimates(imps, rows, len(NAMES), s.edge_factor, masks=masks)[0]
    for key, want in ref.items():
        assert np.array_equal(np.asarray(result.estimates[key]), want), key
    G = np.asarray(result.estimates["graph"])
    assert G[0, 1] == 1 and G[2, 3] == 1
    assert result.estimates["graph_frequency"][2, 3] == 1.0  # both sites holding valve keep it
