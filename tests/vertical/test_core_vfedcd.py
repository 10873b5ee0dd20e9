"""VFedCD core: spectral penalty, graph extraction, DAG output, schedule, fixed point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr.vertical import decoder, loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import blocks, random_dag, simulate_anm, split_standardised
from tests.helpers.sims import script


def small_data(d: int = 4, n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = random_dag(d, d, rng)
    X, _ = split_standardised(simulate_anm(A, n, rng), 0.0)
    return A, [X[:, S] for S in blocks(d, 2)]


def test_spectral_radius_and_its_gradient():
    rng = np.random.default_rng(0)
    B = rng.uniform(0, 1, (5, 5))
    u = v = np.ones(5) / np.sqrt(5)
    rho, grad, _, _ = V.spectral_radius(B, u, v, 200)
    assert np.isclose(rho, np.abs(np.linalg.eigvals(B + 1e-6)).max(), rtol=1e-8)
    E = rng.standard_normal((5, 5))
    eps = 1e-6
    fd = (np.abs(np.linalg.eigvals(B + 1e-6 + eps * E)).max()
          - np.abs(np.linalg.eigvals(B + 1e-6 - eps * E)).max()) / (2 * eps)
    assert np.isclose(np.sum(grad * E), fd, rtol=1e-5)


def test_dag_at_threshold_keeps_strongest_acyclic_edges():
    B = np.array([[0, 0.9, 0.0], [0.0, 0, 0.8], [0.5, 0.05, 0]])
    G = V.dag_at_threshold(B, 0.1)
    assert V.is_dag(G)
    assert G.tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]  # 2 -> 0 would close a cycle
    assert not V.is_dag(B > 0.1)


def test_graph_fragment_is_norm_of_each_encoder_row_block():
    rng = np.random.default_rng(1)
    held = [rng.standard_normal((2, 3, 4)), None, rng.standard_normal((1, 3, 4))]
    B = V.graph_fragment(held, 0, [0, 2, 4, 5])
    assert B.shape == (5, 3)
    np.testing.assert_allclose(B[:2], np.linalg.norm(held[0], axis=2))
    assert np.all(B[2:4] == 0)
    np.testing.assert_allclose(B[4:], np.linalg.norm(held[2], axis=2))


def test_norm_backward_matches_finite_differences():
    rng = np.random.default_rng(2)
    w, g = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3))
    E, eps = rng.standard_normal(w.shape), 1e-6
    f = lambda a: np.sum(g * np.linalg.norm(a, axis=2))  # noqa: E731
    fd = (f(w + eps * E) - f(w - eps * E)) / (2 * eps)
    assert np.isclose(np.sum(V.norm_backward(w, g) * E), fd, rtol=1e-6)


@pytest.mark.parametrize("loss", ["mse", "nll"])
def test_decoder_gradients_match_finite_differences(loss):
    s = V.VFedCDSettings.paper(hidden=3, loss=loss)
    rng = np.random.default_rng(3)
    p = decoder.init_decoder(0, 2, s.hidden, s.dec_layers, s.loss, s.seed)
    Z, x = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 2))
    assert len(p) == (6 if loss == "nll" else 5)  # the NLL's log-variances come last
    p[-1] = p[-1] + rng.standard_normal(2)
    grads, dZ, value = decoder.decoder_grads(p, Z, x)
    assert np.isclose(value, decoder.reconstruction_loss(p, Z, x))
    eps = 1e-6

    def shifted(i: int, step: np.ndarray) -> list[np.ndarray]:
        return [a + step if j == i else a for j, a in enumerate(p)]

    for i in range(len(p)):
        E = rng.standard_normal(p[i].shape)
        fd = (decoder.reconstruction_loss(shifted(i, eps * E), Z, x)
              - decoder.reconstruction_loss(shifted(i, -eps * E), Z, x)) / (2 * eps)
        assert np.isclose(np.sum(grads[i] * E), fd, rtol=1e-5), i
    E = rng.standard_normal(Z.shape)
    fd = (decoder.reconstruction_loss(p, Z + eps * E, x)
          - decoder.reconstruction_loss(p, Z - eps * E, x))
    assert np.isclose(np.sum(dZ * E), fd / (2 * eps), rtol=1e-5)


def test_fixed_point_features_match_float():
    rng = np.random.default_rng(4)
    x, W = rng.standard_normal((8, 3)), rng.uniform(-0.1, 0.1, (3, 2, 10))
    Zq = V.features_q(V.quantize(x, 16), V.quantize(W, 16))
    np.testing.assert_allclose(V.dequantize(Zq, 32), np.einsum("na,ath->nth", x, W), atol=1e-4)


@pytest.mark.parametrize("mode", ["framework", "ctv", "vfedcd"])
def test_training_keeps_self_loops_zero_and_lowers_the_loss(mode):
    _, xs = small_data()
    s = V.VFedCDSettings.paper(mode=mode, batch=16, lr=0.05, gamma=0.05)
    state = loop.train_reference(xs, s, epochs=8)
    sizes = [x.shape[1] for x in xs]
    for t in range(2):
        W = V.encoder(state.F, t, t)
        assert np.all(W[np.arange(sizes[t]), np.arange(sizes[t])] == 0)
    assert state.history[-1]["loss"] < state.history[0]["loss"]
    n_frag = sum(f is not None for Fi in state.F for Fk in Fi for f in Fk)
    assert n_frag == (8 if mode == "vfedcd" else 4)
    if mode == "framework":
        assert all(h["lambda2"] == 0 for h in state.history)


def schedule(s: V.VFedCDSettings) -> dict:
    """The numbers of the lambda2 schedule."""
    return {"ctv": s.ctv, "unfreeze": s.unfreeze, "tau": s.tau, "dag_tol": s.dag_tol,
            "gamma": s.gamma}


def test_lambda2_grows_until_acyclic_then_freezes():
    s = V.VFedCDSettings.paper(gamma=0.5)
    cyc = np.array([[0, 1.0], [1.0, 0]])
    lam, frozen = V.next_lambda2(0.0, False, cyc, **schedule(s))
    assert (lam, frozen) == (0.5, False)
    lam, frozen = V.next_lambda2(lam, frozen, np.triu(cyc), **schedule(s))
    assert (lam, frozen) == (0.5, True)
    assert V.next_lambda2(lam, frozen, cyc, **schedule(s)) == (0.5, True)


def test_unfreeze_lets_lambda2_grow_again_once_the_graph_above_tau_is_cyclic():
    s = V.VFedCDSettings.paper(gamma=0.5, unfreeze=True)
    cyc = np.array([[0, 1.0], [1.0, 0]])
    weak = np.array([[0, 1.0], [0.05, 0]])  # cyclic above dag_tol, a DAG above tau
    assert V.next_lambda2(0.5, True, weak, **schedule(s)) == (0.5, True)
    assert V.next_lambda2(0.5, True, cyc, **schedule(s)) == (1.0, False)
    assert V.next_lambda2(1.0, False, np.triu(cyc), **schedule(s)) == (1.0, True)


def test_l2_shrinks_fragments_and_decoders_by_two_lr_l2():
    s = V.VFedCDSettings.paper(l2=0.5, lambda1=0.0, lr=0.1)
    w = np.random.default_rng(7).standard_normal((2, 2, 3))
    step = {"lambda1": s.lambda1, **s.optimizer_args()}
    np.testing.assert_allclose(V.descent(w, np.zeros_like(w), **step), 0.9 * w)
    np.testing.assert_allclose(V.update_fragment(w, np.zeros_like(w), 0, 0, **step)[1, 1], 0)
    assert all(np.allclose(a, 0.9 * b) for a, b in zip(V.decayed([w, w[0]], s.lr, s.l2),
                                                         [w, w[0]], strict=True))
    assert V.decayed([w], 0.1, 0.0)[0] is w


def test_stacked_fragments_round_trip_and_exact_integer_products():
    s = V.VFedCDSettings.paper(mode="ctv")
    F = V.init_fragments([2, 3], s.hidden, s.secure, s.seed)
    Fs = V.stacked(F, [2, 3], s.hidden)
    assert Fs.shape == (2, 5, 5, 10) and np.all(Fs[0, 2:] == 0)  # party 0 holds rows 0-1
    back = V.unstacked(Fs, [2, 3], s.secure)
    assert back[0][1][0] is None and np.array_equal(back[1][1][0], F[1][1][0])
    big = np.array([[2.0 ** 40, 1.0, -(2.0 ** 40)]])  # float BLAS would give 0
    assert V.exact_matmul(big, np.array([[2.0 ** 20], [1.0], [2.0 ** 20]]))[0, 0] == 1.0


def test_ctv_penalty_drives_the_graph_acyclic():
    _, xs = small_data(d=4, n=64, seed=5)
    s = V.VFedCDSettings.paper(mode="ctv", batch=16, lr=0.05, gamma=0.05)
    state = loop.train_reference(xs, s, epochs=30)
    assert state.frozen and V.is_dag(V.graph(state.F, [2, 2]) > s.dag_tol)
    B, G = V.result_graph(state.F, [2, 2], s.tau)
    assert V.is_dag(G) and G.shape == B.shape


def test_dirichlet_shares_average_to_the_gradient():
    s = V.VFedCDSettings.paper()
    G = np.random.default_rng(6).standard_normal((4, 4))
    sh = V.split_gradient(G, 3, np.random.default_rng(0), s.split, s.secure)
    np.testing.assert_allclose(sum(sh) / 3, G)  # each share is unbiased for G
    assert not np.allclose(sh[0], G)
    exact = V.VFedCDSettings.paper(split="exact")
    assert all(np.array_equal(a, G)
               for a in V.split_gradient(G, 3, np.random.default_rng(0), exact.split,
                                         exact.secure))


def test_vertical_data_blocks_and_checks():
    from fedcausal_flwr.vertical.data import checked_party

    assert [b.tolist() for b in blocks(5, 2)] == [[0, 1, 2], [3, 4]]
    assert [len(b) for b in blocks(15, [1, 1, 13])] == [1, 1, 13]
    with pytest.raises(ValueError, match="sum to d"):
        blocks(6, [3, 4])
    A2 = random_dag(8, 12, np.random.default_rng(0))
    assert A2.sum() == 12 and V.is_dag(A2)
    bad = np.ones((4, 2))
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="party 3: 1 non-finite"):
        checked_party(bad, "party 3")


def test_sachs_file(shared_data):
    from fedcausal_flwr.vertical.data import sachs

    X, A, names = sachs(shared_data("sachs"))  # the path beside the checkout, not the default
    assert X.shape == (853, 11) and A.sum() == 18 and len(names) == 11  # the file: 18 edges


def test_settings_defaults_paper_preset_and_bounds():
    s, p, slow = V.VFedCDSettings(), V.VFedCDSettings.paper(), V.VFedCDSettings.slow()
    fields = ("epochs", "batch", "lr", "optimizer", "lambda1", "gamma", "tau", "l2", "loss",
              "he_backend")
    assert tuple(getattr(s, f) for f in fields) == (30, 200, 0.1, "adam", 1e-3, 0.01, 0.7, 0.0,
                                                    "nll", "paillier-packed")
    assert s.adam_eps == 0.003
    assert tuple(getattr(p, f) for f in fields) == (500, 16, 0.01, "sgd", 5e-3, 0.006, 0.1,
                                                    0.0, "mse", "paillier-packed")
    assert tuple(getattr(slow, f) for f in fields) == (700, 16, 0.01, "sgd", 5e-4, 5e-4, 0.6,
                                                       5e-3, "nll", "paillier-packed")
    assert V.VFedCDSettings.paper(seed=3).seed == 3 and p.he_backend == s.he_backend
    for key, bad, words in [("mode", "secure", "'vfedcd'"), ("loss", "mae", "'nll'"),
                            ("split", "even", "'exact'"), ("he-backend", "rsa", "'mock'"),
                            ("num-epochs", 0, ">= 1"), ("lr", 0.0, "> 0"),
                            ("key-bits", 64, ">= 256"), ("lambda1", -1.0, ">= 0")]:
        with pytest.raises(ValueError, match=f"'vertical.{key}' = .*{words}"):
            V.VFedCDSettings.from_run_config({key: bad})


def test_parties_take_every_shared_setting_from_the_server():
    s = V.VFedCDSettings(he_backend="mock", batch=8, loss="mse", seed=5)
    sent = s.to_wire()
    assert set(sent) == set(V.VFedCDSettings.wire_fields()) and "epochs" not in sent
    party = V.VFedCDSettings.from_wire({**sent, "sizes": "2,2", "index": 0})
    assert party.to_wire() == sent
    with pytest.raises(ValueError, match=r"lacks the VFedCDSettings wire settings \['lr'\]"):
        V.VFedCDSettings.from_wire({k: v for k, v in sent.items() if k != "lr"})


def test_training_resumed_from_its_state_equals_one_run():
    # simulations/studies/vfedcd_sachs_settings.py reads the 200- and 400-epoch graphs off a
    # 700-epoch run: resuming must give exactly what a run of the total length gives.
    _, xs = small_data(d=4, n=48, seed=2)
    s = V.VFedCDSettings(he_backend="mock", gamma=0.05, batch=16, seed=1)
    whole = loop.train_reference(xs, s, epochs=4)
    part = loop.train_reference(xs, s, epochs=1)
    part = loop.train_reference(xs, s, epochs=3, state=part)
    assert np.array_equal(V.graph(whole.F, [2, 2]), V.graph(part.F, [2, 2]))
    assert (whole.lam2, whole.frozen, whole.step) == (part.lam2, part.frozen, part.step)


def test_delayed_features_change_only_later_steps_and_resume_exactly():
    # simulations/studies/vfedcd_pipeline.py: a pipelined schedule's step j reads the
    # fragments before step j - delay; the first step has no older ones (same as no delay).
    _, xs = small_data(d=4, n=48, seed=2)
    s = V.VFedCDSettings(he_backend="mock", gamma=0.05, batch=48, seed=1)  # 1 step per epoch
    one = [loop.train_reference(xs, s, epochs=1, delay=k) for k in (0, 2)]
    assert np.array_equal(V.graph(one[0].F, [2, 2]), V.graph(one[1].F, [2, 2]))
    whole = [loop.train_reference(xs, s, epochs=5, delay=k) for k in (0, 2)]
    assert not np.array_equal(V.graph(whole[0].F, [2, 2]), V.graph(whole[1].F, [2, 2]))
    part = loop.train_reference(xs, s, epochs=2, delay=2)
    part = loop.train_reference(xs, s, epochs=3, state=part, delay=2)
    assert np.array_equal(V.graph(whole[1].F, [2, 2]), V.graph(part.F, [2, 2]))



SIMULATIONS = Path(__file__).parents[2] / "simulations"


@pytest.mark.integration
def test_sachs_study_chose_by_its_criterion_from_its_runs():
    # The committed summary must be what the fixed criterion gives on the committed runs
    # (highest mean F1 over dev seeds 100-109, ties by SHD; only fully confirmed configs).
    import json

    study = script("vfedcd_sachs_settings")
    from harness import read_jsonl

    summary = json.loads((SIMULATIONS / "results" / "vfedcd_sachs_settings.json").read_text())
    rows = read_jsonl(study.RUNS)
    assert {r["seed"] for r in rows if r["stage"] == "eval"}.isdisjoint(study.DEV_SEEDS)
    best = study.chosen_config(rows)
    assert {k: best[k] for k in ("config", "epochs", "tau", "seeds")} == \
        {k: summary["chosen"][k] for k in ("config", "epochs", "tau", "seeds")}
    assert best["seeds"] == study.DEV_SEEDS and best["nnz"][0] > 0
    assert sum(r["stage"] == "sachs" and r["config"] == best["config"] for r in rows) == 1


def test_deployment_frontier_counts_packed_blocks_and_keeps_only_gains():
    # The 30-minute study (issue 23) projects each cell's deployment: its crypto scales with
    # the packed ciphertexts per row, which must be the backend's own count (2048-bit keys).
    import json

    from fedcausal_flwr.secure import paillier

    study = script("vfedcd_fast_schedule")
    pk = paillier.PublicKey(2 ** 2047 + 1)
    for h in (1, 3, 4, 7, 8, 10, 11, 12):
        assert study.packed_blocks(h) == paillier.blocks(pk, 5 * h)
    assert study.deployed_s(30, 4, 10) == study.START_S + 30 * (4 * 5 * study.EXCHANGE_S
                                                                + study.CRYPTO_EPOCH_S)
    assert study.deployed_s(30, 4, 3) < study.deployed_s(30, 4, 7) < study.deployed_s(30, 4, 10)
    cells = [{"deploy_min": m, "f1": (f, 0.0)} for m, f in
             ((30, 0.6), (10, 0.5), (20, 0.503), (40, 0.62), (50, 0.61))]
    assert [c["deploy_min"] for c in study.frontier(cells)] == [10, 30, 40]
    front = json.loads((SIMULATIONS / "results" / "vfedcd_deploy30.json").read_text())["frontier"]
    assert front == sorted(front, key=lambda c: c["deploy_min"])
    assert all(b["f1"][0] > a["f1"][0] for a, b in zip(front[:-1], front[1:], strict=True))


def test_yeo_johnson_is_fitted_once_per_party_not_per_message(monkeypatch):
    """A party builds its client for every message; the transform's exponents are fitted once
    for the same rows (the fit was 80% of a profiled run) and are the same numbers."""
    from scipy import stats

    from fedcausal_flwr.vertical import data as vdata

    rng = np.random.default_rng(8)
    tr = np.exp(rng.normal(size=(60, 3)))  # skewed columns
    fresh = vdata.fitted_scaler(tr, "yeo-johnson")(tr)
    calls = []
    fit = stats.yeojohnson

    def counted(x, lmbda=None):
        calls.append(lmbda is None)
        return fit(x, lmbda)

    monkeypatch.setattr(stats, "yeojohnson", counted)
    again = vdata.fitted_scaler(tr, "yeo-johnson")(tr)
    assert not any(calls)  # no exponent fitted again, only applied
    np.testing.assert_array_equal(again, fresh)
    other = tr.copy()
    other[0, 0] += 1.0
    vdata.fitted_scaler(other, "yeo-johnson")
    assert sum(calls) == 3  # new rows: one fit per column
