"""FedIV core: Lemma 1/2 closed form, FedGDA's reductions to centralized GDA, the data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common.config import flatten_dict

from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg

RC = {"iv.iv-scenario": "abs", "seed": 5, "iv.iv-n": 600, "iv.iv-alpha": 0.3}


def batches(rc, k):
    return [dg.batch(c["train"].x, c["train"].y, c["train"].z)
            for c in (iv.client_data(rc, i, k) for i in range(k))]


def pooled(bs):
    return dg.Batch(torch.cat([b.x for b in bs]), torch.cat([b.y for b in bs]),
                    torch.cat([b.z for b in bs]))


def assert_params_close(a, b, tol=1e-10):
    assert len(a) == len(b)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, rtol=0, atol=tol)


def test_lemma1_ascent_on_linear_f_reaches_closed_form():
    """A1: ascent on v of v'psi - v'Cv/4 (client means) -> v* = 2 C^-1 psi, value psi'C^-1 psi."""
    rng = np.random.default_rng(0)
    basis = dg.rff(2, 6, 0)
    psis, Cs = [], []
    for i in range(3):
        z, e = rng.uniform(-3, 3, (50 + 20 * i, 2)), rng.standard_normal(50 + 20 * i)
        phi = dg.features(z, basis)
        psis.append(phi.T @ e / len(e))
        Cs.append((phi * e[:, None] ** 2).T @ phi / len(e))
    psi, C = np.mean(psis, axis=0), np.mean(Cs, axis=0)
    v = np.zeros_like(psi)
    step = 1.0 / np.linalg.eigvalsh(C).max()
    for _ in range(200000):
        grad = psi - 0.5 * C @ v
        v += step * grad
        if np.linalg.norm(grad) < 1e-14:
            break
    v_star = 2 * np.linalg.solve(C, psi)
    np.testing.assert_allclose(v, v_star, rtol=1e-6)
    value = v @ psi - 0.25 * v @ C @ v
    closed = dg.criterion(psi * 7, C * 7, 7, ridge=0.0)
    assert abs(value - closed) / closed < 1e-6


def test_game_value_is_the_moment_minus_quarter_variance():
    b = batches(RC, 1)[0]
    g, f = dg.networks((1,), (2,), 0)
    with torch.no_grad():
        r = (b.y - g(b.x)).numpy().ravel()
        fz = f(b.z).numpy().ravel()
    u = float(dg.game_value(g, f, b).detach())
    assert abs(u - (np.mean(fz * r) - 0.25 * np.mean(fz ** 2 * r ** 2))) < 1e-12
    assert abs(dg.moment(g, f, b) - np.mean(fz * r)) < 1e-12


@pytest.mark.parametrize("mode", ["gda", "sgda"])
def test_one_client_is_centralized_gda(mode):
    """A2: N = 1, R = 1 gives exactly centralized (S)GDA after T steps/epochs."""
    s = dg.FedIVSettings(lr_g=0.05, lr_f=0.2, mode=mode, batch_size=128, local_epochs=1,
                         rounds=6)
    b = batches(RC, 1)[0]
    st = dg.fedgda_reference([b], s, seed=3)
    g, f, _, _ = dg.centralized_deepgmm(b, s, seed=3, epochs=6)
    assert_params_close(st.theta, dg.get_params(g))
    assert_params_close(st.tau, dg.get_params(f))
    g0, _ = dg.networks((1,), (2,), 3)
    assert max(np.abs(a - c).max() for a, c in zip(st.theta, dg.get_params(g0),
                                                     strict=True)) > 1e-3  # it did move


def test_one_full_batch_step_n_weighted_is_pooled_gda():
    """A2: R = 1, full batch, n_i-weighted averaging = centralized GDA on the pooled data.

    A property of Algorithm 1's raw gradients (``grad_clip = 0``): clipping each client's
    gradient is not clipping the pooled one."""
    s = dg.FedIVSettings(lr_g=0.05, lr_f=0.2, local_epochs=1, weighting="n", rounds=4,
                         grad_clip=0.0)
    bs = batches(RC, 4)
    assert len({b.n for b in bs}) > 1
    st = dg.fedgda_reference(bs, s, seed=2)
    g, f, _, _ = dg.centralized_deepgmm(pooled(bs), s, seed=2, epochs=4)
    assert_params_close(st.theta, dg.get_params(g))
    assert_params_close(st.tau, dg.get_params(f))
    uni = dg.fedgda_reference(bs, s.replace(weighting="uniform"), seed=2)
    assert max(np.abs(a - c).max() for a, c in zip(uni.theta, st.theta, strict=True)) > 1e-8


def test_uniform_weights_step_on_the_mean_game():
    """A2: R = 1 uniform = one GDA step on (1/N) sum_i U_i (eq. 20), with Algorithm 1's raw
    gradients (``grad_clip = 0``; the mean of clipped gradients is not the clipped mean)."""
    s = dg.FedIVSettings(lr_g=0.05, lr_f=0.2, local_epochs=1, grad_clip=0.0)
    bs = batches(RC, 3)
    g, f = dg.networks((1,), (2,), 4)
    theta, tau = dg.get_params(g), dg.get_params(f)
    u = sum(dg.game_value(g, f, b) for b in bs) / 3
    grads = torch.autograd.grad(u, list(g.parameters()) + list(f.parameters()))
    want_th = [p - 0.05 * gr.numpy() for p, gr in zip(theta, grads[:len(theta)], strict=True)]
    want_ta = [p + 0.2 * gr.numpy() for p, gr in zip(tau, grads[len(theta):], strict=True)]
    d = {i: dg.local_update(g, f, b, theta, tau, [0, 1, i], **s.local_args())
         for i, b in enumerate(bs)}
    w = dg.client_weights({i: b.n for i, b in enumerate(bs)}, s.weighting)
    assert_params_close(dg.server_update(theta, {i: v[0] for i, v in d.items()}, w), want_th)
    assert_params_close(dg.server_update(tau, {i: v[1] for i, v in d.items()}, w), want_ta)


def test_identical_clients_give_identical_deltas():
    b = batches(RC, 1)[0]
    s = dg.FedIVSettings(lr_g=0.01, lr_f=0.05, mode="sgda", batch_size=100, local_epochs=2)
    g, f = dg.networks((1,), (2,), 0)
    theta, tau = dg.get_params(g), dg.get_params(f)
    a = dg.local_update(g, f, b, theta, tau, [0, 1, 7], **s.local_args())
    c = dg.local_update(g, f, b, theta, tau, [0, 1, 7], **s.local_args())
    assert_params_close(a[0], c[0], 0)
    assert_params_close(a[1], c[1], 0)


@pytest.mark.parametrize("opt", ["sgdm", "oadam"])
def test_optimizers_move_and_stay_finite(opt):
    b = batches(RC, 1)[0]
    s = dg.FedIVSettings(lr_g=0.01, lr_f=0.01, optimizer=opt, rounds=3)
    g, f, _, _ = dg.centralized_deepgmm(b, s, seed=1, epochs=3)
    sgd, _, _, _ = dg.centralized_deepgmm(b, dg.FedIVSettings(lr_g=0.01, lr_f=0.01), 1, 3)
    assert all(np.isfinite(p).all() for p in dg.get_params(g))
    assert max(np.abs(a - c).max() for a, c in zip(dg.get_params(g), dg.get_params(sgd),
                                                     strict=True)) > 1e-6


def test_sgda_needs_one_minibatch():
    b = batches(RC, 1)[0].rows(slice(0, 100))
    g, f = dg.networks((1,), (2,), 0)
    with pytest.raises(ValueError, match="fewer than one minibatch"):
        dg.local_update(g, f, b, dg.get_params(g), dg.get_params(f), [0],
                        **dg.FedIVSettings(mode="sgda").local_args())


def test_data_generating_process():
    """A4: endogeneity, valid instrument, standardization, Dirichlet splits, image classes."""
    rng = np.random.default_rng(0)
    for dgp in ("paper", "code"):
        x, y, z, g = iv.raw_split("abs", 20000, dgp, rng)
        eps = y - g
        assert np.corrcoef(x, eps)[0, 1] > 0.2
        m = z[:, 0] * eps
        assert abs(m.mean()) < 3 * m.std() / np.sqrt(len(m))
    data = iv.dataset({**RC, "iv.iv-n": 4000})
    assert abs(data["train"].y.mean()) < 1e-12 and abs(data["train"].y.std() - 1) < 1e-12
    idx = iv.split_indices({**RC, "iv.iv-n": 4000}, 10)
    for parts in idx.values():
        sizes = [len(p) for p in parts]
        assert sum(sizes) == 4000 and min(sizes) >= 5
        assert sorted(np.concatenate(parts).tolist()) == list(range(4000))
    assert [len(p) for p in idx["train"]] != [len(p) for p in idx["val"]]
    assert iv.digit_class(np.array([-10 / 3, 8 / 3, 5.0, -9.0]))[:2].tolist() == [0, 9]
    assert iv.g0("step", np.array([-1.0, 0.0]), "code").tolist() == [1.0, 2.5]


def test_image_scenarios_shapes_and_true_g():
    for sc in iv.IMAGE:
        d = iv.dataset({"iv.iv-scenario": sc, "seed": 1, "iv.iv-n": 300})["train"]
        assert d.x.shape[1:] == ((1, 8, 8) if sc != "image-z" else (1,))
        assert d.z.shape[1:] == ((1, 8, 8) if sc != "image-x" else (1,))
        g, f = dg.networks(d.x.shape[1:], d.z.shape[1:], 0)
        b = dg.batch(d.x[:50], d.y[:50], d.z[:50])
        assert np.isfinite(float(dg.game_value(g, f, b).detach()))


def test_runs_are_deterministic_for_a_seed():
    bs = batches({**RC, "iv.iv-alpha": 50.0}, 3)
    s = dg.FedIVSettings(lr_g=0.01, lr_f=0.05, mode="sgda", batch_size=64, local_epochs=1,
                         rounds=2, optimizer="sgdm")
    a, b = dg.fedgda_reference(bs, s, seed=9), dg.fedgda_reference(bs, s, seed=9)
    assert_params_close(a.theta, b.theta, 0)
    c = dg.fedgda_reference(bs, s, seed=10)
    assert max(np.abs(u - v).max() for u, v in zip(a.theta, c.theta, strict=True)) > 1e-6


def test_settings_defaults_are_the_apps():
    """FedIVSettings() is the App's FedDeepGMM-GDA (a user's project trains like the App)."""
    s = dg.FedIVSettings()
    assert (s.lr_g, s.lr_f, s.local_epochs, s.batch_size, s.optimizer, s.momentum) == (
        0.02, 0.2, 40, 256, "sgd", 0.9)
    assert (s.weighting, s.val_features, s.device, s.mode, s.rounds, s.seed) == (
        "uniform", 32, "auto", "gda", 50, 0)
    assert s.rounds * s.local_epochs == 200 * 10  # Table 1's local work in fewer exchanges
    assert s.betas == (0.5, 0.9) and "betas" not in s.keys().values()  # not in the run config
    assert s.keys()["iv-rounds"] == "rounds" and "num-rounds" not in s.keys()  # FDBNL's


def test_settings_reject_bad_values_naming_the_key():
    with pytest.raises(ValueError, match=r"'iv.iv-lr-g' = 0.0: must be > 0"):
        dg.FedIVSettings.from_run_config({"iv.iv-lr-g": 0.0})
    with pytest.raises(ValueError, match="'iv.iv-optimizer' = 'adam'.*'sgd', 'sgdm', 'oadam'"):
        dg.FedIVSettings.from_run_config({"iv.iv-optimizer": "adam"})
    with pytest.raises(ValueError, match="'iv.iv-local-epochs' = 2.5: expected an integer"):
        dg.FedIVSettings.from_run_config({"iv.iv-local-epochs": 2.5})
    with pytest.raises(ValueError, match="betas"):
        dg.FedIVSettings(betas=(0.5, 1.0))


def test_data_defaults_live_in_one_place_and_the_app_declares_them():
    import tomllib
    from pathlib import Path

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    app = flatten_dict(doc["tool"]["flwr"]["app"]["config"])
    want = iv.IVDataConfig().run_config()
    assert set(want) == {"iv-scenario", "iv-dgp", "iv-n", "iv-n-test", "iv-alpha", "seed",
                         # node-local CSVs (issue 10): which columns are z, x, y
                         "iv-instrument", "iv-treatment", "iv-outcome", "iv-val-fraction"}
    for key, value in want.items():
        key = iv.IVDataConfig.app_key(key)
        assert app[key] == value and type(app[key]) is type(value), key
    assert iv.settings({}) == {"scenario": "abs", "dgp": "paper", "n": 20000,
                               "n_test": 20000,
                               "alpha": 0.3, "seed": 0}
    with pytest.raises(ValueError, match="'iv.iv-scenario' = 'ab'.*'abs'"):
        iv.dataset({"iv.iv-scenario": "ab"})
    with pytest.raises(ValueError, match="'iv.iv-alpha' = -1"):
        iv.split_indices({"iv.iv-alpha": -1}, 3)


def test_settings_defaults_of_the_stabilised_game():
    """Issue 13: f's local gradient clipped by default (0 is the paper's Algorithm 1), and the
    divergence rule's factor; the App declares both (test_app_config)."""
    s = dg.FedIVSettings()
    assert (s.grad_clip, s.diverge_factor) == (5.0, 10.0)
    assert s.keys()["iv-grad-clip"] == "grad_clip" and "grad_clip" in s.wire_fields()
    assert s.keys()["iv-diverge-factor"] == "diverge_factor"


def test_clip_bounds_the_norm_and_keeps_the_direction():
    grads = [torch.tensor([3.0, 0.0], dtype=torch.float64), torch.tensor([[4.0]],
                                                                        dtype=torch.float64)]
    out = dg.clip(grads, 2.0)  # norm 5 -> 2
    assert float(torch.sqrt(sum((g * g).sum() for g in out))) == pytest.approx(2.0)
    assert torch.allclose(out[0], grads[0] * 0.4) and torch.allclose(out[1], grads[1] * 0.4)
    assert dg.clip(grads, 6.0) is grads and dg.clip(grads, 0.0) is grads


def test_a_step_inside_the_clip_bound_is_the_papers_step():
    b = batches(RC, 1)[0]
    runs = []
    for clip in (0.0, 1e6):
        g, f = dg.networks((1,), (2,), 3)
        game = dg.FedIVSettings(grad_clip=clip).game_args()
        del game["mode"], game["batch_size"]  # the minibatch plan, not the step's
        dg.gda_step(g, f, b, dg.OptState(), **game)
        runs.append(dg.get_params(g) + dg.get_params(f))
    assert_params_close(*runs, tol=0)


def tiny_client():
    """Dev seed 106's client 1 of the step scenario (10 train rows of the Dirichlet split):
    the unclipped local game blew up in round 1 and made the whole run non-finite."""
    rc = {"iv.iv-scenario": "step", "iv.iv-dgp": "paper", "seed": 106, "iv.iv-n": 20000,
          "iv.iv-alpha": 0.3}
    d = iv.client_data(rc, 1, 10)["train"]
    return dg.batch(d.x, d.y, d.z)


def test_clipping_keeps_a_tiny_clients_local_game_finite():
    b = tiny_client()
    assert b.n == 10
    g, f = dg.networks((1,), (2,), 106)
    th, ta = dg.get_params(g), dg.get_params(f)
    with np.errstate(all="ignore"):
        dth, dta, u = dg.local_update(g, f, b, th, ta, [106, 1, 1],
                                      **dg.FedIVSettings(grad_clip=0.0).local_args())
    assert not np.isfinite(u)  # the paper's raw gradients: f overshoots and explodes
    dth, dta, u = dg.local_update(g, f, b, th, ta, [106, 1, 1], **dg.FedIVSettings().local_args())
    assert np.isfinite(u) and dg.peak(dth + dta) < 10  # f moves at most lr_f x 2 a step


def test_divergence_rule():
    g, f = dg.networks((1,), (2,), 0)
    th, ta = dg.get_params(g), dg.get_params(f)
    st = dg.FedState(th, ta)
    assert st.peak == dg.peak(th + ta) and 0 < st.peak < 10
    assert dg.divergence(th, ta, st, 10.0) is None
    top = 10.5 * max(1.0, st.peak)  # > 10 x the run's largest so far
    assert dg.divergence(th, [a * 0 + top / 1.1 for a in ta], st, 10.0) is None
    big = [a * 0 + top for a in ta]
    assert (f"exploding global parameters (max |parameter| {top:.3g} > 10 x the run's "
            f"largest so far, {max(1.0, st.peak):.3g})") in dg.divergence(th, big, st, 10.0)
    assert dg.divergence(th, big, st, 0.0) is None  # factor 0: the non-finite rule only
    nan = [a.copy() for a in th]
    nan[0][0, 0] = np.nan
    assert dg.divergence(nan, ta, st, 0.0) == "non-finite global parameters (g)"
    assert dg.peak(nan) == np.inf


def test_reference_loop_stops_a_diverging_run_and_keeps_what_it_did():
    bs = batches({**RC, "iv.iv-scenario": "step", "seed": 4}, 3)
    s = dg.FedIVSettings(lr_g=1.0, lr_f=3.0, local_epochs=1, rounds=40, grad_clip=0.0)
    st = dg.fedgda_reference(bs, s, seed=4)
    assert st.stopped.startswith(f"round {st.diverged_round}: diverged, exploding global")
    assert 1 < st.diverged_round < 40 and st.round == st.diverged_round - 1
    assert [h["round"] for h in st.history] == list(range(1, st.round + 1))
    assert np.isfinite(dg.peak(st.theta + st.tau))
    late = dg.fedgda_reference(bs, s.replace(diverge_factor=0.0), seed=4)  # non-finite only
    assert late.diverged_round > st.diverged_round
    assert "the local games diverged (non-finite loss)" in late.stopped
    assert max(h["peak"] for h in late.history) > 1e10  # finite, exploded, accepted
    ok = dg.fedgda_reference(bs, s.replace(rounds=3, lr_g=0.02, lr_f=0.2), seed=4)
    assert ok.stopped == "" and ok.diverged_round == 0 and ok.round == 3


def test_client_splits_are_drawn_once_per_process(monkeypatch):
    """Issue 23: cutting the rows into K chunks is O(n + K); drawn at every client's call it
    made an exchange O(K^2). Now once per process, with the same chunks as a fresh draw."""
    iv._split_indices.cache_clear()
    calls = []
    real = iv.partition
    monkeypatch.setattr(iv, "partition", lambda *a: calls.append(a) or real(*a))
    rows = [iv.client_data(RC, i, 8)["train"].y for i in range(8)]
    assert len(calls) == 3  # one draw per split, not one per client
    rng = np.random.default_rng([5, iv.DATA_TAG, 8])
    fresh = {sp: real(600, 8, 0.3, rng) for sp in iv.SPLITS}
    pooled = iv.dataset(RC)["train"].y
    for i in range(8):
        np.testing.assert_array_equal(rows[i], pooled[fresh["train"][i]])
