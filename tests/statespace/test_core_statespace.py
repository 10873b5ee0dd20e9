"""core/statespace: gradients vs finite differences, FedGC = FedCF without inputs, oracle, loop."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fedcausal_flwr.statespace import kalman, loop, lti
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import all_clients, merged_config

SLOW = {"lr_server": 0.5, "lr_client": 0.5}  # the steps these tests were written with


def small_clients(U: int = 2, T: int = 60, seed: int = 0, coupling: float = 0.3):
    rng = np.random.default_rng(seed)
    sys = lti.random_system([2, 3], [U, U], [4, 5], {(1, 0): coupling * np.ones((3, 2))}, rng,
                           q=1e-2, r=1e-2)
    _, y, u = lti.simulate(sys, T, rng, u=lti.inputs(T, 2 * U, rng))
    return sys, lti.split_clients(sys, y, u)


def random_params(clients, rng, U: int):
    cpar = [ss.ClientParams(rng.normal(0, 0.3, (c.dims[0], c.dims[2])),
                            rng.normal(0, 0.3, c.dims[0])) for c in clients]
    sp = ss.initial_server([2, 3], [U, U], 0.3, rng)
    return cpar, sp


def server_loss(clients, cpar, sp, ts, s):
    msgs = [ss.client_states(c, p, ts, s.target) for c, p in zip(clients, cpar, strict=True)]
    return ss.server_window(loop.clients_A(clients), loop.clients_B(clients), sp, msgs, s.xi)


def fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f()
        x[i] = old - eps
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("target", ["predicted", "refined", "innovation"])
def test_fedcf_gradients_match_finite_differences(target):
    _, clients = small_clients()
    rng = np.random.default_rng(1)
    cpar, sp = random_params(clients, rng, 2)
    ts = np.arange(5, 25)
    s = ss.FedCFSettings(xi=3.0, target=target)
    win = server_loss(clients, cpar, sp, ts, s)
    mask_A, mask_B = ss.off_diagonal(np.ones_like(sp.A_hat), np.ones_like(sp.B_hat), [2, 3],
                                      [2, 2])
    gA = fd(lambda: server_loss(clients, cpar, sp, ts, s).L_s, sp.A_hat) * mask_A
    gB = fd(lambda: server_loss(clients, cpar, sp, ts, s).L_s, sp.B_hat) * mask_B
    np.testing.assert_allclose(win.grad_A, gA, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(win.grad_B, gB, rtol=1e-6, atol=1e-8)
    for m, (c, p) in enumerate(zip(clients, cpar, strict=True)):
        gth, gph = ss.server_grad_theta(c, ts, win.g[m], win.g_tilde[m], s.target, s.alg1_literal)
        np.testing.assert_allclose(
            gth, fd(lambda: server_loss(clients, cpar, sp, ts, s).L_s, p.theta), rtol=1e-6,
            atol=1e-8)
        np.testing.assert_allclose(
            gph, fd(lambda: server_loss(clients, cpar, sp, ts, s).L_s, p.phi), rtol=1e-6,
            atol=1e-8)
        lth, lph = ss.local_gradients(c, p, ts)
        np.testing.assert_allclose(lth, fd(lambda c=c, p=p: ss.local_loss(c, p, ts), p.theta),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(lph, fd(lambda c=c, p=p: ss.local_loss(c, p, ts), p.phi),
                                   rtol=1e-6, atol=1e-8)


def test_alg1_literal_drops_g_tilde():
    _, clients = small_clients()
    cpar, sp = random_params(clients, np.random.default_rng(2), 2)
    ts = np.arange(1, 30)
    s = ss.FedCFSettings(xi=2.0)
    win = server_loss(clients, cpar, sp, ts, s)
    c = clients[1]
    full = ss.server_grad_theta(c, ts, win.g[1], win.g_tilde[1], s.target, s.alg1_literal)[0]
    lit = ss.server_grad_theta(c, ts, win.g[1], win.g_tilde[1], s.target, True)[0]
    np.testing.assert_allclose(full - lit, win.g_tilde[1].T @ c.y[ts - 1], atol=1e-12)
    assert np.abs(win.g_tilde[1]).max() > 0


def test_fedgc_gradients_match_finite_differences():
    _, clients = small_clients(U=0)
    rng = np.random.default_rng(3)
    cpar, sp = random_params(clients, rng, 0)
    ts = np.arange(1, 40)
    s = ss.FedGCSettings()

    def loss():
        msgs = [ss.fedgc_states(c, p, ts) for c, p in zip(clients, cpar, strict=True)]
        return ss.fedgc_server_window(loop.clients_A(clients), sp.A_hat, msgs)

    win = loss()
    mask = ss.off_diagonal(np.ones_like(sp.A_hat), np.zeros((5, 0)), [2, 3], [0, 0])[0]
    np.testing.assert_allclose(win.grad_A, fd(lambda: loss().L_s, sp.A_hat) * mask, rtol=1e-6,
                               atol=1e-8)
    for m, (c, p) in enumerate(zip(clients, cpar, strict=True)):
        gth = ss.server_grad_theta(c, ts, win.g[m], win.g_tilde[m], s.target, s.alg1_literal)[0]
        np.testing.assert_allclose(gth, fd(lambda: loss().L_s, p.theta), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("xi", [0.0, 1.0, 10.0])
def test_fedgc_is_fedcf_without_inputs(xi):
    """U = 0, phi = 0: L_s^FedCF = (1 + xi) L_s^FedGC (the paper's FedGC), and so are all the
    gradients."""
    _, clients = small_clients(U=0, seed=4)
    rng = np.random.default_rng(5)
    cpar, sp = random_params(clients, rng, 0)
    cpar = [ss.ClientParams(p.theta, np.zeros_like(p.phi)) for p in cpar]
    ts = np.arange(3, 50)
    s = ss.FedCFSettings(xi=xi)
    full = [ss.client_states(c, p, ts, s.target) for c, p in zip(clients, cpar, strict=True)]
    cf = ss.server_window(loop.clients_A(clients), loop.clients_B(clients), sp, full, xi)
    gc = ss.fedgc_server_window(loop.clients_A(clients), sp.A_hat,
                                [m[1:3] for m in full])
    assert gc.L_s > 0
    assert cf.L_s == pytest.approx((1 + xi) * gc.L_s, rel=1e-12)
    np.testing.assert_allclose(cf.grad_A, (1 + xi) * gc.grad_A, rtol=1e-10, atol=1e-14)
    for m, c in enumerate(clients):
        a = ss.server_grad_theta(c, ts, cf.g[m], cf.g_tilde[m], s.target, s.alg1_literal)[0]
        b = ss.server_grad_theta(c, ts, gc.g[m], gc.g_tilde[m], s.target, s.alg1_literal)[0]
        np.testing.assert_allclose(a, (1 + xi) * b, rtol=1e-10, atol=1e-14)
    # and the loops agree: FedCF with xi = 0 and no inputs is FedGC
    a = loop.reference(clients, ss.FedCFSettings(**SLOW, window=7, epochs=2, xi=0.0,
                                               learn_phi=False, init_std=0.0))
    b = loop.reference(clients, ss.FedGCSettings(**SLOW, window=7, epochs=2, target="predicted",
                                               difference=False))
    np.testing.assert_allclose(a.server.A_hat, b.server.A_hat, atol=1e-12)
    np.testing.assert_allclose(a.clients[1].theta, b.clients[1].theta, atol=1e-12)


def test_fedgc_default_is_fedcf_innovation_differenced_without_inputs():
    """FedGC's default (innovation target, differenced) is FedCF's innovation target with
    xi = 0, no inputs and the same differencing: the same server estimates."""
    _, clients = small_clients(U=0, seed=4)
    a = loop.reference(clients, ss.FedCFSettings(**SLOW, window=7, epochs=2, xi=0.0,
                                               learn_phi=False, init_std=0.0,
                                               target="innovation", difference=True))
    b = loop.reference(clients, ss.FedGCSettings(**SLOW, window=7, epochs=2))
    assert (b.server.A_hat != 0).any()
    np.testing.assert_allclose(a.server.A_hat, b.server.A_hat, atol=1e-12)
    assert all(h["L_s"] == pytest.approx(k["L_s"], rel=1e-10)
               for h, k in zip(a.history, b.history, strict=True))


@pytest.mark.parametrize("target", ["predicted", "innovation"])
def test_differenced_gradients_match_finite_differences(target):
    _, clients = small_clients(U=0)
    rng = np.random.default_rng(6)
    cpar, sp = random_params(clients, rng, 0)
    ts = np.arange(1, 40)
    s = ss.FedGCSettings(target=target, difference=True)

    def loss():
        msgs = [ss.fedgc_states(c, p, ts, target) for c, p in zip(clients, cpar, strict=True)]
        return ss.fedgc_server_window(loop.clients_A(clients), sp.A_hat, msgs, target, True)

    win = loss()
    mask = ss.off_diagonal(np.ones_like(sp.A_hat), np.zeros((5, 0)), [2, 3], [0, 0])[0]
    np.testing.assert_allclose(win.grad_A, fd(lambda: loss().L_s, sp.A_hat) * mask, rtol=1e-6,
                               atol=1e-8)
    for m, (c, p) in enumerate(zip(clients, cpar, strict=True)):
        gth = ss.server_grad_theta(c, ts, win.g[m], win.g_tilde[m], s.target, s.alg1_literal)[0]
        np.testing.assert_allclose(gth, fd(lambda: loss().L_s, p.theta), rtol=1e-6, atol=1e-8)
    assert (target == "innovation") == all(not g.any() for g in win.g_tilde)


def test_fedcf_differenced_gradients_match_finite_differences():
    _, clients = small_clients()
    rng = np.random.default_rng(8)
    cpar, sp = random_params(clients, rng, 2)
    ts = np.arange(1, 40)
    s = ss.FedCFSettings(xi=2.0, difference=True)

    def loss():
        msgs = [ss.client_states(c, p, ts, s.target) for c, p in zip(clients, cpar, strict=True)]
        return ss.server_window(loop.clients_A(clients), loop.clients_B(clients), sp, msgs, s.xi,
                                True)

    win = loss()
    P, U = [2, 3], [2, 2]
    mA, mB = ss.off_diagonal(np.ones_like(sp.A_hat), np.ones_like(sp.B_hat), P, U)
    np.testing.assert_allclose(win.grad_A, fd(lambda: loss().L_s, sp.A_hat) * mA, rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(win.grad_B, fd(lambda: loss().L_s, sp.B_hat) * mB, rtol=1e-6,
                               atol=1e-8)
    for m, (c, p) in enumerate(zip(clients, cpar, strict=True)):
        gth, gph = ss.server_grad_theta(c, ts, win.g[m], win.g_tilde[m], s.target, s.alg1_literal)
        np.testing.assert_allclose(gth, fd(lambda: loss().L_s, p.theta), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gph, 0.0, atol=1e-10)  # a constant phi is differenced out
        np.testing.assert_allclose(fd(lambda: loss().L_s, p.phi), 0.0, atol=1e-8)


def test_differenced_loss_ignores_a_shift_within_the_window():
    """A constant added to one client's target in a window changes the paper's loss and its
    A_hat gradient, not the differenced ones (what removes unknown mean shifts)."""
    _, clients = small_clients(U=0)
    rng = np.random.default_rng(9)
    cpar, sp = random_params(clients, rng, 0)
    ts = np.arange(1, 40)
    A = loop.clients_A(clients)
    msgs = [ss.fedgc_states(c, p, ts, "innovation") for c, p in zip(clients, cpar, strict=True)]
    shifted = [[msgs[0][0] + np.array([2.0, -1.2]), msgs[0][1]], msgs[1]]
    for diff in (False, True):
        a, b = (ss.fedgc_server_window(A, sp.A_hat, m, "innovation", diff) for m in (msgs, shifted))
        if diff:
            assert a.L_s == pytest.approx(b.L_s, rel=1e-12)
            np.testing.assert_allclose(a.grad_A, b.grad_A, atol=1e-12)
        else:
            assert abs(a.L_s - b.L_s) > 1.0 and np.abs(a.grad_A - b.grad_A).max() > 0.05


def test_kalman_filter_is_the_oracle_without_coupling_and_nothing_is_learned():
    rc = merged_config({"seed": 11, "statespace.ss-t": 1500, "statespace.ss-coupling": 0.0},
                       "fedcf")
    sys, clients = all_clients(rc)
    sys = lti.LTISystem(ss.full_estimate(loop.clients_A(clients), 0 * sys.A),
                       np.asarray(__import__("scipy").linalg.block_diag(
                           *loop.clients_B(clients))), sys.C, sys.Q, sys.R, sys.P, sys.U, sys.D)
    _, y, u = lti.simulate(sys, 1500, np.random.default_rng(0),
                          u=lti.inputs(1500, 4, np.random.default_rng(1)))
    clients = lti.split_clients(sys, y, u)
    oracle = lti.oracle_filter(sys, y, u)
    np.testing.assert_allclose(np.hstack([c.hc for c in clients]), oracle, atol=1e-10)
    run = loop.reference(clients, ss.FedCFSettings(**SLOW, window=100, epochs=3, init_std=0.0))
    assert np.abs(run.server.A_hat).max() < 0.05
    assert np.abs(run.server.B_hat).max() < 0.05


def test_gain_is_stable_and_oracle_beats_the_plain_client():
    rc = merged_config({"seed": 5, "statespace.ss-t": 2000})
    sys, clients = all_clients(rc)
    for c in clients:
        assert kalman.spectral_radius(c.A - c.A @ c.K @ c.C) < 1
    ts = np.arange(1, 2000)
    oracle = lti.oracle_filter(sys, np.hstack([c.y for c in clients]))
    c = clients[1]
    plain = ss.prediction_loss(c, c.hc, ts)
    r = c.y[ts] - (oracle[ts - 1] @ sys.A.T)[:, 2:] @ c.C.T
    assert float(np.mean(np.sum(r * r, axis=1))) < plain


def test_windows_cover_every_step_each_epoch():
    w = ss.windows(11, 4, 2)
    assert [len(x) for x in w] == [4, 4, 2] * 2
    np.testing.assert_array_equal(np.concatenate(w[:3]), np.arange(1, 11))
    with pytest.raises(ValueError, match="window"):
        ss.windows(10, 0, 1)


@pytest.mark.parametrize("change,match", [
    (lambda d: d.update(y=np.where(np.arange(d["y"].size).reshape(d["y"].shape) == 7, np.inf,
                                   d["y"])), "non-finite"),
    (lambda d: d.update(y=np.where(np.arange(d["y"].size).reshape(d["y"].shape) == 7, np.nan,
                                   d["y"])), "missing values in y or u: .* needs the noise"),
    (lambda d: d.update(A=1.2 * np.eye(2)), "unstable"),
    (lambda d: d.update(C=np.ones((4, 2))), "full column rank"),
    (lambda d: d.update(u=d["u"][:-1]), "T x U"),
])
def test_bad_client_data_is_named(change, match):
    _, clients = small_clients()
    c = clients[0]
    d = {"A": c.A, "B": c.B, "C": c.C, "K": c.K, "y": c.y.copy(), "u": c.u}
    change(d)
    with pytest.raises(ValueError, match=f"client 3: .*{match}"):
        kalman.checked_client(d["A"], d["B"], d["C"], d["K"], d["y"], d["u"], "client 3")


def test_mismatched_lengths_name_the_client():
    _, clients = small_clients()
    short = kalman.ClientData(clients[1].A, clients[1].B, clients[1].C, clients[1].K,
                          clients[1].y[:-3], clients[1].u[:-3])
    with pytest.raises(ValueError, match="client 1: 57 time steps"):
        loop.reference([clients[0], short], ss.FedGCSettings())


def test_counterfactual_is_c_b_delta():
    rng = np.random.default_rng(0)
    C, B, du = rng.normal(size=(4, 2)), rng.normal(size=(2, 3)), rng.normal(size=3)
    np.testing.assert_allclose(ss.counterfactual(C, B, du), C @ B @ du)
    assert ss.counterfactual_error(C, B, B) == 0
    assert ss.counterfactual_error(C, 0 * B, B) == pytest.approx(1.0)


def test_gaussian_release_clips_and_adds_calibrated_noise():
    from fedcausal_flwr.privacy import GaussianRelease, clip_rows, composed, gaussian_sigma

    rng = np.random.default_rng(0)
    X = rng.normal(0, 10, (20000, 3))
    assert np.linalg.norm(clip_rows(X, 2.0), axis=1).max() <= 2.0 + 1e-12
    small = 0.01 * X[:5]
    np.testing.assert_allclose(clip_rows(small, 2.0), small)
    rel = GaussianRelease(1.5, 2.0)
    assert rel.sigma == pytest.approx(1.5 * 4.0)  # z times the sensitivity 2 clip
    noise = rel(np.zeros((20000, 3)), rng)
    assert noise.std() == pytest.approx(rel.sigma, rel=0.02)
    assert np.linalg.norm(GaussianRelease(np.inf, 2.0)(X, rng), axis=1).max() <= 2.0 + 1e-12
    assert composed([(0.5, 1e-5)] * 4) == pytest.approx((2.0, 4e-5))
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_sigma(1.0, 0.0, 1e-5)


def rdp_by_hand(z: float, k: int, delta: float, orders: np.ndarray) -> float:
    """k Gaussians of multiplier z: RDP k alpha / (2 z^2) at each order (Mironov 2017,
    Prop. 7 and 1), converted by Canonne, Kamath & Steinke (2020, Prop. 12), the conversion
    dp-accounting uses; the best order."""
    rdp = k * orders / (2 * z ** 2)
    eps = rdp + np.log1p(-1 / orders) - (np.log(delta) + np.log(orders)) / (orders - 1)
    return float(eps.min())


def test_rdp_total_of_k_releases_matches_a_hand_composition():
    from fedcausal_flwr.privacy import composed, gaussian_sigma, rdp_epsilon

    orders = np.concatenate([np.linspace(1.01, 8, 700), np.arange(8, 257, 0.05)])
    for z, k in ((1.0, 1), (2.0, 4), (5.0, 40)):
        assert rdp_epsilon(z, k, 1e-5) == pytest.approx(rdp_by_hand(z, k, 1e-5, orders),
                                                        rel=2e-3)
    # k releases of z compose like one of z / sqrt(k)
    assert rdp_epsilon(3.0, 9, 1e-5) == pytest.approx(rdp_epsilon(1.0, 1, 1e-5), rel=1e-9)
    # far below basic composition of the classic bound for the same noise (epsilon 0.5 each)
    z = gaussian_sigma(2.0, 0.5, 1e-6) / 2.0
    assert rdp_epsilon(z, 40, 1e-5) < composed([(0.5, 1e-6)] * 40)[0] / 3
    assert rdp_epsilon(2.0, 0, 1e-5) == 0.0


@pytest.mark.parametrize("epsilon,releases", [(1.0, 2), (8.0, 40), (16.0, 6)])
def test_derived_noise_multiplier_gives_back_the_total_budget(epsilon, releases):
    from fedcausal_flwr.privacy import noise_multiplier_for, rdp_epsilon

    z = noise_multiplier_for(epsilon, 1e-5, releases)
    assert rdp_epsilon(z, releases, 1e-5) <= epsilon
    assert rdp_epsilon(z * 0.999, releases, 1e-5) > epsilon * 0.999  # the smallest such z
    assert noise_multiplier_for(np.inf, 1e-5, releases) == np.inf


def test_dp_release_count_and_noise_from_the_settings():
    s = ss.FedGCSettings(dp=True, window=100, epochs=3, dp_epsilon=2.0, dp_debias=True)
    assert ss.dp_releases(s, 301, 9) == 2 * 3  # innovation: drawn once, repeated per epoch
    assert [ss.dp_release_key(s, k, 301) for k in (1, 3, 4, 9)] == [1, 3, 1, 3]
    p = ss.FedGCSettings(dp=True, window=100, epochs=3, target="predicted")
    assert ss.dp_releases(p, 301, 9) == 2 * 9
    assert ss.dp_releases(ss.FedCFSettings(dp=True, window=100, epochs=3), 301, 9) == 4 * 9
    assert np.isnan(ss.dp_noise_multiplier(ss.FedGCSettings(), 301, 9))
    rep = ss.dp_report(s, 301, 9, ss.dp_noise_multiplier(s, 301, 9))
    assert rep["epsilon"] == pytest.approx(2.0, rel=1e-3)
    assert rep["noise_ridge"] == pytest.approx(-2 * rep["sigma"] ** 2)  # differenced


def test_dp_off_is_unchanged_by_the_dp_settings():
    _, clients = all_clients(merged_config({"seed": 100, "statespace.ss-t": 500}, "fedgc"))
    a = loop.reference(clients, ss.FedGCSettings(epochs=2))
    b = loop.reference(clients, ss.FedGCSettings(epochs=2, dp_epsilon=1.0, dp_clip_msg=0.01))
    np.testing.assert_array_equal(a.server.A_hat, b.server.A_hat)
    assert a.dp is None


def test_plant_csv_loader_groups_filters_and_identifies(tmp_path, shared_data):
    from fedcausal_flwr.statespace.data import central_var, load_plant_csv, svd_var_client

    schema = shared_data("hai/hai-22.04_columns.txt")
    names = schema.read_text().split()
    assert names[0] == "timestamp" and names[-1] == "Attack"
    tags = names[1:-1]
    rng = np.random.default_rng(0)
    T = 300
    cols = {}
    for j, tag in enumerate(tags):
        if j % 7 == 3:
            cols[tag] = np.full(T, 2.5)  # constant
        elif j % 7 == 5:
            cols[tag] = (rng.random(T) < 0.3).astype(float)  # binary
        else:
            cols[tag] = np.cumsum(rng.normal(size=T)) * 0.1 + j
    attack = np.zeros(T, dtype=int)
    attack[100:120] = 1
    lines = [",".join(names)]
    for t in range(T):
        lines.append(",".join([f"2022-01-01 00:{t // 60:02d}:{t % 60:02d}"]
                              + [f"{cols[g][t]:.6f}" for g in tags] + [str(attack[t])]))
    path = tmp_path / "hai.csv"
    path.write_text("\n".join(lines))
    groups = load_plant_csv(path)
    assert list(groups) == ["P1", "P2", "P3", "P4"]
    kept = [n for g in groups.values() for n in g[0]]
    assert all(tags.index(n) % 7 not in (3, 5) for n in kept)
    assert len(kept) == sum(1 for j in range(len(tags)) if j % 7 not in (3, 5))
    for _, Y in groups.values():
        assert Y.shape[0] == T - 20  # attack rows dropped
        np.testing.assert_allclose(Y.mean(0), 0, atol=1e-9)
        np.testing.assert_allclose(Y.std(0), 1, atol=1e-9)
    states = []
    for g, (_, Y) in groups.items():
        c, H = svd_var_client(Y, 2, g)
        assert kalman.spectral_radius(c.A) < 1 and c.C.shape == (Y.shape[1], 2)
        np.testing.assert_allclose(np.mean(H ** 2, axis=0), 1, atol=1e-9)
        states.append(H)
    assert central_var(states).shape == (8, 8)
    with pytest.raises(ValueError, match="P4: .* fewer than P"):
        svd_var_client(groups["P4"][1], 50, "P4")


def test_the_step_bound_is_a_running_maximum():
    """A quiet window after a large one keeps the large window's curvature bound."""
    _, clients = small_clients(T=80)
    c, s = clients[1], ss.FedGCSettings()
    par = ss.initial_client(c)
    g = np.zeros((20, c.dims[0]))
    step = {k: getattr(s, k) for k in ("lr_client", "eta1", "eta2", "lambda_l", "xi",
                                       "learn_phi", "target", "alg1_literal", "difference")}
    big = ss.client_step(c, ss.ClientParams(par.theta, par.phi), np.arange(1, 21), g, g, **step)
    quiet = kalman.ClientData(c.A, c.B, c.C, c.K, 1e-3 * c.y, c.u)
    after = ss.client_step(quiet, big, np.arange(21, 41), g, g, **step)
    alone = ss.client_step(quiet, par, np.arange(21, 41), g, g, **step)
    assert after.curv == big.curv > alone.curv > 0


@pytest.mark.integration
def test_innovation_target_recovers_b_where_the_literal_server_cannot():
    """Spec A5: i.i.d. inputs, the literal server learns B_hat_21 ~ 0; C^+ y^t is unbiased."""
    rc = merged_config({"seed": 21, "statespace.ss-t": 2000}, "fedcf")
    sys, clients = all_clients(rc)
    B21, C22 = ss.block(sys.B, sys.P, sys.U, 1, 0), clients[1].C
    err = {}
    for target in ("predicted", "innovation"):
        s = ss.FedCFSettings(window=1999, epochs=60, lr_server=0.9, lr_client=0.9, xi=10.0,
                             learn_phi=True, target=target, init_std=0.0)
        B = loop.reference(clients, s).server.B_hat
        err[target] = ss.counterfactual_error(C22, ss.block(B, sys.P, sys.U, 1, 0), B21)
    assert err["predicted"] > 0.9
    assert err["innovation"] < 0.2


def test_fedgc_shifts_are_client_0s_known_input():
    rc = merged_config({"seed": 2, "statespace.ss-t": 300, "statespace.ss-shift-known": True})
    sys, clients = all_clients(rc)
    from fedcausal_flwr.statespace.data import shift_series

    b = shift_series(rc, sys)
    assert np.abs(b).max() > 0 and np.abs(b[:, 2:]).max() == 0
    np.testing.assert_array_equal(clients[0].u[:-1] @ clients[0].B.T, b[1:, :2])
    assert clients[1].u.shape[1] == 0
    _, unknown = all_clients(merged_config({"seed": 2, "statespace.ss-t": 300}))  # the default: the
    assert unknown[0].u.shape[1] == 0  # paper's setting, no filter models the shifts
    _, cf = all_clients(merged_config({"seed": 2, "statespace.ss-t": 300,
                                       "statespace.ss-shift-scale": 1.0}, "fedcf"))
    assert cf[0].u.shape[1] == cf[1].u.shape[1] == 2


def test_settings_share_the_client_part_and_check_values():
    s = ss.FedCFSettings(xi=2.0, target="refined", dp=True, seed=4)
    back = ss.FedCFSettings.from_wire(s.to_wire())
    assert all(getattr(back, f) == getattr(s, f) for f in ss.FedCFSettings.wire_fields())
    assert all(isinstance(v, (int, float, str, bool)) for v in s.to_wire().values())
    with pytest.raises(ValueError, match="lacks"):
        ss.FedGCSettings.from_wire({"xi": 0.0})
    # FedGC's fixed values have no run-config key; FedCF's are keyed
    assert {"ss-xi", "ss-target", "ss-init-std"}.isdisjoint(ss.FedGCSettings.keys())
    assert {"ss-xi", "ss-target", "ss-init-std"} <= set(ss.FedCFSettings.keys())
    with pytest.raises(ValueError, match="'statespace.ss-cf-delta' = '1,x'"):
        ss.FedCFSettings.from_run_config({"statespace.ss-cf-delta": "1,x"})
    with pytest.raises(ValueError, match="'statespace.ss-target' = 'best'"):
        ss.FedCFSettings.from_run_config({"statespace.ss-target": "best"})
    np.testing.assert_array_equal(ss.FedCFSettings(cf_delta=" 1, -0.5").delta_u(), [1, -0.5])


def test_reference_stops_after_num_rounds():
    _, clients = small_clients(U=0)
    s = ss.FedGCSettings(window=10, epochs=2)
    full, cut = loop.reference(clients, s), loop.reference(clients, s, num_rounds=4)
    assert len(full.history) == 12 and len(cut.history) == 4
    assert cut.history == full.history[:4]


@pytest.mark.integration
def test_fedgc_default_learns_with_shifts_no_filter_models():
    """Issue 13: the paper's setting (mean shifts on client 0 that no Kalman filter models).
    The default (innovation target, differenced loss) recovers A_21 and keeps A_12 ~ 0; the
    paper's levels loss explains client 0's shift by client 1's states (||A_12|| ~ 2 here)."""
    rc = merged_config({"seed": 111, "statespace.ss-t": 4000, "statespace.ss-shift-known": False})
    sys, clients = all_clients(rc)
    assert all(c.u.shape[1] == 0 for c in clients)  # nobody knows the shifts

    def errors(s):
        A = loop.reference(clients, s).server.A_hat
        return (ss.block_error(A, sys.A, sys.P, sys.P, 1, 0),
                ss.block_error(A, 0 * A, sys.P, sys.P, 0, 1))

    default = ss.FedGCSettings.from_run_config(rc)
    err21, norm12 = errors(default)
    assert err21 < 0.12 and norm12 < 0.1
    paper = errors(replace(default, target="predicted", difference=False))
    assert paper[1] > 0.5


@pytest.mark.parametrize("cls", [ss.FedGCSettings, ss.FedCFSettings])
def test_the_default_schedule_is_one_window_per_epoch_and_the_old_one_stays(cls):
    """Issue 12: at the default T a default run is epochs + 2 exchanges (one window per
    epoch); the schedule before (W = 1000, 30 epochs, 0.3 / 1.5) stays reachable, by the
    run config too, and changes nothing else."""
    T = merged_config({}, "fedcf" if cls is ss.FedCFSettings else "fedgc")["ss-t"]
    s, p = cls(), cls.paper_schedule()
    assert len(ss.windows(T, s.window, s.epochs)) == s.epochs <= 38
    assert len(ss.windows(T, p.window, p.epochs)) == 300
    assert (p.window, p.epochs, p.lr_server, p.lr_client) == (1000, 30, 0.3, 1.5)
    assert replace(p, window=s.window, epochs=s.epochs, lr_server=s.lr_server,
                   lr_client=s.lr_client) == s
    rc = {"statespace.ss-window": 1000, "statespace.ss-epochs": 30,
          "statespace.ss-lr-server": 0.3, "statespace.ss-lr-client": 1.5}
    assert cls.from_run_config(rc) == p
    assert cls.paper_schedule(seed=3) == replace(p, seed=3)
