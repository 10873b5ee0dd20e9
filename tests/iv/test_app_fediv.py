"""The FedIV strategy/client pair through the Message API (in-process Grid).

The reference loop is the oracle: the Flower path must give the same g and f parameters and
select the same round. Also: what crosses the wire, bad data, small clients, divergence, warm
starts, the settings the server sends, and a user's own ServerApp/ClientApp on own arrays.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import register, reply
from fedcausal_flwr.iv import app as app_iv
from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.iv.client import FedIVClient
from fedcausal_flwr.strategies import FedIV, FedIVSettings
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fediv", "seed": 4, "iv.iv-scenario": "step", "iv.iv-n": 600, "iv.iv-rounds": 5,
      "iv.iv-lr-g": 0.05, "iv.iv-lr-f": 0.25, "iv.iv-val-features": 8, "min-nodes": 2,
      "node-wait-s": 5.0, "iv.iv-device": "cpu"}


def run_inprocess(rc: dict, k: int, app=client_app):
    grid = InProcessGrid(app, k, rc)
    return app_iv.strategy("fediv", rc).start(grid=grid), grid


def reference(rc: dict, k: int, ids=None, init=None) -> dg.FedState:
    data = [iv.client_data(rc, i, k) for i in (ids if ids is not None else range(k))]
    tr = [dg.batch(d["train"].x, d["train"].y, d["train"].z) for d in data]
    basis = dg.rff(2, int(rc["iv.iv-val-features"]), int(rc["seed"]))
    val = [(dg.batch(d["val"].x, d["val"].y, d["val"].z), dg.features(d["val"].z, basis))
           for d in data]
    return dg.fedgda_reference(tr, FedIVSettings.from_run_config(rc), int(rc["seed"]), val,
                               ids=ids, init=init)


def assert_params_equal(a, b, tol=1e-10):
    assert len(a) == len(b)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(u), v, rtol=0, atol=tol)


@pytest.mark.integration
@pytest.mark.parametrize("extra", [
    {}, {"iv.iv-mode": "sgda", "iv.iv-batch-size": 64, "iv.iv-weighting": "n", "iv.iv-alpha": 5.0,
         "iv.iv-local-epochs": 2, "iv.iv-rounds": 3},
    {"iv.iv-optimizer": "oadam", "iv.iv-lr-g": 0.01, "iv.iv-lr-f": 0.01, "iv.iv-rounds": 3},
])
def test_flower_path_equals_reference(extra):
    rc = {**RC, **extra}
    result, _ = run_inprocess(rc, 3)
    st = reference(rc, 3)
    assert result.status == "completed"
    assert result.timing["rounds"] == st.round == rc["iv.iv-rounds"]
    assert_params_equal(result.estimates["g_params"], st.theta)
    assert_params_equal(result.estimates["f_params"], st.tau)
    assert result.estimates["selected_round"] == st.best_round
    assert_params_equal(result.estimates["g_params_selected"], st.best_theta)
    assert [h["round"] for h in result.history] == list(range(1, st.round + 1))
    for key in ("test_mse", "test_mse_selected", "test_mse_client_mean", "selected_round"):
        assert np.isfinite(result.metrics[key])


@pytest.mark.integration
def test_only_parameters_and_sums_cross_the_wire():
    rc = {**RC, "iv.iv-rounds": 2}
    k = 3
    result, grid = run_inprocess(rc, k)
    assert result.status == "completed"
    g, f = dg.networks((1,), (2,), 0)
    m = rc["iv.iv-val-features"] + 1
    allowed = set(dg.shapes(g) + dg.shapes(f)) | {(m,), (m, m), (1,)}
    raw = np.concatenate([np.concatenate([d.x.ravel(), d.y, d.z.ravel()])
                          for i in range(k) for d in iv.client_data(rc, i, k).values()])
    n_arrays = 0
    for msg in grid.sent + grid.received:
        assert not msg.has_error()
        for rec in msg.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                n_arrays += 1
                assert a.shape in allowed, f"{msg.metadata.message_type} carries {a.shape}"
                assert not np.isin(a.ravel(), raw).any(), "a raw X/Y/Z value left a client"
    per_round = len(dg.shapes(g)) + len(dg.shapes(f))
    assert n_arrays == k * (2 * (2 * per_round + 3) + len(dg.shapes(g)) + 2)
    assert all(h["bytes_up"] > h["bytes_down"] > 0 for h in result.history)


def test_bad_data_errors_name_the_problem():
    d = iv.client_data(RC, 0, 2)
    tr, va = (d["train"].x, d["train"].y, d["train"].z), (d["val"].x, d["val"].y, d["val"].z)
    for j, name in enumerate("XYZ"):
        bad = [a.copy() for a in tr]
        bad[j].reshape(-1)[3] = np.nan
        with pytest.raises(ValueError, match=f"client 0: train {name} has 1 NaN"):
            FedIVClient(tuple(bad), va, 0, 2)
    c = FedIVClient(tr, va, 0, 2)
    with pytest.raises(ValueError, match="client 0: expected 10 arrays"):
        c.fit([np.zeros(3)], {"phase": "local"})


def faulty_app(rc: dict, modes: dict[int, str]) -> ClientApp:
    app = ClientApp()

    @app.train("local")
    @app.train("validate")
    @app.query("info")
    def handle(msg: Message, context: Context) -> Message:
        pid, k = int(context.node_config["partition-id"]), int(
            context.node_config["num-partitions"])
        d = iv.client_data(rc, pid, k)
        tr = [d["train"].x.copy(), d["train"].y.copy(), d["train"].z.copy()]
        if modes.get(pid) in ("x", "y", "z"):
            tr["xyz".index(modes[pid])].reshape(-1)[0] = np.inf
        if modes.get(pid) == "small":
            tr = [a[:40] for a in tr]
        return reply(FedIVClient(tuple(tr), (d["val"].x, d["val"].y, d["val"].z), pid, k),
                     msg)

    return app


@pytest.mark.integration
def test_bad_clients_are_dropped_and_the_run_finishes_with_the_rest():
    rc = {**RC, "iv.iv-mode": "sgda", "iv.iv-batch-size": 64, "iv.iv-alpha": 50.0,
          "iv.iv-rounds": 2}
    result, _ = run_inprocess(rc, 6, faulty_app(rc, {1: "x", 2: "y", 3: "z", 4: "small"}))
    assert result.status == "completed"
    dropped = " | ".join(result.metrics["dropped"])
    for name in "XYZ":
        assert f"train {name} has 1 NaN/inf" in dropped
    assert "client 4: 40 train samples, fewer than one minibatch of 64" in dropped
    assert all(h["n_clients"] == 2 for h in result.history)
    st = reference(rc, 6, ids=[0, 5])  # only the honest clients 0 and 5 counted
    assert_params_equal(result.estimates["g_params"], st.theta)
    assert result.estimates["selected_round"] == st.best_round


@pytest.mark.integration
def test_a_diverging_run_stops_and_keeps_the_best_round():
    """Issue 13: a round whose global players explode (here from 0.9 and 3.3 to 158 in one
    round, the paper's raw gradients at too high rates) ends the run; the result says which
    round and what, keeps the finished rounds, and the reference loop stops at the same place.
    With the non-finite rule only, the same run goes on through finite blown-up rounds (peaks
    1e11, 1e67) until every client's local game is non-finite."""
    rc = {**RC, "iv.iv-rounds": 40, "iv.iv-lr-g": 1.0, "iv.iv-lr-f": 3.0, "iv.iv-local-epochs": 1,
          "iv.iv-grad-clip": 0.0}
    saved = []
    strategy = app_iv.strategy("fediv", rc)
    strategy.checkpoint = lambda r: saved.append((r.status, len(r.history)))
    result = strategy.start(grid=InProcessGrid(client_app, 3, rc))
    st = reference(rc, 3)
    t, sel = st.diverged_round, result.estimates["selected_round"]
    assert result.status == f"stopped: {st.stopped}"
    assert result.status.startswith(f"stopped: round {t}: diverged, exploding global "
                                    "parameters (max |parameter| ")
    assert result.status.endswith(f"; keeping round {sel}") and sel == st.best_round
    assert result.metrics["diverged"] is True and result.metrics["diverged_round"] == t
    assert 1 < t < 40 and [h["round"] for h in result.history] == list(range(1, t))
    assert saved[-1] == (result.status, t - 1)  # the final checkpoint says so too
    assert result.estimates["rounds"] == t - 1  # g_params: the last accepted global
    assert_params_equal(result.estimates["g_params"], st.theta)
    assert all(np.isfinite(a).all() for a in result.estimates["g_params_selected"])
    assert np.isfinite(result.metrics["test_mse_selected"])
    late = app_iv.strategy("fediv", {**rc, "iv.iv-diverge-factor": 0.0}).start(
        grid=InProcessGrid(client_app, 3, {**rc, "iv.iv-diverge-factor": 0.0}))
    assert "the local games diverged (non-finite loss)" in late.status
    assert late.metrics["diverged_round"] > t
    assert max(h["peak"] for h in late.history) > 1e10


@pytest.mark.integration
def test_a_run_that_does_not_diverge_says_so():
    result, _ = run_inprocess({**RC, "iv.iv-rounds": 2}, 2)
    assert result.status == "completed"
    assert result.metrics["diverged"] is False and result.metrics["diverged_round"] == 0


@pytest.mark.integration
def test_app_writes_g_against_g0_png(tmp_path):
    rc = {**RC, "iv.iv-rounds": 2, "outputs": str(tmp_path), "run-name": "r"}
    result, _ = run_inprocess(rc, 2)
    app_iv.save_plots("fediv", rc, result, tmp_path)
    assert (tmp_path / "g_vs_g0.png").stat().st_size > 0


@pytest.mark.integration
def test_warm_start_from_a_runs_final_parameters():
    rc = {**RC, "iv.iv-rounds": 3}
    first, _ = run_inprocess(rc, 3)
    theta, tau = first.estimates["g_params"], first.estimates["f_params"]
    rc2 = {**rc, "iv.iv-rounds": 2}
    cold, _ = run_inprocess(rc2, 3)
    strategy = app_iv.strategy("fediv", rc2)
    warm = strategy.start(grid=InProcessGrid(client_app, 3, rc2),
                          initial_arrays=ArrayRecord([*theta, *tau]))
    ref = reference(rc2, 3, init=(theta, tau))
    assert warm.status == "completed" and len(warm.history) == 2
    assert_params_equal(warm.estimates["g_params"], ref.theta)
    assert_params_equal(warm.estimates["f_params"], ref.tau)
    assert warm.estimates["selected_round"] == ref.best_round
    # round 1 scores the incoming theta: the warm start, not the seed's network
    assert warm.history[0]["val_criterion"] == pytest.approx(first.metrics["final_val_criterion"],
                                                              rel=1e-10)
    assert abs(warm.history[0]["val_criterion"] - cold.history[0]["val_criterion"]) > 1e-6
    assert max(np.abs(a - b).max() for a, b in zip(warm.estimates["g_params"],
                                                     cold.estimates["g_params"],
                                                     strict=True)) > 1e-3
    # g alone: f starts from the seed
    g_only = app_iv.strategy("fediv", rc2).start(grid=InProcessGrid(client_app, 3, rc2),
                                                 initial_arrays=list(theta))
    ref = reference(rc2, 3, init=(theta, None))
    assert_params_equal(g_only.estimates["f_params"], ref.tau)
    assert_params_equal(g_only.estimates["g_params"], ref.theta)


def test_warm_start_with_wrong_shapes_names_the_expected_ones():
    rc = {**RC, "iv.iv-rounds": 1}
    g, f = dg.networks((1,), (2,), 0)
    bad = dg.get_params(g)[:-1]
    with pytest.raises(ValueError, match=r"g's parameters \[\(20, 1\), \(20,\), .*got shapes"):
        app_iv.strategy("fediv", rc).start(grid=InProcessGrid(client_app, 2, rc),
                                           initial_arrays=bad)
    with pytest.raises(ValueError, match="followed by f's"):
        app_iv.strategy("fediv", rc).start(grid=InProcessGrid(client_app, 2, rc),
                                           initial_arrays=dg.get_params(f) + dg.get_params(g))


def test_clients_run_the_settings_the_server_sends():
    s = FedIVSettings(lr_g=0.3, lr_f=0.4, mode="sgda", batch_size=32, local_epochs=3,
                      optimizer="oadam", momentum=0.5, grad_clip=0.7, betas=(0.1, 0.2), seed=7,
                      val_features=5, weighting="n", rounds=9)
    got = FedIVSettings.from_wire({**s.to_wire(), "server-round": 2, "phase": "local"})
    for name in FedIVSettings.wire_fields():
        assert getattr(got, name) == getattr(s, name), name
    cfg = s.to_wire()
    assert set(cfg) == {"lr_g", "lr_f", "mode", "batch_size", "local_epochs", "optimizer",
                        "momentum", "grad_clip", "betas", "seed", "val_features"}
    del cfg["lr_f"]
    with pytest.raises(ValueError, match=r"client 3: the server's message lacks the "
                                         r"FedIVSettings wire settings \['lr_f'\]"):
        FedIVSettings.from_wire(cfg, "client 3")


def own_data(k: int, n: int = 300, seed: int = 21) -> list[dict]:
    """A user's own IV data: z -> x (confounded by e) -> y = |x| + e, per client; y roughly
    standardized (the default rates suit y of unit scale, as the App's data; y of sd 3 and
    more diverges)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        split = {}
        for name in ("train", "val"):
            z = rng.uniform(-3, 3, (n, 2))
            e = rng.standard_normal(n)
            x = z.sum(axis=1) + e
            split[name] = (x[:, None], (np.abs(x) + e - 2.1) / 1.8, z)
        out.append(split)
    return out


@pytest.mark.integration
def test_a_users_own_server_and_client_app():
    """Another Flower project: the public API on its own (x, y, z) arrays (README snippet)."""
    data = own_data(3)
    user_client_app = ClientApp()
    register(user_client_app, "fediv",
             lambda context: data[int(context.node_config["partition-id"])])
    user_server_app = ServerApp()
    settings = FedIVSettings(val_features=8, seed=2, node_wait_s=5.0)
    out = {}

    @user_server_app.main()
    def server_main(grid, context: Context) -> None:
        out["result"] = FedIV(settings, min_nodes=3).start(grid=grid, num_rounds=3)

    user_server_app(InProcessGrid(user_client_app, 3), Context(1, 0, {}, RecordDict(), {}))
    result = out["result"]
    assert result.status == "completed" and result.metrics["clients"] == 3
    assert len(result.history) == 3 and "test_mse" not in result.metrics  # no truth, no score
    basis = dg.rff(2, 8, 2)
    st = dg.fedgda_reference([dg.batch(*d["train"]) for d in data], settings.replace(rounds=3),
                             2, [(dg.batch(*d["val"]), dg.features(d["val"][2], basis))
                                 for d in data])
    assert_params_equal(result.estimates["g_params"], st.theta)
    assert_params_equal(result.estimates["f_params"], st.tau)
    assert result.estimates["selected_round"] == st.best_round
    # Flower's Result interface: final arrays and per-round metrics
    assert sorted(result.train_metrics_clientapp) == [1, 2, 3]
    assert max(np.abs(a - b).max() for a, b in zip(st.theta, dg.get_params(
        dg.networks((1,), (2,), 2)[0]), strict=True)) > 1e-3  # g moved with the defaults
