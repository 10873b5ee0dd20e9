"""FedGC/FedCF standard errors and the per-entry "no Granger effect" test.

The sandwich equals a direct HAC computation, its scores are the server loss's gradient, the
p-values are near uniform where the true block is zero (fixed seeds) and tiny where it is not,
and the strategy's result carries them, equal to the reference loop, into the graph view.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.statespace import app as app_ss
from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import all_clients, merged_config
from fedcausal_flwr.testing import InProcessGrid


def direct_hac(X: np.ndarray, e: np.ndarray, L: int) -> np.ndarray:
    """OLS HAC standard errors by hand: loops over lags and rows, Bartlett weights."""
    n, k = X.shape
    omega = np.zeros((k, k))
    for lag in range(L + 1):
        w = 1.0 if lag == 0 else 1.0 - lag / (L + 1.0)
        for t in range(lag, n):
            a, b = X[t] * e[t], X[t - lag] * e[t - lag]
            omega += w * (np.outer(a, b) if lag == 0 else np.outer(a, b) + np.outer(b, a))
    Hinv = np.linalg.inv(X.T @ X)
    return np.sqrt(np.diag(Hinv @ omega @ Hinv))


@pytest.mark.parametrize("lags", [0, 3])
def test_fedgc_se_is_the_direct_hac_computation(lags):
    rng = np.random.default_rng(0)
    P, n = [2, 3], 40
    A_diag = [0.5 * np.eye(p) for p in P]
    msgs = [[rng.normal(size=(n, p)), rng.normal(size=(n, p))] for p in P]
    A_hat = ss.off_diagonal(rng.normal(0, 0.2, (5, 5)), np.zeros((5, 0)), P, [0, 0])[0]
    win = ss.fedgc_server_window(A_diag, A_hat, msgs, "innovation", difference=False)
    test = ss.granger_test(ss.granger_window(win.terms, lags), A_hat, np.zeros((5, 0)), P,
                           [0, 0])
    HC = np.hstack([m[1] for m in msgs])
    D = np.hstack([z - hc @ A_diag[m].T - (HC @ A_hat.T)[:, sum(P[:m]):sum(P[:m + 1])]
                   for m, (z, hc) in enumerate(msgs)])
    for i, cols in [(0, [2, 3, 4]), (1, [2, 3, 4]), (2, [0, 1]), (4, [0, 1])]:
        np.testing.assert_allclose(test.se_A[i, cols], direct_hac(HC[:, cols], D[:, i], lags),
                                   rtol=1e-10)
    assert (test.se_A[0, :2] == 0).all() and (test.pvalue_A[2:, 2:] == 1).all()  # known
    z = A_hat[2, 0] / test.se_A[2, 0]
    from scipy.stats import t

    assert test.pvalue_A[2, 0] == pytest.approx(2 * t.sf(abs(z), n - 2), rel=1e-10)


@pytest.mark.parametrize("difference", [False, True])
def test_fedcf_scores_are_the_loss_gradient(difference):
    """Summed over the window, the scores are half the server's own gradient of A_hat, B_hat
    (so the sandwich differentiates the loss the server descends, penalty included)."""
    rng = np.random.default_rng(1)
    P, U, n = [2, 3], [2, 1], 30
    msgs = [[rng.normal(size=(n, p)) for _ in range(3)] + [rng.normal(size=(n, u))]
            for p, u in zip(P, U, strict=True)]
    sp = ss.initial_server(P, U, 0.3, rng)
    win = ss.server_window([0.5 * np.eye(p) for p in P], [np.ones((p, u)) for p, u in
                                                          zip(P, U, strict=True)],
                           sp, msgs, xi=3.0, difference=difference)
    S = ss.scores(win.terms).sum(axis=0)
    m = n - 1 if difference else n
    gA, gB = ss.off_diagonal(S[:, :5], S[:, 5:], P, U)
    np.testing.assert_allclose(gA, win.grad_A * m / 2, atol=1e-10)
    np.testing.assert_allclose(gB, win.grad_B * m / 2, atol=1e-10)
    H = ss.granger_window(win.terms).hessian
    X = np.hstack([np.hstack([mm[2] for mm in msgs]), np.hstack([mm[3] for mm in msgs])])
    X = np.diff(X, axis=0) if difference else X
    np.testing.assert_allclose(H[:5, :5], 4.0 * X[:, :5].T @ X[:, :5], atol=1e-10)  # 1 + xi
    np.testing.assert_allclose(H[5:, :], X[:, 5:].T @ X, atol=1e-10)


def fedgc_run(seed: int, coupling: float):
    rc = merged_config({"seed": seed, "ss-t": 2000, "ss-coupling": coupling}, "fedgc")
    sys, clients = all_clients(rc)
    return sys, loop.reference(clients, ss.FedGCSettings.from_run_config(rc))


@pytest.mark.integration
def test_null_pvalues_are_near_uniform_and_alternatives_are_found():
    """App defaults at T = 2000, A_12 = A_21 = 0, fixed seeds 100-109 (80 null entries)."""
    learned = ss.off_diagonal(np.ones((4, 4)), np.zeros((4, 0)), [2, 2], [0, 0])[0] > 0
    p = np.concatenate([fedgc_run(seed, 0.0)[1].granger.pvalue_A[learned]
                        for seed in range(100, 110)])
    assert p.size == 80
    assert np.mean(p < 0.05) <= 0.125  # nominal 0.05; binomial sd 0.024
    assert np.mean(p < 0.5) == pytest.approx(0.5, abs=0.15)
    assert 0.35 < np.mean(p) < 0.65
    sys, run = fedgc_run(100, 0.25)  # A_21 = 0.25 * ones: every entry found
    assert (run.granger.pvalue_A[2:, :2] < 1e-6).all()


RC = {"algorithm": "fedgc", "seed": 3, "statespace.ss-t": 120, "statespace.ss-window": 40,
      "statespace.ss-epochs": 2, "min-nodes": 2, "node-wait-s": 5.0}


@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_the_result_carries_se_and_pvalues_and_the_view_uses_them(algorithm):
    rc = {**RC, "algorithm": algorithm}
    result = app_ss.strategy(algorithm, rc).start(grid=InProcessGrid(client_app, 2, rc))
    sys, clients = all_clients(merged_config(rc, algorithm))
    ref = loop.reference(clients, app_ss.settings(algorithm, rc))
    est, names = result.estimates, result.names
    blocks = [("A", sum(sys.P))] + ([("B", sum(sys.U))] if algorithm == "fedcf" else [])
    for X, cols in blocks:
        for kind in ("se", "pvalue"):
            a = np.asarray(est[f"{X}_offdiag_{kind}"], dtype=float)
            assert a.shape == (sum(sys.P), cols)
            np.testing.assert_allclose(a, getattr(ref.granger, f"{kind}_{X}"), rtol=1e-8)
            assert names[f"{X}_offdiag_{kind}"] == names[f"{X}_hat"]
    p = np.asarray(est["A_offdiag_pvalue"], dtype=float)
    assert (p[:2, :2] == 1).all() and (p[2:, :2] < 1).all()
    strict = RunResult(**{**result.__dict__, "config": {"granger_alpha": 0.05}})
    off = RunResult(**{**result.__dict__, "config": {"granger_alpha": 0.0}})
    kept = {(s, t) for s, t, _, _ in strict.edges() if "u" not in s}
    if algorithm == "fedgc":  # a test: the view keeps the entries with p < alpha
        assert kept == {(names["A_hat"][j], names["A_hat"][i])
                        for i, j in zip(*np.nonzero(p < 0.05), strict=True)}
    else:  # FedCF's A_hat p-values are not a test: they do not mask its graph
        assert kept == {(s, t) for s, t, _, _ in off.edges() if "u" not in s}
    assert len([e for e in off.edges() if "u" not in e[0]]) == 8  # every off-diagonal entry
    if algorithm == "fedcf":  # B_hat's p-values are a test (innovation target): they mask
        pB = np.asarray(est["B_offdiag_pvalue"], dtype=float)
        kept_b = {(s, t) for s, t, _, _ in strict.edges() if "u" in s}
        assert kept_b == {(names["B_hat"]["cols"][j], names["B_hat"]["rows"][i])
                          for i, j in zip(*np.nonzero(pB < 0.05), strict=True)}


def test_fedcf_graph_is_not_filtered_by_its_a_hat_pvalues():
    """FedCF's A_hat p-values reject 94-97% of true zeros (docs/algorithms/fedcf.md): an
    A_hat p-value of 0 or 1 must not decide whether an entry is an edge."""
    rc = {**RC, "algorithm": "fedcf"}
    result = app_ss.strategy("fedcf", rc).start(grid=InProcessGrid(client_app, 2, rc))
    est = dict(result.estimates)
    A = np.asarray(est["A_hat"], dtype=float)
    ones, zeros = np.ones_like(A), np.zeros_like(A)
    a_edges = []
    for p in (ones, zeros):
        r = RunResult(**{**result.__dict__, "estimates": {**est, "A_offdiag_pvalue": p},
                         "config": {"granger_alpha": 0.05}})
        a_edges.append({(s, t) for s, t, _, _ in r.edges() if "u" not in s})
    assert a_edges[0] == a_edges[1] and len(a_edges[0]) == 8
    gc = RunResult(**{**result.__dict__, "algorithm": "fedgc",
                      "estimates": {**est, "A_offdiag_pvalue": ones},
                      "config": {"granger_alpha": 0.05}})
    assert not [e for e in gc.edges() if "u" not in e[0]]  # FedGC's test does mask


def test_saved_result_keeps_the_pvalues(tmp_path):
    rc = dict(RC)
    result = app_ss.strategy("fedgc", rc).start(grid=InProcessGrid(client_app, 2, rc))
    result.save(tmp_path)
    back = RunResult.load(tmp_path)
    a = np.asarray(back.estimates["A_offdiag_pvalue"], dtype=float)
    np.testing.assert_allclose(a, result.estimates["A_offdiag_pvalue"])
    assert back.edges() == result.edges()
