"""FedIV's bootstrap replicas and intervals: R = 0 is the ordinary run; replicas ride in the
same exchanges, carry parameter-shaped arrays only, equal the reference loop on the clients'
own resamples, and give an interval of g."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.iv import app as app_iv
from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.strategies import FedIV, FedIVSettings
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fediv", "seed": 4, "iv.iv-scenario": "abs", "iv.iv-n": 600,
      "iv.iv-rounds": 4, "iv.iv-local-epochs": 5, "iv.iv-lr-g": 0.05, "iv.iv-lr-f": 0.25,
      "iv.iv-val-features": 8, "min-nodes": 2, "node-wait-s": 5.0, "iv.iv-device": "cpu"}
K, R = 3, 3


def run(replicas: int, k: int = K):
    rc = {**RC, "iv.iv-replicas": replicas}
    grid = InProcessGrid(client_app, k, rc)
    strategy = app_iv.strategy("fediv", rc)
    strategy.wire_log.audit = True
    return strategy.start(grid=grid), strategy, grid


@pytest.fixture(scope="module")
def runs():
    return {r: run(r) for r in (0, R)}


@pytest.mark.integration
def test_replicas_leave_the_main_run_bit_identical(runs):
    plain, with_reps = runs[0][0], runs[R][0]
    assert plain.status == with_reps.status == "completed"
    assert "g_params_replicas" not in plain.estimates
    for key in ("g_params", "f_params", "g_params_selected"):
        for a, b in zip(plain.estimates[key], with_reps.estimates[key], strict=True):
            np.testing.assert_array_equal(a, b)
    assert plain.estimates["selected_round"] == with_reps.estimates["selected_round"]
    assert ([h["val_criterion"] for h in plain.history]
            == [h["val_criterion"] for h in with_reps.history])


@pytest.mark.integration
def test_zero_replicas_send_exactly_the_ordinary_messages(runs):
    strategy = runs[0][1]
    g, f = dg.networks((1,), (2,), 0)
    m = RC["iv.iv-val-features"] + 1
    local = [e for e in strategy.wire_log.entries if e["phase"] == "train.local"]
    down = [e for e in local if e["direction"] == "down"]
    up = [e for e in local if e["direction"] == "up"]
    assert {tuple(sh for sh, _ in e["arrays"]) for e in down} == {
        tuple(dg.shapes(g) + dg.shapes(f))}
    assert all(set(FedIVSettings().to_wire()) <= set(e["config"]) for e in down)
    assert not any("replicas" in key for e in down for key in e["config"])
    assert {tuple(sh for sh, _ in e["arrays"]) for e in up} == {
        tuple(dg.shapes(g) + dg.shapes(f) + [(m,), (m, m), (1,)])}


@pytest.mark.integration
def test_replicas_ride_in_the_same_exchanges(runs):
    (plain, s0, _), (reps, s1, _) = runs[0], runs[R]
    w0, w1 = s0.wire_summary(), s1.wire_summary()
    assert len(plain.history) == len(reps.history) == RC["iv.iv-rounds"]
    for key in w0:
        assert w0[key]["messages"] == w1[key]["messages"], key
    assert w1["train.local up"]["bytes"] > w0["train.local up"]["bytes"]
    assert w1["train.validate up"]["bytes"] == w0["train.validate up"]["bytes"]


@pytest.mark.integration
def test_only_parameter_shaped_arrays_cross_the_wire(runs):
    _, strategy, grid = runs[R]
    g, f = dg.networks((1,), (2,), 0)
    m = RC["iv.iv-val-features"] + 1
    nets = dg.shapes(g) + dg.shapes(f)
    allowed = set(nets) | {(R, *sh) for sh in nets} | {(m,), (m, m), (1,), (R,)}
    raw = np.concatenate([np.concatenate([d.x.ravel(), d.y, d.z.ravel()])
                          for i in range(K) for d in iv.client_data(RC, i, K).values()])
    for msg in grid.sent + grid.received:
        assert not msg.has_error()
        for rec in msg.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                assert a.shape in allowed, f"{msg.metadata.message_type} carries {a.shape}"
                assert not np.isin(a.ravel(), raw).any(), "a raw X/Y/Z value left a client"


@pytest.mark.integration
def test_replicas_differ_and_equal_the_reference_on_resampled_rows(runs):
    result = runs[R][0]
    reps = result.estimates["g_params_replicas"]
    main = result.estimates["g_params_selected"]
    assert len(reps) == R and result.metrics["replicas_used"] == R
    flat = [np.concatenate([np.ravel(a) for a in p]) for p in [main, *reps]]
    for i in range(len(flat)):
        for j in range(i + 1, len(flat)):
            assert np.abs(flat[i] - flat[j]).max() > 1e-6
    s = FedIVSettings.from_run_config(RC)
    best = result.estimates["selected_round"]
    data = [iv.client_data(RC, i, K)["train"] for i in range(K)]
    for r in (1, R):
        boot = [dg.batch(d.x, d.y, d.z).rows(dg.bootstrap_rows(len(d), s.seed, r, i))
                for i, d in enumerate(data)]
        st = dg.fedgda_reference(boot, s.replace(rounds=max(best, 1)), s.seed)
        theta = st.theta if best else dg.get_params(dg.networks((1,), (2,), s.seed)[0])
        for a, b in zip(reps[r - 1], theta, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


@pytest.mark.integration
def test_interval_estimates_and_the_saved_result(runs, tmp_path):
    result = runs[R][0]
    est = result.estimates
    x, _ = iv.eval_grid({k.split(".")[-1]: v for k, v in RC.items()})
    np.testing.assert_array_equal(est["interval_x"], x)
    assert est["interval_level"] == 0.9 and est["interval_method"] == "percentile"
    assert np.all(est["interval_lower"] <= est["interval_upper"])
    assert np.all(est["interval_upper"] - est["interval_lower"] > 0)
    np.testing.assert_allclose(est["interval_g"], result.predict(x), rtol=0, atol=1e-12)
    assert result.names["interval_x"]["cols"] == ["x0"]
    assert {"interval_g", "interval_lower", "interval_upper"} <= set(result.arrays.keys())
    loaded = RunResult.load(result.save(tmp_path))
    band = FedIV.interval(loaded, x[:, 0])
    np.testing.assert_allclose(band["lower"], est["interval_lower"], rtol=0, atol=1e-12)
    wide = FedIV.interval(loaded, x, level=0.99, method="normal")
    assert np.all(wide["upper"] - wide["lower"] > 0)
    with pytest.raises(ValueError, match="needs a run with iv-replicas >= 2"):
        FedIV.interval(runs[0][0], x)
    app_iv.save_plots("fediv", {**RC, "iv.iv-replicas": R}, result, tmp_path)
    assert (tmp_path / "g_vs_g0.png").stat().st_size > 0


def test_a_diverging_replica_stops_alone():
    main = dg.FedState([np.zeros(2)], [np.zeros(1)])
    reps = [dg.FedState([np.zeros(2)], [np.zeros(1)]) for _ in range(2)]
    ok = np.array([1.0, 0.0])
    deltas = {c: ([np.array([[0.1, 0.2], [0.0, 0.0]])], [np.array([[0.3], [0.0]])], ok)
              for c in range(3)}
    dg.replicas_round(reps, deltas, {c: 1 / 3 for c in range(3)}, 10.0, 2, 1)
    assert reps[0].round == 1 and not reps[0].stopped
    np.testing.assert_allclose(reps[0].theta[0], [0.1, 0.2])
    assert reps[1].stopped and reps[1].round == 0
    main.best_round, main.best_theta = 1, [np.zeros(2)]
    dg.select_replicas(reps, main, 1)
    assert reps[0].best_theta and not reps[1].best_theta


def test_bootstrap_interval_methods():
    reps = np.arange(1.0, 102.0)[:, None]  # 1..101
    main = np.array([60.0])
    lo, hi = dg.bootstrap_interval(main, reps, 0.9, "percentile")
    np.testing.assert_allclose([lo[0], hi[0]], [6.0, 96.0])
    lo, hi = dg.bootstrap_interval(main, reps, 0.9, "basic")
    np.testing.assert_allclose([lo[0], hi[0]], [120.0 - 96.0, 120.0 - 6.0])
    lo, hi = dg.bootstrap_interval(main, reps, 0.9, "normal")
    np.testing.assert_allclose(hi[0] - main[0], 1.6448536 * reps.std(ddof=1), rtol=1e-6)
    with pytest.raises(ValueError, match="interval method"):
        dg.bootstrap_interval(main, reps, 0.9, "bca")


def test_bootstrap_rows_depend_on_seed_replica_and_client():
    a = dg.bootstrap_rows(50, 1, 1, 0)
    assert a.shape == (50,) and a.min() >= 0 and a.max() < 50
    np.testing.assert_array_equal(a, dg.bootstrap_rows(50, 1, 1, 0))
    for other in (dg.bootstrap_rows(50, 2, 1, 0), dg.bootstrap_rows(50, 1, 2, 0),
                  dg.bootstrap_rows(50, 1, 1, 1)):
        assert not np.array_equal(a, other)


@pytest.mark.integration
def test_zero_replicas_equal_the_reference_loop_exactly(runs):
    """R = 0 is the ordinary run: the Flower path's arrays equal the reference loop's (the
    code path before replicas existed) bit for bit."""
    result = runs[0][0]
    s = FedIVSettings.from_run_config(RC)
    data = [iv.client_data(RC, i, K) for i in range(K)]
    basis = dg.rff(2, s.val_features, s.seed)
    tr = [dg.batch(d["train"].x, d["train"].y, d["train"].z) for d in data]
    val = [(dg.batch(d["val"].x, d["val"].y, d["val"].z), dg.features(d["val"].z, basis))
           for d in data]
    st = dg.fedgda_reference(tr, s, s.seed, val)
    for key, want in (("g_params", st.theta), ("f_params", st.tau),
                      ("g_params_selected", st.best_theta)):
        for a, b in zip(result.estimates[key], want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.integration
def test_the_byzantine_screen_sees_a_lie_in_the_replicas_alone():
    """Every replica is a group of the screen: a client that scales only its replicas' deltas
    is flagged and left out (of the main run too)."""
    from flwr.app import ArrayRecord, RecordDict

    g, f = dg.networks((1,), (2,), 0)
    n_main = len(dg.shapes(g)) + len(dg.shapes(f)) + 3

    def lying(msg, context):
        r = client_app(msg, context)
        if (int(context.node_config["partition-id"]) != 1 or r is None or r.has_error()
                or msg.metadata.message_type != "train.local"):
            return r
        arrays = r.content["arrays"].to_numpy_ndarrays()
        arrays = arrays[:n_main] + [50.0 * a for a in arrays[n_main:-1]] + arrays[-1:]
        content = RecordDict({k: v for k, v in r.content.items() if k != "arrays"})
        content["arrays"] = ArrayRecord(arrays)
        return type(r)(content, reply_to=msg)

    rc = {**RC, "iv.iv-replicas": 2, "iv.iv-rounds": 2}
    result = app_iv.strategy("fediv", rc).start(grid=InProcessGrid(lying, 4, rc))
    assert result.status == "completed"
    assert result.metrics["flagged"] == {"client 1": 2}


@pytest.mark.parametrize("shape,mode", [((1,), "gda"), ((1,), "sgda")])
def test_stacked_replicas_step_as_separate_runs(shape, mode):
    """``replicas_update`` (batched products for the MLPs) takes each replica's
    :func:`local_update` steps on its resample. (The CNN's vmap path agrees to 1e-16 too, but
    its first call costs seconds: not in the suite.)"""
    import torch

    rng = np.random.default_rng(0)
    n, reps = 8, 2
    b = dg.batch(rng.normal(size=(n, *shape)), rng.normal(size=n), rng.normal(size=(n, *shape)))
    g, f = dg.networks(shape, shape, 0)
    s = FedIVSettings(local_epochs=len(shape), mode=mode, batch_size=5,
                      optimizer="oadam" if len(shape) == 1 else "sgd")
    th, ta = dg.get_params(g), dg.get_params(f)
    dth, dta, u = dg.replicas_update(g, f, dg.replica_rows(b, 3, reps, 0),
                                     dg.stacked([th] * reps), dg.stacked([ta] * reps),
                                     [1, 2, 0], **s.local_args())
    assert dg.replica_ok(dth, dta, u).tolist() == [1.0] * reps
    for r in range(reps):
        rows = b.rows(torch.as_tensor(dg.bootstrap_rows(n, 3, r + 1, 0)))
        a, c, v = dg.local_update(g, f, rows, th, ta, [1, 2, 0], **s.local_args())
        for x, y in zip(dth + dta, a + c, strict=True):
            np.testing.assert_allclose(x[r], y, rtol=0, atol=1e-12)
        np.testing.assert_allclose(u[r], v, rtol=1e-9)
