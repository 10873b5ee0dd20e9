"""FedGC/FedCF with known-zero coupling blocks and missing observations (issue 22).

Known-zero blocks parse, fail on an unknown client before any window and stay exactly 0 in
every iterate; the partial-observation update is the full update with the missing rows
deleted, an all-missing step only predicts; a client above the missing limit is dropped with
the reason; no cell value crosses the wire; complete runs are bit for bit main's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.statespace import app as app_ss
from fedcausal_flwr.statespace import kalman, loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import all_clients, merged_config
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fedgc", "seed": 3, "statespace.ss-t": 120, "statespace.ss-window": 40,
      "statespace.ss-epochs": 2, "min-nodes": 2, "node-wait-s": 5.0}


def gappy(c: kalman.ClientData, share: float, seed: int = 0) -> kalman.ClientData:
    """``c`` with a share of its ``y`` cells (and ``u`` cells) missing at random."""
    rng = np.random.default_rng(seed)
    y, u = c.y.copy(), c.u.copy()
    y[rng.random(y.shape) < share] = np.nan
    u[rng.random(u.shape) < share] = np.nan
    return kalman.ClientData(c.A, c.B, c.C, c.K, y, u, c.Q, c.R)


# ---- known-zero blocks -------------------------------------------------------------------------
def test_known_zero_statements_parse_into_block_masks():
    blocks = ss.parse_known_zero("A:1<-0, A:c2<-*, B:0->1, a:*<-2")
    assert [str(b) for b in blocks] == ["A:1<-0", "A:2<-*", "B:1<-0", "A:*<-2"]
    zA, zB = ss.known_zero_masks(blocks, [0, 1, 2], [1, 2, 1], [1, 1, 0])
    want = np.array([[0, 0, 0, 1], [1, 0, 0, 1], [1, 0, 0, 1], [1, 1, 1, 0]], bool)
    np.testing.assert_array_equal(zA, want)  # rows: c0 | c1 c1 | c2; the diagonal stays out
    np.testing.assert_array_equal(zB, [[0, 0], [1, 0], [1, 0], [0, 0]])
    assert ss.known_zero_masks((), [0, 1], [2, 2], [0, 0]) is None


@pytest.mark.parametrize(("text", "words"), [
    ("A:1-0", "not a known-zero block"), ("C:1<-0", "not a known-zero block"),
    ("A:x<-0", "'x' is not a client"), ("A:1<-1", "diagonal block is client 1's own"),
])
def test_a_malformed_statement_names_the_key(text, words):
    with pytest.raises(ValueError, match=f"'statespace.ss-known-zero'.*{words}"):
        ss.FedCFSettings(known_zero=text)


def test_fedgc_refuses_input_blocks():
    with pytest.raises(ValueError, match=r"\['B:1<-0'\]: FedGC learns no input blocks"):
        app_ss.settings("fedgc", {**RC, "statespace.ss-known-zero": "B:1<-0"})


def test_an_unknown_client_fails_at_setup_before_any_window():
    rc = {**RC, "statespace.ss-known-zero": "A:1<-0, A:0<-7"}
    grid = InProcessGrid(app_ss_client_app(), 2, rc)
    with pytest.raises(ValueError, match=r"ss-known-zero.*no client 7; the federation's "
                                         r"clients are \[0, 1\]"):
        app_ss.strategy("fedgc", rc).start(grid=grid)
    assert {m.metadata.message_type for m in grid.sent} == {"query.info"}


def app_ss_client_app() -> ClientApp:
    from fedcausal_flwr.client_app import app
    return app


@pytest.mark.parametrize(("model", "text"), [("fedgc", "A:0<-*"),
                                             ("fedcf", "A:2<-0, B:*<-1")])
def test_known_zero_blocks_stay_exactly_zero_in_every_iterate(model, text):
    rc = merged_config({"seed": 4, "ss-t": 80, "ss-window": 20, "ss-clients": 3,
                        "ss-known-zero": text, "ss-init-std": 0.3}, model)
    _, clients = all_clients(rc)
    s = (ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings).from_run_config(rc)
    P, U = [c.dims[0] for c in clients], [c.dims[1] if model == "fedcf" else 0
                                          for c in clients]
    zA, zB = ss.known_zero_masks(s.zero_blocks(), [0, 1, 2], P, U)
    spar = ss.initial_server_for(P, U, s.init_std, s.seed, (zA, zB))
    cpar = [ss.initial_client(c, s.init_std, s.seed, m) for m, c in enumerate(clients)]
    for k, ts in enumerate(ss.windows(80, 20, 2), start=1):
        assert np.all(spar.A_hat[zA] == 0) and np.all(spar.B_hat[zB] == 0)
        cpar, spar, win = loop.exchange_step(clients, cpar, spar, ts, s, k)
        assert np.abs(spar.A_hat[~zA & (win.grad_A != 0)]).max() > 0  # the rest learns
    assert np.all(spar.A_hat[zA] == 0) and np.all(spar.B_hat[zB] == 0)


@pytest.mark.integration
@pytest.mark.parametrize("model", ["fedgc", "fedcf"])
def test_the_result_reports_known_zero_blocks_with_nan_tests(model):
    rc = {**RC, "algorithm": model, "statespace.ss-clients": 3,
          "statespace.ss-known-zero": "A:0<-2" + (", B:1<-0" if model == "fedcf" else "")}
    result = app_ss.strategy(model, rc).start(grid=InProcessGrid(app_ss_client_app(), 3, rc))
    _, clients = all_clients(merged_config(rc, model))
    ref = loop.reference(clients, app_ss.settings(model, rc))
    est = result.estimates
    zA = np.asarray(est["A_offdiag_known_zero"], bool)
    assert zA[:2, 4:].all() and zA.sum() == 4 and np.all(np.asarray(est["A_hat"])[zA] == 0)
    np.testing.assert_allclose(est["A_hat"], ref.server.A_hat, atol=1e-10)
    p = np.asarray(est["A_offdiag_pvalue"], float)
    assert np.isnan(p[zA]).all() and not np.isnan(p[~zA]).any()
    assert np.isnan(np.asarray(est["A_offdiag_se"], float)[zA]).all()
    assert result.metrics["knowledge"]["A"] == [[0, 2]]
    if model == "fedcf":
        assert result.metrics["knowledge"]["B"] == [[1, 0]]
        assert np.isnan(np.asarray(est["B_offdiag_pvalue"], float)[2:4, 0:2]).all()
    assert result.names["A_offdiag_known_zero"] == result.names["A_hat"]


def test_complete_runs_are_mains():
    """The unchanged path: a complete run without known-zero blocks gives the floats main
    (6f10408, before issue 22) gave (``golden_main.json``, made by that commit's code), to 1e-9
    relative: another numpy, scipy or CPU moves only the last bits."""
    golden = json.loads((Path(__file__).parent / "golden_main.json").read_text())
    for model, keys in (("fedgc", {}), ("fedcf", {"ss-target": "innovation"})):
        rc = merged_config({"seed": 5, "ss-t": 120, "ss-window": 40, "ss-epochs": 2, **keys},
                           model)
        _, clients = all_clients(rc)
        assert all(c.observed is None and c.missing == 0 for c in clients)
        s = (ss.FedCFSettings if model == "fedcf" else ss.FedGCSettings).from_run_config(rc)
        r = loop.reference(clients, s)
        assert r.server.masks is None
        got = {"A_hat": r.server.A_hat.ravel(), "B_hat": r.server.B_hat.ravel(),
               "theta": r.clients[1].theta.ravel(), "L_s": [h["L_s"] for h in r.history],
               "pvalue_A": r.granger.pvalue_A.ravel()}
        for key, values in got.items():  # 1e-9: a real change breaks it, BLAS's last bits do not
            want = [float.fromhex(x) for x in golden[model][key]]
            np.testing.assert_allclose(np.asarray(values, float), want, rtol=1e-9, atol=1e-300,
                                       err_msg=f"{model} {key}")


# ---- missing observations ----------------------------------------------------------------------
def test_the_partial_update_is_the_full_update_without_the_missing_rows():
    rng = np.random.default_rng(1)
    C, prior, y = rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=5)
    L = rng.normal(size=(3, 3))
    S, R = L @ L.T + np.eye(3), np.diag(rng.uniform(0.1, 1.0, 5))
    obs = np.array([True, False, True, True, False])
    mean, cov = kalman.kalman_update(prior, S, C, R, y, obs)
    keep = np.flatnonzero(obs)
    full_mean, full_cov = kalman.kalman_update(prior, S, C[keep], R[np.ix_(keep, keep)],
                                               y[keep], np.ones(keep.size, bool))
    np.testing.assert_allclose(mean, full_mean, rtol=1e-12)
    np.testing.assert_allclose(cov, full_cov, rtol=1e-12)
    G = S @ C[keep].T @ np.linalg.inv(C[keep] @ S @ C[keep].T + R[np.ix_(keep, keep)])
    np.testing.assert_allclose(mean, prior + G @ (y[keep] - C[keep] @ prior), rtol=1e-12)
    assert kalman.kalman_update(prior, S, C, R, y * np.nan, ~obs & False)[0] is prior


def test_the_filter_predicts_through_a_dead_stretch_and_reads_determined_steps():
    _, clients = all_clients(merged_config({"seed": 2, "ss-t": 60}, "fedcf"))
    c = clients[0]
    y = c.y.copy()
    y[20:25] = np.nan  # all missing: predict only
    y[30, 0] = np.nan  # D = P: the rest does not determine the state
    d = kalman.ClientData(c.A, c.B, c.C, c.K, y, c.u, c.Q, c.R)
    for t in range(20, 25):
        np.testing.assert_allclose(d.hc[t], c.A @ d.hc[t - 1] + c.B @ c.u[t - 1], rtol=1e-12)
    np.testing.assert_allclose(d.hc[:20], c.hc[:20], rtol=1e-12)  # before: the steady filter
    np.testing.assert_allclose(d.y[30, 0], (c.C @ d.hc[30])[0], rtol=1e-12)
    assert d.observed[20:25].sum() == 0 and d.missing == pytest.approx(11 / (2 * 60 + 2 * 60))
    # D > P: the observed components determine the state; the innovation target is C_o^+ y_o
    _, gc = all_clients(merged_config({"seed": 2, "ss-t": 60}))
    g = gc[1]
    y = g.y.copy()
    y[10, [1, 4, 6]] = np.nan
    d = kalman.ClientData(g.A, g.B, g.C, g.K, y, g.u, g.Q, g.R)
    keep = [0, 2, 3, 5, 7]
    x = np.linalg.lstsq(g.C[keep], g.y[10, keep], rcond=None)[0]
    np.testing.assert_allclose(ss.fedgc_states(d, ss.initial_client(d), np.array([10]),
                                               "innovation")[0][0], x, rtol=1e-10)
    prior = g.A @ d.hc[9]
    np.testing.assert_allclose(d.hc[10], prior + g.K @ (g.C @ (x - prior)), rtol=1e-10)


def test_missing_inputs_read_as_their_observed_mean():
    u = np.array([[1.0, np.nan], [np.nan, np.nan], [3.0, np.nan]])
    np.testing.assert_array_equal(kalman.filled_inputs(u), [[1, 0], [2, 0], [3, 0]])


def test_the_local_loss_counts_only_observed_cells():
    _, clients = all_clients(merged_config({"seed": 2, "ss-t": 60}))
    d = gappy(clients[0], 0.3)
    r = ss.local_residual(d, ss.initial_client(d), np.arange(1, 60))
    assert np.all(r[~d.observed[1:]] == 0) and np.all(r[d.observed[1:]] != 0)


def missing_app(rc: dict, shares: dict[int, float]) -> ClientApp:
    """The App's synthetic clients with a share of each one's cells missing."""
    app = ClientApp()
    _, clients = all_clients(merged_config(rc))

    def make(context):
        pid = int(context.node_config["partition-id"])
        c = gappy(clients[pid], shares.get(pid, 0.0), pid)
        y, _ = c.given()
        return {"A": c.A, "C": c.C, "K": c.K, "y": y, "Q": c.Q, "R": c.R}

    register(app, "fedgc", make)
    return app


def test_a_client_above_the_limit_is_dropped_with_its_share():
    rc = {**RC, "statespace.ss-clients": 3, "statespace.ss-max-missing": 0.3}
    result = app_ss.strategy("fedgc", rc).start(
        grid=InProcessGrid(missing_app(rc, {1: 0.1, 2: 0.4}), 3, rc))
    assert result.status == "completed", result.status
    assert [d for d in result.metrics["dropped"] if "client 2" in d] == [
        "client 2: 39.4% of its cells are missing, more than statespace.ss-max-missing = 0.3"]
    assert result.metrics["clients"] == 2 and list(result.estimates["client_ids"]) == [0, 1]
    shares = result.metrics["missing"]
    assert shares["0"] == 0 and 0.05 < shares["1"] < 0.15 and shares["2"] > 0.3


@pytest.mark.integration
def test_no_cell_value_crosses_the_wire():
    rc = {**RC, "statespace.ss-window": 30, "statespace.ss-epochs": 1}
    grid = InProcessGrid(missing_app(rc, {0: 0.2, 1: 0.2}), 2, rc)
    result = app_ss.strategy("fedgc", rc).start(grid=grid)
    assert result.status == "completed" and result.metrics["missing"]["1"] > 0.1
    _, clients = all_clients(merged_config(rc))
    cells = np.concatenate([gappy(c, 0.2, m).given()[0].ravel()
                            for m, c in enumerate(clients)])
    cells = cells[~np.isnan(cells)]
    for m in grid.sent + grid.received:
        for rec in m.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                assert np.abs(a.reshape(-1, 1) - cells).min(initial=1.0) > 1e-12
        for rec in m.content.config_records.values():
            for v in rec.values():
                assert not (isinstance(v, float) and np.isclose(v, cells, atol=1e-12).any())


@pytest.mark.integration
def test_a_nodes_csv_with_empty_cells_runs_as_the_same_arrays(tmp_path):
    """Empty and NA cells of a node's own CSV are missing values: the App's client (z-scored
    over observed cells, identified, filtered) runs as the arrays with NaN handed directly."""
    from fedcausal_flwr.appconfig import glue
    from fedcausal_flwr.client_app import app
    from fedcausal_flwr.statespace.data import svd_var_client
    from tests.helpers.faults import same_result

    rng = np.random.default_rng(1)
    rc = {"algorithm": "fedgc", "statespace.ss-data": "node", "statespace.ss-p": 2,
          "statespace.ss-window": 20, "statespace.ss-epochs": 1, "min-nodes": 2,
          "node-wait-s": 5.0, "seed": 1}
    data, cfgs = {}, {}
    for pid, D in enumerate((3, 4)):
        Y = np.cumsum(rng.standard_normal((60, D)), axis=0) * 0.1 + rng.standard_normal((60, D))
        Y[rng.random(Y.shape) < 0.1] = np.nan
        rows = [",".join(("NA" if j == 0 else "") if np.isnan(v) else repr(float(v))
                         for j, v in enumerate(r)) for r in Y]
        path = tmp_path / f"n{pid}.csv"
        path.write_text(",".join(f"c{pid}_{j}" for j in range(D)) + "\n" + "\n".join(rows))
        cfgs[pid] = {"data-path": str(path)}
        Z = (Y - np.nanmean(Y, 0)) / np.nanstd(Y, 0)
        c, _ = svd_var_client(Z, 2)
        data[pid] = {"A": c.A, "C": c.C, "K": c.K, "y": Z, "Q": c.Q, "R": c.R}
    got = glue("fedgc").strategy("fedgc", rc).start(grid=InProcessGrid(app, 2, rc, cfgs))
    ref_app = ClientApp()
    register(ref_app, "fedgc", lambda ctx: data[int(ctx.node_config["partition-id"])])
    ref = ss_strategy().start(grid=InProcessGrid(ref_app, 2, rc))
    assert got.status == ref.status == "completed", (got.status, ref.status)
    assert same_result(got, ref)
    assert 0.05 < got.metrics["missing"]["0"] < 0.15


def ss_strategy():
    from fedcausal_flwr.strategies import FedGC

    return FedGC(ss.FedGCSettings(window=20, epochs=1, node_wait_s=5.0, seed=1))
