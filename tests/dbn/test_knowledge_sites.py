"""Issue 22 for FDBNL/PFDBNL: prior knowledge enforced exactly, sites with other column
orders or other variables, missing cells; honest complete runs unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.client import FDBNLClient
from fedcausal_flwr.dbn.sites import SiteView, lag_index, shared, union
from fedcausal_flwr.dbn.synthetic import client_dbn, truths_dbn
from fedcausal_flwr.knowledge import Knowledge
from fedcausal_flwr.strategies import FDBNL, PFDBNL, FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.testing import InProcessGrid

D, K, N = 6, 4, 60
NAMES = ["temp", "valve", "flow", "level", "pump", "heat"]


def series(k: int) -> tuple[np.ndarray, np.ndarray]:
    return client_dbn(5, k, K, N, d=D, p=1)


def run(cls=FDBNL, settings=None, data=None, names=None, rounds=6, **change):
    """An in-process federation of K sites; ``data(k)`` and ``names(k)`` per site."""
    data = data or series
    names = names or (lambda k: NAMES)
    app = ClientApp()
    register(app, cls.algorithm, lambda ctx: {
        "Xt": data(int(ctx.node_config["partition-id"]))[0],
        "Xlag": data(int(ctx.node_config["partition-id"]))[1],
        "names": names(int(ctx.node_config["partition-id"]))})
    s = (settings or cls.settings_class()).replace(max_rounds=rounds, **change)
    grid = InProcessGrid(app, K)
    strategy = cls(s, min_nodes=2, node_wait_s=5.0, audit=True)
    return strategy.start(grid=grid), strategy


# ---- knowledge: syntax, names, cycles ------------------------------------------------
def test_knowledge_parses_names_lags_tiers_and_round_trips():
    k = Knowledge.parse(forbid="*->temp, flow<-level@1", require="valve->flow@0",
                        tiers="temp < valve, pump < flow, level, heat", exogenous="temp")
    assert Knowledge.from_config(k.config()) == k
    m = k.masks(NAMES, 1)
    t, v, f, lv = (NAMES.index(n) for n in ("temp", "valve", "flow", "level"))
    assert m.forbid_W[:, t].sum() == D - 1 and m.forbid_A[:, t].sum() == D - 1  # own past ok
    assert not m.forbid_A[t, t] and m.forbid_A[lv, f] and not m.forbid_W[lv, f]
    assert m.forbid_W[f, v] and m.forbid_A[f, v]  # a later tier never causes an earlier one
    assert m.require_W[v, f] and m.forbid_W[f, v] and m.require_W.sum() == 1


@pytest.mark.parametrize("kw, words", [
    ({"forbid": "temp->nope"}, "no variable named 'nope'"),
    ({"require": "valve->flow"}, "say the lag"),
    ({"require": "valve->flow@0, flow->level@0, level->valve@0"},
     "cycle valve -> flow -> level -> valve"),
    ({"require": "valve->flow@0", "forbid": "valve->*@0"}, "forbids it"),
    ({"forbid": "temp->flow@3"}, "lag 3, but the model has lags 1..1"),
    ({"require": "temp->temp@0"}, "does not cause itself"),
    ({"require": "valve->temp@1", "exogenous": "temp"}, "forbids it"),
])
def test_bad_knowledge_is_an_error_naming_it(kw, words):
    with pytest.raises(ValueError, match=words):
        Knowledge.parse(**kw).masks(NAMES, 1)


@pytest.mark.parametrize("kw, words", [
    ({"forbid": "a-b"}, "'forbid': 'a-b' is not an edge"),
    ({"require": "*->a@0"}, "names both variables"),
    ({"tiers": "a, b"}, "two or more groups"),
    ({"forbid": "a->b@x"}, "whole number"),
])
def test_knowledge_syntax_errors_name_the_key(kw, words):
    with pytest.raises(ValueError, match=words):
        FDBNLSettings(**kw)


def test_knowledge_file_reads_like_the_strings(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text("# statements\nforbid,*,temp\nrequire,valve,flow,0\ntier,temp,0\n"
                    "tier,valve,1\ntier,flow,2\nexogenous,temp\n")
    k = Knowledge.from_file(path)
    assert k == Knowledge.parse(forbid="*->temp", require="valve->flow@0",
                                tiers="temp < valve < flow", exogenous="temp")
    path.write_text("maybe,a,b\n")
    with pytest.raises(ValueError, match="row 1: expected forbid"):
        Knowledge.from_file(path)


# ---- knowledge: enforced exactly, through the Flower strategy -------------------------
KNOW = {"forbid": "*->temp@0, flow->level, heat->pump@1", "require": "valve->flow@0, "
        "temp->heat@1", "tiers": "temp < valve, pump, heat < flow, level"}


@pytest.mark.integration
@pytest.mark.parametrize("cls", [FDBNL, PFDBNL])
def test_forbidden_edges_never_appear_and_required_ones_always_do(cls):
    result, strategy = run(cls, **KNOW)
    assert result.status == "completed"
    m = Knowledge.parse(**KNOW).masks(NAMES, 1)
    est = result.estimates
    graphs = [(est["W"], est["A"])]
    if cls is PFDBNL:
        graphs += list(zip(est["W_local"], est["A_local"], strict=True))
    for W, A in graphs:
        assert np.all(W[m.forbid_W] == 0) and np.all(A[m.forbid_A] == 0)
    edges = {(s, t, lag) for s, t, _, lag in result.edges(tau=10.0)}  # any threshold
    assert edges == {("valve", "flow", 0), ("temp", "heat", 1)}
    assert {(s, t, lag) for s, t, _, lag in result.threshold(10.0).edges()} == edges
    assert np.array_equal(est["W_required"], m.require_W.astype(float))
    assert result.metrics["knowledge"] == {"forbidden": int(m.forbid_W.sum() +
                                                            m.forbid_A.sum()), "required": 2}


@pytest.mark.parametrize("kw, words", [({"forbid": "tmp->flow"}, "no variable named 'tmp'"),
                                      ({"require": "flow->level@0, level->flow@0"}, "cycle")])
def test_unknown_name_or_required_cycle_stops_the_run_before_any_round(kw, words):
    app = ClientApp()
    register(app, "fdbnl", lambda ctx: {"Xt": series(0)[0], "Xlag": series(0)[1],
                                        "names": NAMES})
    strategy = FDBNL(FDBNLSettings(**kw), min_nodes=2, node_wait_s=5.0, audit=True)
    with pytest.raises(ValueError, match=words):
        strategy.start(grid=InProcessGrid(app, K))
    assert not [e for e in strategy.wire_log.entries if e["phase"].startswith("train")]


# ---- honest complete runs: unchanged -------------------------------------------------
def test_honest_aligned_complete_runs_take_the_unchanged_path():
    result, strategy = run(rounds=5)
    moms = [dbn.moments(*series(k)) for k in range(K)]
    state, _ = dbn.fdbnl_reference(moms, FDBNLSettings(max_rounds=5))
    assert np.array_equal(result.estimates["W"], state.W)  # bit for bit, not approximately
    assert np.array_equal(result.estimates["A"], state.A)
    train = [e for e in strategy.wire_log.entries if e["phase"] == "train.local"]
    assert train and not any("variables" in e.get("config", []) for e in train)
    assert not {"W_sites", "W_unidentified", "W_required"} & set(result.estimates)
    assert not {"missing", "variables", "knowledge"} & set(result.metrics)


# ---- sites with other column orders and other variables ------------------------------
def permuted(k: int) -> tuple[np.ndarray, np.ndarray]:
    Xt, Xlag = series(k)
    if k != 2:
        return Xt, Xlag
    order = np.array([3, 0, 5, 1, 4, 2])
    return Xt[:, order], Xlag[:, lag_index(order, D, 1)]


def test_a_site_with_another_column_order_is_aligned_by_name():
    base, _ = run(rounds=5)
    order = [3, 0, 5, 1, 4, 2]
    result, strategy = run(data=permuted, rounds=5,
                           names=lambda k: [NAMES[i] for i in order] if k == 2 else NAMES)
    assert result.status == "completed" and not result.metrics["dropped"]
    assert result.names["variables"] == NAMES
    np.testing.assert_allclose(result.estimates["W"], base.estimates["W"], atol=1e-9)
    sent = {e["node"] for e in strategy.wire_log.entries
            if e["phase"] == "train.local" and "variables" in e.get("config", [])}
    assert len(sent) == 1  # only the site whose order differs is told the federation's


def lacking(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Site 1 lacks 'pump' (column 4), site 3 lacks 'heat' and 'temp'."""
    Xt, Xlag = series(k)
    keep = {1: [0, 1, 2, 3, 5], 3: [1, 2, 3, 4]}.get(k)
    if keep is None:
        return Xt, Xlag
    return Xt[:, keep], Xlag[:, lag_index(np.array(keep), D, 1)]


def lacking_names(k: int) -> list[str]:
    return {1: ["temp", "valve", "flow", "level", "heat"],
            3: ["valve", "flow", "level", "pump"]}.get(k, NAMES)


@pytest.mark.integration
@pytest.mark.parametrize("cls", [FDBNL, PFDBNL])
def test_sites_with_other_variables_inform_only_their_entries(cls):
    result, strategy = run(cls, data=lacking, names=lacking_names, rounds=5)
    assert result.status == "completed" and result.metrics["clients"] == K
    est = result.estimates
    p, h, t = NAMES.index("pump"), NAMES.index("heat"), NAMES.index("temp")
    assert est["W_sites"][p, h] == 2 and est["W_sites"][0, 1] == 3
    assert result.metrics["variables"]["absent"] == {"1": ["pump"], "3": ["temp", "heat"]}
    # the reference loop over the same sites gives the same graph
    views = [SiteView(lacking_names(k), NAMES, 1) for k in range(K)]
    moms = [dbn.moments(*lacking(k)) for k in range(K)]
    ref = (dbn.fdbnl_reference if cls is FDBNL else dbn.pfdbnl_reference)(
        moms, cls.settings_class(max_rounds=5), sites=views)[0]
    np.testing.assert_allclose(np.nan_to_num(est["W"]), ref.W, atol=1e-9)
    if cls is PFDBNL:  # site 3's own graph says nothing about temp or heat
        W3 = est["W_local"][3]
        assert np.all(np.isnan(W3[[t, h]])) and np.all(np.isfinite(W3[1:4, 1:4]))
    del p


def test_an_entry_no_site_informs_is_unidentified_not_zero():
    def names(k):
        return ["temp", "valve", "flow"] if k < 2 else ["temp", "level", "pump", "heat"]

    def data(k):
        Xt, Xlag = series(k)
        keep = np.array([0, 1, 2] if k < 2 else [0, 3, 4, 5])
        return Xt[:, keep], Xlag[:, lag_index(keep, D, 1)]

    result, _ = run(data=data, names=names, rounds=4)
    est = result.estimates
    v, lv = NAMES.index("valve"), NAMES.index("level")
    assert np.isnan(est["W"][v, lv]) and est["W_unidentified"][v, lv] == 1
    assert est["W_sites"][0, v] == 2 and not np.isnan(est["W"][0, v])
    assert result.metrics["variables"]["unidentified"] == int(
        est["W_unidentified"].sum() + est["A_unidentified"].sum()) > 0
    assert not [e for e in result.edges(0.0) if {e[0], e[1]} == {"valve", "level"}]


def test_shared_variables_only_and_same_variables_on_request():
    assert union([["a", "b"], ["c", "a"]]) == ["a", "b", "c"]
    assert shared([["a", "b", "c"], ["c", "a"]]) == ["a", "c"]
    result, _ = run(data=lacking, names=lacking_names, rounds=3, variables="shared")
    assert result.names["variables"] == ["valve", "flow", "level"]
    result, _ = run(data=lacking, names=lacking_names, rounds=3, variables="same")
    assert result.metrics["clients"] == 2 and len(result.metrics["dropped"]) == 2


def test_replicas_ride_with_sites_that_lack_variables():
    result, _ = run(data=lacking, names=lacking_names, rounds=3, replicas=2)
    assert result.status == "completed"
    assert np.all(np.isfinite(result.estimates["W_frequency"]))


# ---- missing cells ----------------------------------------------------------------------
def holes(k: int, rate: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    Xt, Xlag = series(k)
    rng = np.random.default_rng(k)
    Xt, Xlag = Xt.copy(), Xlag.copy()
    Xt[rng.random(Xt.shape) < rate] = np.nan
    Xlag[rng.random(Xlag.shape) < rate] = np.nan
    return Xt, Xlag


def test_pairwise_moments_are_psd_and_exact_without_missing_cells():
    Xt, Xlag = series(0)
    S, M, N = dbn.moments(Xt, Xlag)
    assert np.array_equal(S, Xt.T @ Xt / len(Xt))
    Xt, Xlag = holes(0, 0.3)
    S, M, N = dbn.moments(Xt, Xlag)
    C = np.block([[S, M], [M.T, N]])
    assert np.linalg.eigvalsh(C).min() > -1e-10 and np.all(np.isfinite(C))
    both = ~np.isnan(Xt[:, 0]) & ~np.isnan(Xt[:, 1])
    raw = np.mean(Xt[both, 0] * Xt[both, 1])
    assert abs(S[0, 1] - raw) < 0.2  # the repair moves an entry only a little


def test_missing_cells_are_used_shared_reported_and_a_site_above_the_limit_dropped():
    def data(k):
        return holes(k, 0.6 if k == 0 else 0.05)

    result, strategy = run(data=data, rounds=4)
    assert result.status == "completed"
    (dropped,) = result.metrics["dropped"]
    assert dropped.startswith("client 0") and "above run config 'dbn.max-missing' = 0.5" in \
        dropped
    shares = result.metrics["missing"]
    assert set(shares) == {"1", "2", "3"} and all(0.02 < v < 0.1 for v in shares.values())
    assert np.all(np.isfinite(result.estimates["W"]))
    for e in strategy.wire_log.entries:  # matrices only: nothing as long as a column
        assert all(np.prod(shape) <= D * D for shape, _ in e["arrays"])


def test_a_dead_sensor_is_a_variable_the_site_does_not_hold():
    Xt, Xlag = series(1)
    Xt, Xlag = Xt.copy(), Xlag.copy()
    Xt[:, 2] = np.nan
    Xlag[:, 2] = np.nan
    c = FDBNLClient(Xt, Xlag, 1, K, names=NAMES)
    props = c.get_properties({})
    assert props["unobserved"] == "flow" and props["names"] == ",".join(NAMES)
    assert c.d == D - 1 and abs(props["missing"] - 1 / D) < 1e-12
    with pytest.raises(ValueError, match="sent no 'variables'"):
        c.fit([np.zeros((D, D)), np.zeros((D, D))] * 2, {"phase": "local", "rho2": 1.0})


def test_truth_is_scored_with_unidentified_entries_as_no_edge():
    from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics

    (W0, A0), _ = truths_dbn(5, 2, d=D, p=1)
    W = np.where(W0 != 0, 1.0, np.nan)
    m = dbn_graph_metrics(W, A0, W0, A0, 0.2, 0.2)
    assert m["shd_w"] == 0 and m["shd_a"] == 0


def test_pfdbnl_client_step_holds_forbidden_entries_at_zero():
    mom = dbn.moments(*series(0))
    m = Knowledge.parse(forbid="valve->*").masks(NAMES, 1)
    s = PFDBNLSettings()
    payload = [np.zeros((D, D)), np.zeros((D, D))] * 4
    out = dbn.pfdbnl_client_step(mom, payload, 0.0, 1.0, 1.0, **s.to_wire(), knowledge=m)
    assert np.all(out[2][1] == 0) and np.all(out[3][1] == 0) and np.abs(out[2]).sum() > 0
