"""Named results: variable names travel from the clients into result.json and the plots; the
labelled views of a result (edges, pandas, networkx, threshold, load); FedIV's predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import FDBNLClient, register
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import RunResult, load_result
from fedcausal_flwr.server_app import run as app_run
from fedcausal_flwr.strategies import FDBNL, FDBNLSettings
from fedcausal_flwr.testing import InProcessGrid

DBN = {"algorithm": "fdbnl", "seed": 3, "dbn.d": 4, "dbn.lags": 2, "dbn.samples-per-client": 40,
       "dbn.generator": "svar", "dbn.num-rounds": 4, "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05,
       "min-nodes": 2, "node-wait-s": 5.0}
SS = {"seed": 3, "statespace.ss-t": 40, "statespace.ss-window": 5, "statespace.ss-epochs": 1,
      "min-nodes": 2,
      "node-wait-s": 5.0}
IV = {"algorithm": "fediv", "seed": 4, "iv.iv-scenario": "step", "iv.iv-n": 300, "iv.iv-rounds": 2,
      "iv.iv-val-features": 8, "min-nodes": 2, "node-wait-s": 5.0, "iv.iv-device": "cpu"}
VFD = {"algorithm": "vfedcd", "vertical.d": 6, "vertical.edges": 8, "vertical.n": 20,
       "vertical.num-epochs": 1, "vertical.batch": 8,
       "vertical.he-backend": "mock", "vertical.key-bits": 256, "node-wait-s": 5.0, "seed": 4,
       "vertical.insecure-test-keys": True,
       "vertical.vfedcd-accept-backends": "paillier,paillier-packed,mock",
       "vertical.vfedcd-accept-modes": "vfedcd,ctv,framework", "vertical.vfedcd-min-key-bits": 256}

CASES = {
    "fdbnl": (DBN, 3), "pfdbnl": ({**DBN, "algorithm": "pfdbnl"}, 3),
    "fedgc": ({**SS, "algorithm": "fedgc"}, 2), "fedcf": ({**SS, "algorithm": "fedcf"}, 2),
    "fediv": (IV, 2), "vfedcd": (VFD, 3),
}


def app_result(tmp_path, rc: dict, k: int) -> tuple[RunResult, dict]:
    rc = {**rc, "outputs": str(tmp_path), "run-name": "r"}
    result = app_run(InProcessGrid(client_app, k, rc), rc)
    return result, json.loads((tmp_path / "r" / "result.json").read_text())


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", list(CASES))
def test_names_reach_result_json_for_every_algorithm(tmp_path, algorithm):
    rc, k = CASES[algorithm]
    result, doc = app_result(tmp_path, rc, k)
    assert result.status == "completed", result.status
    names = doc["names"]
    assert names == json.loads(json.dumps(result.names))
    if algorithm in ("fdbnl", "pfdbnl"):
        v = ["x0", "x1", "x2", "x3"]
        assert names["variables"] == names["W"] == v
        assert names["A"]["cols"] == v and len(names["A"]["rows"]) == 8
        assert names["A"]["rows"][:5] == ["x0(t-1)", "x1(t-1)", "x2(t-1)", "x3(t-1)",
                                          "x0(t-2)"]
        if algorithm == "pfdbnl":
            assert names["W_local"] == v
    elif algorithm in ("fedgc", "fedcf"):
        P = len(names["states"])
        assert np.shape(doc["estimates"]["A_hat"]) == (P, P)
        assert names["A_hat"] == names["states"] and names["states"][0] == "c0.s0"
        assert set(names["measurements"]) == {"0", "1"}
        assert names["measurements"]["0"][0] == "y0"
    elif algorithm == "fediv":
        assert names == {"x": ["x0"], "z": ["z0", "z1"], "y": "y"}
    else:
        assert names["variables"] == names["B"] == [f"x{i}" for i in range(6)]
    if algorithm != "fediv":
        layers = RunResult.load(tmp_path / "r").layers()
        assert layers and all(len(la.sources) == la.matrix.shape[0] for la in layers)
        assert (tmp_path / "r" / "graphs.png").stat().st_size > 1000


def user_fdbnl(pairs, names_of, min_nodes=2, variables="union"):
    """A user's own ClientApp with named data, through the public API only."""
    app = ClientApp()
    register(app, "fdbnl", lambda ctx: {
        "Xt": pairs[int(ctx.node_config["partition-id"])][0],
        "Xlag": pairs[int(ctx.node_config["partition-id"])][1],
        "names": names_of(int(ctx.node_config["partition-id"]))})
    grid = InProcessGrid(app, len(pairs))
    return FDBNL(FDBNLSettings(lambda_w=0.05, lambda_a=0.05, max_rounds=3,
                               variables=variables),
                 min_nodes=min_nodes, node_wait_s=5.0).start(grid=grid)


GENES = ["gata1", "tal1", "klf1", "spi1"]


def pairs4(k=4):
    return [client_data(DBN, i, k) for i in range(k)]


def test_a_users_named_variables_reach_the_result_and_its_views(tmp_path):
    result = user_fdbnl(pairs4(), lambda pid: GENES)
    assert result.status == "completed"
    assert result.names["variables"] == GENES
    assert result.names["A"]["rows"][4] == "gata1(t-2)"
    assert result.labels("W") == (GENES, GENES)
    assert result.variables() == GENES
    # pure-python edges: (source, target, weight, lag), lag 0 from W, 1..p from A
    edges = result.edges(tau=0.0)
    W, A = result.estimates["W"], result.estimates["A"]
    assert {e[3] for e in edges} <= {0, 1, 2}
    for s, t, w, lag in edges:
        i, j = GENES.index(s), GENES.index(t)
        assert w == (W[i, j] if lag == 0 else A[(lag - 1) * 4 + i, j])
    assert len(edges) == int((W != 0).sum() - (np.diag(W) != 0).sum() + (A != 0).sum())
    # by default the run's own thresholds: FDBNLSettings' tau_w (W) and tau_a (A1, A2)
    assert result.config["tau_w"] == result.config["tau_a"] == 0.2
    assert result.thresholds() == {"W": 0.2, "A1": 0.2, "A2": 0.2}
    assert result.edges() == [e for e in edges if abs(e[2]) > 0.2]
    # threshold: a copy, small entries zeroed, the original untouched
    tau = float(np.median(np.abs(A[A != 0]))) if (A != 0).any() else 0.1
    small = result.threshold(tau)
    assert np.all((np.abs(small.estimates["A"]) >= tau) | (small.estimates["A"] == 0))
    assert np.array_equal(result.estimates["A"], A)
    assert all(abs(e[2]) >= tau for e in small.edges(tau=0.0))
    assert set(small.edges(tau=0.0)) == {e for e in edges if abs(e[2]) >= tau}
    # save / load round trip
    result.save(tmp_path)
    back = RunResult.load(tmp_path)
    assert back.names == result.names and back.status == "completed"
    np.testing.assert_allclose(back.estimates["A"], A)
    assert back.edges(tau=0.0) == edges and back.edges() == result.edges()
    assert load_result(tmp_path)["names"]["variables"] == GENES  # the dict reader as before


def test_nodes_that_disagree_on_names_are_dropped_and_named_with_variables_same():
    odd = ["a", "b", "c", "d"]
    result = user_fdbnl(pairs4(), lambda pid: odd if pid == 2 else GENES, variables="same")
    assert result.status == "completed"
    assert result.names["variables"] == GENES and result.metrics["clients"] == 3
    (dropped,) = result.metrics["dropped"]
    assert dropped.startswith("client 2 ") and "a,b,c,d" in dropped and "gata1" in dropped


def test_by_default_a_node_with_other_names_widens_the_graph_to_the_union():
    odd = ["a", "b", "c", "d"]
    result = user_fdbnl(pairs4(), lambda pid: odd if pid == 2 else GENES)
    assert result.status == "completed" and result.metrics["clients"] == 4
    assert result.names["variables"] == GENES + odd and not result.metrics["dropped"]
    W, n = result.estimates["W"], result.estimates["W_sites"]
    assert np.all(np.isnan(W[:4, 4:])) and np.all(np.isnan(W[4:, :4]))  # nobody sees both
    assert n[0, 1] == 3 and n[4, 5] == 1 and result.metrics["variables"]["unidentified"] > 0
    assert not [e for e in result.edges(0.0) if {e[0], e[1]} & set(GENES) and
                {e[0], e[1]} & set(odd)]


def test_bad_names_are_refused_by_the_client():
    Xt, Xlag = pairs4(1)[0]
    for names, why in ((["a", "b"], "2 names for 4"), (["a", "a", "b", "c"], "duplicated"),
                       (["a,b", "c", "d", "e"], "contains ','"), ("abcd", "sequence")):
        with pytest.raises(ValueError, match=why):
            FDBNLClient(Xt, Xlag, names=names)
    props = FDBNLClient(Xt, Xlag, names=GENES).get_properties({})
    assert props["names"] == "gata1,tal1,klf1,spi1"
    assert FDBNLClient(Xt, Xlag).get_properties({})["names"] == "x0,x1,x2,x3"


def named_result() -> RunResult:
    W = np.array([[0.0, 0.8, 0.0], [0.0, 0.0, -0.05], [0.0, 0.0, 0.0]])
    A = np.zeros((6, 3))
    A[0, 1], A[4, 2] = 0.3, -0.6  # a(t-1) -> b, b(t-2) -> c
    v = ["a", "b", "c"]
    return RunResult("fdbnl", {}, estimates={"W": W, "A": A},
                     names={"variables": v, "W": v,
                            "A": {"rows": [f"{n}(t-{k})" for k in (1, 2) for n in v],
                                  "cols": v}})


def test_edges_are_pure_python_and_names_saved_as_one_list_also_label():
    r = named_result()
    assert r.edges(tau=0.0) == [("a", "b", 0.8, 0), ("b", "c", -0.05, 0), ("a", "b", 0.3, 1),
                                ("b", "c", -0.6, 2)]
    assert r.edges(tau=0.1) == [("a", "b", 0.8, 0), ("a", "b", 0.3, 1), ("b", "c", -0.6, 2)]
    shared = RunResult("vfedcd", {}, estimates={"B": r.estimates["W"]}, names=["p", "q", "r"])
    assert shared.edges(tau=0.0) == [("p", "q", 0.8, 0), ("q", "r", -0.05, 0)]
    assert shared.edges() == [("p", "q", 0.8, 0)]  # VFedCDSettings.tau = 0.7
    unnamed = RunResult("vfedcd", {}, estimates={"B": r.estimates["W"]})
    assert unnamed.edges()[0] == ("x0", "x1", 0.8, 0)
    with pytest.raises(ValueError, match="predict"):
        RunResult("fediv", {}, estimates={}).edges()


def test_to_networkx_names_weights_and_lags():
    nx = pytest.importorskip("networkx", reason="networkx is optional")
    r = named_result()
    G = r.to_networkx()
    assert isinstance(G, nx.DiGraph) and sorted(G.nodes) == ["a", "b", "c"]
    assert G.edges["a", "b"]["weight"] == 0.8 and G.edges["a", "b"]["lag"] == 0
    assert G.edges["a", "b"]["weights"] == {0: 0.8, 1: 0.3}
    assert G.edges["b", "c"]["lag"] == 2 and G.edges["b", "c"]["weight"] == -0.6
    assert G.edges["b", "c"]["weights"] == {2: -0.6}  # -0.05 (lag 0) is under tau_w = 0.2
    assert G.graph["tau"] == {"W": 0.2, "A1": 0.2, "A2": 0.2}
    every = r.to_networkx(tau=0.0)
    assert every.edges["b", "c"]["weights"] == {0: -0.05, 2: -0.6} and every.graph["tau"] == 0
    M = r.to_networkx(tau=0.1, multigraph=True)
    assert sorted((s, t, d["lag"]) for s, t, d in M.edges(data=True)) == [
        ("a", "b", 0), ("a", "b", 1), ("b", "c", 2)]
    assert r.threshold(0.1).to_networkx().number_of_edges() == 2


def test_default_thresholds_are_the_runs_own():
    """edges()/to_networkx() default to the algorithm's thresholds, read from the settings the
    run used: result.json's config["strategy"] (the App), the flat config (a strategy's own
    start), else the settings class defaults; FedGC/FedCF have none (0)."""
    W = np.array([[0.0, 0.8, 0.25], [0.0, 0.0, -0.05], [0.0, 0.0, 0.0]])
    A = np.zeros((3, 3))
    A[0, 1] = 0.3
    est = {"W": W, "A": A}
    app = RunResult("fdbnl", {"run_config": {}, "strategy": {"tau_w": 0.5, "tau_a": 0.4}},
                    estimates=est)
    assert app.thresholds() == {"W": 0.5, "A1": 0.4}
    assert app.edges() == [("x0", "x1", 0.8, 0)]
    own = RunResult("pfdbnl", {"tau_w": 0.1, "tau_a": 0.1}, estimates=est)
    assert [e[:2] for e in own.edges()] == [("x0", "x1"), ("x0", "x2"), ("x0", "x1")]
    assert RunResult("fdbnl", {"run_config": {}}, estimates=est).thresholds() == {
        "W": 0.2, "A1": 0.2}
    assert len(app.edges(tau=0.0)) == 4
    vfd = RunResult("vfedcd", {"strategy": {"tau": 0.2}}, estimates={"B": W})
    assert vfd.thresholds() == {"B": 0.2} and len(vfd.edges()) == 2
    ss = RunResult("fedcf", {}, estimates={"A_hat": W, "B_hat": A[:, :1]})
    assert ss.thresholds() == {"A_hat": 0.0, "B_hat": 0.0} and len(ss.edges()) == 3


@pytest.mark.integration
def test_an_app_run_thresholds_at_its_run_config(tmp_path):
    key = {field: FDBNLSettings.app_key(k)  # the App's run-config key of a field
           for k, field in FDBNLSettings.keys().items()}
    result, doc = app_result(tmp_path, {**DBN, key["tau_w"]: 0.3, key["tau_a"]: 0.25}, 3)
    back = RunResult.load(tmp_path / "r")
    assert doc["config"]["strategy"]["tau_w"] == 0.3
    assert back.thresholds() == {"W": 0.3, "A1": 0.25, "A2": 0.25} == result.thresholds()
    every = back.edges(tau=0.0)
    assert back.edges() == [e for e in every if abs(e[2]) > (0.3 if e[3] == 0 else 0.25)]


def test_to_pandas_labelled_adjacency_per_lag():
    pd = pytest.importorskip("pandas", reason="pandas is optional (pip install pandas)")
    frames = named_result().to_pandas()
    assert list(frames) == ["W", "A1", "A2"]
    assert list(frames["W"].index) == list(frames["A2"].columns) == ["a", "b", "c"]
    assert frames["A2"].loc["b", "c"] == -0.6 and isinstance(frames["W"], pd.DataFrame)


def test_to_pandas_without_pandas_names_the_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    monkeypatch.delitem(__import__("sys").modules, "pandas", raising=False)
    with pytest.raises(ImportError, match="pip install pandas"):
        named_result().to_pandas()


def test_pfdbnl_client_graph_and_fedgc_orientation():
    W = np.zeros((2, 2))
    Wl = np.stack([np.array([[0, 1.0], [0, 0]]), np.array([[0, 0], [2.0, 0]])])
    r = RunResult("pfdbnl", {}, estimates={"W": W, "A": np.zeros((2, 2)), "W_local": Wl,
                                           "A_local": np.zeros((2, 2, 2)),
                                           "client_ids": np.array([3, 5])},
                  names={"W": ["u", "v"], "W_local": ["u", "v"]})
    assert r.edges(client=5) == [("v", "u", 2.0, 0)]
    assert r.threshold(1.5).estimates["W_local"][0, 0, 1] == 0
    with pytest.raises(ValueError, match="not among"):
        r.edges(client=4)
    # FedGC: x_t = A_hat x_{t-1}, row = target: A_hat[1, 0] is c0.s0 -> c1.s0
    A = np.zeros((2, 2))
    A[1, 0] = 0.5
    g = RunResult("fedgc", {}, estimates={"A_hat": A}, names={"A_hat": ["c0.s0", "c1.s0"]})
    assert g.edges() == [("c0.s0", "c1.s0", 0.5, 1)]


@pytest.mark.integration
def test_fediv_predict_equals_g_values(tmp_path):
    from fedcausal_flwr.iv import model as dg
    from fedcausal_flwr.strategies import FedIV

    result, _ = app_result(tmp_path, IV, 2)
    x = np.linspace(-2, 2, 17)
    g, _ = dg.networks((1,), (2,), 0)
    for selected, key in ((True, "g_params_selected"), (False, "g_params")):
        want = dg.g_values(g, result.estimates[key], x[:, None])
        np.testing.assert_allclose(FedIV.predict(result, x, selected=selected), want)
        np.testing.assert_allclose(result.predict(x[:, None], selected=selected), want)
    loaded = RunResult.load(tmp_path / "r")
    np.testing.assert_allclose(loaded.predict(x), result.predict(x), rtol=1e-12)
    np.testing.assert_allclose(FedIV.predict(tmp_path / "r", x), result.predict(x))
    with pytest.raises(ValueError, match="per-row shape"):
        result.predict(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="FedIV"):
        named_result().predict(x)


def test_plot_ticks_carry_the_names(tmp_path, monkeypatch):
    import fedcausal_flwr.plots as plots
    from fedcausal_flwr.server_app import save_with_plots

    seen = []
    real = plots._ticks
    monkeypatch.setattr(plots, "_ticks", lambda ax, mat, lab: (seen.append(lab),
                                                               real(ax, mat, lab)))
    save_with_plots(named_result(), tmp_path)
    assert (["a", "b", "c"], ["a", "b", "c"]) in seen
    assert (tmp_path / "graphs.png").stat().st_size > 1000


def test_to_pandas_builds_one_labelled_frame_per_layer(monkeypatch):
    """The DataFrame construction itself, with a stand-in module where pandas is absent."""
    import sys
    import types

    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda data, index, columns: ("frame", np.asarray(data).tolist(),
                                                   index, columns)
    monkeypatch.setitem(sys.modules, "pandas", fake)
    frames = named_result().to_pandas()
    assert list(frames) == ["W", "A1", "A2"]
    assert frames["A2"][2] == frames["A2"][3] == ["a", "b", "c"]
    assert frames["A2"][1][1][2] == -0.6 and frames["A1"][1][0][1] == 0.3


def vfedcd_user_run(names_of):
    from fedcausal_flwr.vertical import app as vertical
    from fedcausal_flwr.vertical.data import party_data

    app = ClientApp()

    def make(ctx):
        pid = int(ctx.node_config["partition-id"])
        x, _, cols = party_data(VFD, pid, 3)
        return {"x": x, "columns": cols, "sample_ids": np.arange(len(x)),
                "names": names_of(pid, cols), "accept_backends": "mock", "min_key_bits": 256}

    register(app, "vfedcd", make)
    return vertical.strategy("vfedcd", VFD).start(grid=InProcessGrid(app, 3))


@pytest.mark.integration
def test_vfedcd_parties_name_their_columns_and_the_server_orders_them():
    result = vfedcd_user_run(lambda pid, cols: [f"gene{c}" for c in cols])
    assert result.status == "completed", result.status
    assert result.names["B"] == [f"gene{i}" for i in range(6)]
    clash = vfedcd_user_run(lambda pid, cols: [f"g{j}" for j in range(len(cols))])
    assert clash.status.startswith("stopped") and "'g0'" in clash.status
    assert "party 0 and party 1" in clash.status


def test_built_in_loaders_name_their_variables(tmp_path):
    from fedcausal_flwr.dbn.data import variable_names

    tsv = tmp_path / "insilico_size10_1_timeseries.tsv"
    tsv.write_text('"Time"\t"G1"\t"G2"\t"G3"\n\n0\t0.1\t0.2\t0.3\n50\t0.2\t0.3\t0.4\n')
    assert variable_names({"data": "dream4", "data-path": str(tsv)}, 0, 3) == ["G1", "G2", "G3"]
    assert variable_names({"data": "netsim", "data-path": str(tsv)}, 0, 2) == ["R1", "R2"]
    assert variable_names(DBN, 0, 4) is None  # synthetic: the clients' x0..
