"""The FDBNL/PFDBNL strategy-client pairs through the Message API (in-process Grid).

The reference loop is the oracle: the Flower path must give the same W and A. Also: what
crosses the wire, bad clients dropped, bad data named, and a user's own ServerApp/ClientApp.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from fedcausal_flwr.clients import FDBNLClient, register, reply
from fedcausal_flwr.data.timeseries import lagged
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.strategies import FDBNL, FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.dbn import RC, run_inprocess


def reference(rc: dict, k: int, ids=None):
    pf = rc["algorithm"] == "pfdbnl"
    s = (PFDBNLSettings if pf else FDBNLSettings).from_run_config(rc)
    moms = [dbn.moments(*client_data(rc, i, k)) for i in (ids if ids is not None else range(k))]
    ref = dbn.pfdbnl_reference if pf else dbn.fdbnl_reference
    return ref(moms, s)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,extra", [
    ("fdbnl", {}), ("fdbnl", {"dbn.clients-per-round": 2, "dbn.dual-update": "code"}),
    ("fdbnl", {"dbn.lambda-scale": "pooled"}),
    ("pfdbnl", {"dbn.heterogeneous": True, "dbn.num-rounds": 8}),
    ("pfdbnl", {"dbn.heterogeneous": True, "dbn.num-rounds": 6, "dbn.clients-per-round": 2}),
])
def test_flower_path_equals_reference(algorithm, extra):
    rc = {**RC, "algorithm": algorithm, **extra}
    result, _ = run_inprocess(rc, 4)
    state, history = reference(rc, 4)
    assert result.status == "completed"
    assert result.timing["rounds"] == len(history) == state.round
    np.testing.assert_allclose(result.estimates["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result.estimates["A"], state.A, rtol=0, atol=1e-8)
    if algorithm == "pfdbnl":
        for i in range(4):
            np.testing.assert_allclose(result.estimates["W_local"][i],
                                       state.W_local.get(i, np.zeros_like(state.W)), atol=1e-8)
    assert [h["round"] for h in result.history] == list(range(1, state.round + 1))
    assert np.isclose(result.history[-1]["h"], history[-1]["h"], rtol=1e-6, atol=1e-12)


def test_only_matrices_and_scalars_cross_the_wire():
    rc = {**RC, "dbn.num-rounds": 5}
    k, d, p = 3, RC["dbn.d"], RC["dbn.lags"]
    result, grid = run_inprocess(rc, k)
    assert result.status == "completed"
    raw = [np.hstack(client_data(rc, i, k)) for i in range(k)]
    allowed = {(d, d), (p * d, d), ()}
    n_arrays = 0
    for m in grid.sent + grid.received:
        assert not m.has_error()
        for rec in m.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                n_arrays += 1
                assert a.shape in allowed, f"{m.metadata.message_type} carries {a.shape}"
                for x in raw:  # no row of any client's series appears in a message
                    rows = a.reshape(-1, d) if a.size and a.size % d == 0 else np.empty((0, d))
                    gap = np.abs(rows[:, None, :] - x[None, :, :d]).max(axis=2, initial=0)
                    assert gap.size == 0 or gap.min() > 1e-9
        for rec in list(m.content.config_records.values()) + list(
                m.content.metric_records.values()):
            for v in rec.values():
                assert isinstance(v, (int, float, str, bool)), f"non-scalar {type(v)}"
    assert n_arrays == 5 * k * (4 + 2)  # [W, A, beta, gamma] down, [B, D] up per round


def test_bad_data_errors_name_the_problem():
    Xt, Xlag = client_data(RC, 0, 2)
    bad = Xt.copy()
    bad[3, 2] = np.inf  # NaN is a missing value (allowed), inf is an error
    with pytest.raises(ValueError, match="NaN/inf"):
        FDBNLClient(bad, Xlag, 0, 2)
    with pytest.raises(ValueError, match="fewer rows than the lag"):
        lagged(np.ones((1, 4)), 1)
    wide = FDBNLClient(np.hstack([Xt, Xt[:, :1]]), np.hstack([Xlag, Xlag[:, :1]]), 0, 2)
    d = Xt.shape[1]
    with pytest.raises(ValueError, match="wrong number of columns"):
        wide.fit([np.zeros((d, d)), np.zeros((d, d))] * 2, {"phase": "local", "dbn.rho2": 1.0})


class LyingClient(FDBNLClient):
    """Replies with what ``mode`` says instead of the true local step."""

    mode = "shape"

    def fit(self, parameters, config):
        out, n, m = super().fit(parameters, config)
        if self.mode == "shape":
            out = [out[0][:-1], out[1]]
        elif self.mode == "nan":
            out[0][0, 1] = np.nan
        elif self.mode == "crash":
            raise RuntimeError("client crashed")
        return out, n, m


def faulty_app(rc: dict, modes: dict[int, str]) -> ClientApp:
    app = ClientApp()

    @app.train("local")
    @app.query("info")
    def handle(msg: Message, context: Context) -> Message:
        pid, k = int(context.node_config["partition-id"]), int(
            context.node_config["num-partitions"])
        Xt, Xlag = client_data(rc, pid, k)
        if modes.get(pid) == "columns":
            Xt, Xlag = Xt[:, :-1], Xlag[:, :-1]
        client = LyingClient(Xt, Xlag, pid, k)
        client.mode = modes.get(pid, "honest")
        return reply(client, msg)

    return app


def test_bad_replies_are_dropped_and_the_run_finishes_with_the_rest():
    rc = {**RC, "dbn.num-rounds": 6}
    modes = {1: "shape", 2: "nan", 3: "crash", 4: "columns"}
    result, _ = run_inprocess(rc, 6, faulty_app(rc, modes))
    assert result.status == "completed"
    dropped = " | ".join(result.metrics["dropped"])
    for cid, why in [(1, "shape"), (2, "non-finite"), (3, "client crashed"), (4, "reports")]:
        assert f"client {cid}" in dropped and why in dropped
    assert all(h["n_clients"] == 2 for h in result.history)
    state, _ = reference(rc, 6, ids=[0, 5])  # only the honest clients 0 and 5 counted
    np.testing.assert_allclose(result.estimates["W"], state.W, atol=1e-8)


def test_too_few_valid_replies_stops_and_keeps_finished_rounds():
    rc = {**RC, "dbn.num-rounds": 6, "min-nodes": 3}
    saved = []

    class Flaky(LyingClient):
        def fit(self, parameters, config):
            if config["server-round"] >= 3 and self.partition_id == 0:
                raise RuntimeError("node went down")
            return super().fit(parameters, config)

    app = ClientApp()

    @app.train("local")
    @app.query("info")
    def handle(msg, context):
        pid = int(context.node_config["partition-id"])
        c = Flaky(*client_data(rc, pid, 3), pid, 3)
        c.mode = "honest"
        return reply(c, msg)

    strategy = app_dbn.strategy("fdbnl", rc)
    strategy.checkpoint = lambda r: saved.append(len(r.history))
    result = strategy.start(grid=InProcessGrid(app, 3, rc))
    assert result.status.startswith("stopped")
    assert len(result.history) == 2 and saved[-1] == 2
    assert np.all(np.isfinite(result.estimates["W"]))


def user_apps(pairs: list[tuple[np.ndarray, np.ndarray]], **start_kwargs):
    """Another Flower project: imports only the public API (the README snippet)."""
    user_client_app = ClientApp()
    register(user_client_app, "fdbnl", lambda context: dict(zip(
        ("Xt", "Xlag"), pairs[int(context.node_config["partition-id"])], strict=True)))
    user_server_app = ServerApp()
    out = {}

    @user_server_app.main()
    def server_main(grid, context: Context) -> None:
        out["result"] = FDBNL(USER, min_nodes=3).start(grid=grid, **start_kwargs)

    grid = InProcessGrid(user_client_app, len(pairs))
    user_server_app(grid, Context(1, 0, {}, RecordDict(), {}))
    return out["result"]


SERIES = [client_data(RC, i, 3) for i in range(3)]
MOMS = [dbn.moments(*pair) for pair in SERIES]
USER = FDBNLSettings(lambda_w=0.05, lambda_a=0.05, node_wait_s=5)


@pytest.mark.integration
def test_a_users_own_server_and_client_app():
    result = user_apps(SERIES, num_rounds=30)
    assert result.status == "completed" and result.metrics["clients"] == 3
    state, history = dbn.fdbnl_reference(MOMS, USER.replace(max_rounds=30))
    assert len(result.history) == len(history) == 30
    np.testing.assert_allclose(result.estimates["W"], state.W, atol=1e-8)
    # Flower's Result interface: final arrays and per-round metrics
    np.testing.assert_allclose(result.arrays["W"].numpy(), state.W, atol=1e-8)
    assert sorted(result.train_metrics_clientapp) == list(range(1, len(history) + 1))


def test_num_rounds_bounds_the_run():
    result = user_apps(SERIES, num_rounds=3)
    assert result.status == "completed" and len(result.history) == 3
    state, _ = dbn.fdbnl_reference(MOMS, USER.replace(max_rounds=3))
    np.testing.assert_allclose(result.estimates["W"], state.W, atol=1e-8)


def test_initial_arrays_warm_start_fdbnl():
    rng = np.random.default_rng(5)
    W0, A0 = 0.3 * rng.standard_normal((5, 5)), 0.3 * rng.standard_normal((5, 5))
    np.fill_diagonal(W0, 0.0)
    from flwr.app import ArrayRecord

    result = user_apps(SERIES, initial_arrays=ArrayRecord([W0, A0]), num_rounds=2)
    warm, _ = dbn.fdbnl_reference(MOMS, USER.replace(max_rounds=2), init=(W0, A0))
    cold, _ = dbn.fdbnl_reference(MOMS, USER.replace(max_rounds=2))
    np.testing.assert_allclose(result.estimates["W"], warm.W, atol=1e-8)
    assert np.abs(warm.W - cold.W).max() > 1e-3  # the warm start changed the run
    with pytest.raises(ValueError, match="do not fit d=5"):
        user_apps(SERIES, initial_arrays=[W0[:3, :3], A0], num_rounds=2)


def test_start_rejects_what_it_does_not_use():
    strategy = FDBNL()
    with pytest.raises(TypeError, match="unexpected keyword"):
        strategy.start(grid=None, num_round=3)
    with pytest.raises(ValueError, match="train_config is not used"):
        strategy.start(grid=None, train_config={"vertical.lr": 0.1})
    with pytest.raises(ValueError, match="num_rounds"):
        strategy.start(grid=None, num_rounds=0)
    with pytest.raises(TypeError, match="unknown settings"):
        FDBNL(lambda_q=0.1)
    with pytest.raises(ValueError, match="'dbn.lambda-w' = -1"):
        FDBNLSettings.from_run_config({"dbn.lambda-w": -1})


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,relpath,rc", [
    ("fdbnl", "netsim/sim1.mat", {"dbn.data": "netsim", "dbn.netsim-subject": 3,
                                  "dbn.num-rounds": 6}),
    ("pfdbnl", "netsim/sim1.mat", {"dbn.data": "netsim", "dbn.heterogeneous": True,
                                   "dbn.netsim-subject": 2,
                                   "dbn.num-rounds": 3}),
    ("fdbnl", "dream4/insilico_size100_1_timeseries.tsv",
     {"dbn.data": "dream4", "dbn.num-rounds": 1, "dbn.lambda-w": 0.0025, "dbn.lambda-a": 0.0025}),
])
def test_real_data_through_the_app(shared_data, algorithm, relpath, rc):
    rc = {**rc, "algorithm": algorithm, "dbn.lambda-scale": "paper",
          "dbn.data-path": str(shared_data(relpath))}
    result, grid = run_inprocess(rc, 5)
    assert result.status == "completed" and result.metrics["clients"] == 5
    assert 0.0 < result.metrics["auroc"] <= 1.0
    state, _ = reference(rc, 5)
    np.testing.assert_allclose(result.estimates["W"], state.W, atol=1e-8)


@pytest.mark.parametrize("heterogeneous", [False, True])
def test_evaluator_scores_a_global_graph_once_per_distinct_truth(monkeypatch, heterogeneous):
    """Issue 23: a homogeneous federation's clients share one truth, so the global graph is
    scored once per round (not K times); the averaged metrics are the same bit for bit."""
    from fedcausal_flwr.dbn.data import ground_truth
    from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics
    from fedcausal_flwr.metrics import mean_metrics

    rc = {"d": 5, "seed": 3, "generator": "svar", "heterogeneous": heterogeneous}
    K, rng = 6, np.random.default_rng(0)
    est = {"W": rng.normal(scale=0.4, size=(5, 5)), "A": rng.normal(scale=0.4, size=(5, 5))}
    want = mean_metrics([dbn_graph_metrics(est["W"], est["A"], *t, 0.2, 0.2)
                         for t in ground_truth(rc, K)])
    calls = []
    monkeypatch.setattr("fedcausal_flwr.dbn.evaluation.dbn_graph_metrics",
                        lambda *a: calls.append(1) or dbn_graph_metrics(*a))
    assert app_dbn.evaluator(rc)(est, list(range(K))) == want
    assert len(calls) == (K if heterogeneous else 1)
