"""VFedCD through the Message API (in-process Grid): equals the reference loop, relay audit,
settings sent by the server, a user's own ClientApp, bad input stops the run naming the party
and reports no graph, parties refuse what their consent does not cover (secure only by
default), and whatever crosses the wire unprotected is logged once per run."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.common.config import flatten_dict

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.client_app import handle
from fedcausal_flwr.clients import register
from fedcausal_flwr.strategies import VFedCD
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical import app as vertical
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import (
    VerticalData,
    party_data,
    pooled_data,
    split_standardised,
)
from fedcausal_flwr.vertical.model import VFedCDSettings
from tests.helpers.vfedcd import RC, run

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                          .read_text())["tool"]["flwr"]["app"]["config"])
def reference(rc: dict, k: int = 3) -> loop.State:
    xs = [party_data(rc, i, k)[0] for i in range(k)]
    return loop.train_reference(xs, VFedCDSettings.from_run_config(rc))


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["mock", "paillier", "paillier-packed"])
def test_flower_path_equals_reference(backend):
    rc = {**RC, "vertical.he-backend": backend}
    result, _ = run(rc)
    ref = reference(rc)
    assert result.status == "completed"
    B = V.graph(ref.F, [2, 2, 2])
    np.testing.assert_allclose(result.estimates["B"], B, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.estimates["dag"], V.dag_at_threshold(B, 0.1))
    assert [h["lambda2"] for h in result.history] == [h["lambda2"] for h in ref.history]
    np.testing.assert_allclose([h["loss"] for h in result.history],
                               [h["loss"] for h in ref.history], rtol=1e-12)
    assert {"shd", "f1"} <= set(result.metrics)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["framework", "ctv", "vfedcd"])
def test_each_mode_in_flower_equals_its_reference_loop(mode):
    rc = {**RC, "vertical.mode": mode, "vertical.l2": 0.01, "vertical.unfreeze": True,
          "vertical.loss": "nll", "vertical.optimizer": "adam",
          "vertical.lr": 0.05}
    result, grid = run(rc)
    ref = reference(rc)
    assert result.status == "completed"
    np.testing.assert_allclose(result.estimates["B"], V.graph(ref.F, [2, 2, 2]), rtol=0,
                               atol=1e-12)
    assert [h["lambda2"] for h in result.history] == [h["lambda2"] for h in ref.history]
    assert (ref.lam2 > 0) == (mode != "framework")
    np.testing.assert_allclose([h["loss"] for h in result.history],
                               [h["loss"] for h in ref.history], rtol=1e-12)
    plain = {m.metadata.message_type for m in grid.sent if "plain" in m.metadata.message_type}
    assert bool(plain) == (mode != "vfedcd")  # the ablations send features in the clear


@pytest.mark.integration
def test_laplace_noise_on_graph_fragments_matches_the_reference():
    rc = {**RC, "vertical.dp-b": 0.05}
    result, _ = run(rc)
    ref = reference(rc)
    s = VFedCDSettings.from_run_config(rc)
    noisy = V.ctv_graph(ref.F, [2, 2, 2], s.hidden, s.dp_b, s.seed, ref.step)
    np.testing.assert_allclose(result.estimates["B"], noisy, rtol=0, atol=1e-12)
    assert np.abs(noisy - V.graph(ref.F, [2, 2, 2])).max() > 0.01
    clean, _ = run(RC)
    assert not np.allclose(clean.estimates["B"], result.estimates["B"])


@pytest.mark.integration
def test_relay_sees_only_ciphertexts_masked_shares_and_graph_fragments():
    rc = {**RC, "vertical.he-backend": "paillier", "vertical.num-epochs": 1}
    result, grid = run(rc)
    assert result.status == "completed"
    raw = np.hstack([party_data(rc, i, 3)[0] for i in range(3)])
    widths = set()
    seen = set()
    for m in grid.received:  # learn the key widths from the published keys
        if m.metadata.message_type == "train.vfedcd_keys":
            (pk,) = m.content["arrays"].to_numpy_ndarrays()
            widths.add(2 * pk.size)
    for m in grid.sent + grid.received:
        assert not m.has_error()
        phase = m.metadata.message_type.removeprefix("train.vfedcd_")
        for rec in m.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                if a.dtype == np.uint8:
                    assert a.ndim == 1 and phase in ("keys", "setup") or a.shape[1] in widths
                    seen.add("ciphertext" if a.ndim == 2 else "public key")
                elif a.dtype == np.uint64:
                    assert phase in ("share", "decode")
                    assert np.abs(V.dequantize(a, 32)).max() > 1e3  # uniformly masked
                    seen.add("share")
                else:  # graph fragments up, the CTV's gradient share of B down
                    assert a.dtype == np.float64 and a.shape in {(6, 2), (6, 6)}, (phase, a.shape)
                    assert a.shape == (6, 6) and phase == "share" or phase in ("setup", "update")
                    seen.add("graph")
                    assert not np.isin(np.round(raw, 8), np.round(a, 8)).any()
        for rec in m.content.metric_records.values():
            assert set(rec) <= {"num-examples", "loss", "missing"}  # missing: a share
    assert seen == {"ciphertext", "public key", "share", "graph"}


def faulty_client_app() -> ClientApp:
    """The App's parties with test-only faults from node_config: ``columns`` (another column
    set), ``sample-perm-seed`` (rows permuted), ``drop-rows``, ``id-offset`` (other sample
    ids), ``corrupt`` (a NaN)."""
    app = ClientApp()

    def make(context: Context) -> dict:
        rc, nc = context.run_config, context.node_config
        x, _, cols = party_data(rc, int(nc["partition-id"]), int(nc["num-partitions"]))
        if "columns" in nc:
            cols = np.array([int(c) for c in str(nc["columns"]).split(",")])
            x, _ = split_standardised(pooled_data(rc)[0][:, cols],
                                      VerticalData.from_run_config(rc).test_fraction)
        ids = np.arange(len(x))
        if "sample-perm-seed" in nc:
            perm = np.random.default_rng(int(nc["sample-perm-seed"])).permutation(len(x))
            x, ids = x[perm], ids[perm]
        if nc.get("drop-rows"):
            x, ids = x[:-int(nc["drop-rows"])], ids[:-int(nc["drop-rows"])]
        if "id-offset" in nc:
            ids = ids + int(nc["id-offset"])
        if "corrupt" in nc:
            x = x.copy()
            x[0, 0] = np.inf  # NaN is a missing cell, inf an error
        return {"x": x, "columns": cols, "sample_ids": ids, "accept_backends": "mock"}

    return register(app, "vfedcd", make)


@pytest.mark.parametrize("node_configs,words", [
    ({1: {"id-offset": 1000}}, ["share 0 sample ids", "party 0 16, party 1 16, party 2 16"]),
    ({1: {"columns": "1,2"}}, ["attribute 1", "party 0", "party 1"]),
    ({0: {"corrupt": 1}}, ["party 0", "non-finite"]),
])
def test_bad_input_stops_naming_the_party_and_reports_no_graph(node_configs, words):
    result, _ = run(RC, app=faulty_client_app(), node_configs=node_configs)
    assert result.status.startswith("stopped")
    for w in words:
        assert w in result.status, result.status
    assert result.estimates == {} and "shd" not in result.metrics


@pytest.mark.integration
def test_parties_align_on_their_shared_ids():
    """Party 1 lacks the last sample, party 2 holds its rows in another order: every party
    trains on the shared ids in the server's order, exactly as if each held only those rows
    in the same order; the ids that cross the wire are the parties' own, nothing else."""
    app = faulty_client_app()
    res, grid = run(RC, app=app, node_configs={1: {"drop-rows": 1}, 2: {"sample-perm-seed": 3}})
    same, _ = run(RC, app=app, node_configs={k: {"drop-rows": 1} for k in range(3)})
    every, _ = run(RC, app=app)
    assert res.status == same.status == every.status == "completed"
    assert np.array_equal(res.estimates["B"], same.estimates["B"])
    assert not np.array_equal(res.estimates["B"], every.estimates["B"])  # 15 rows, not 16
    first = [m for m in grid.sent if m.metadata.message_type.endswith("vfedcd_plain_setup")
             or m.metadata.message_type.endswith("vfedcd_keys")]
    assert len(first) == 3 and all(list(m.content["config"]["shared-ids"]) == list(range(15))
                                   for m in first)


def test_a_party_refuses_ids_it_does_not_hold():
    from fedcausal_flwr.vertical.client import shared_rows

    ids = np.array([7, 3, 5])
    assert shared_rows(ids, [3, 7], "party 0").tolist() == [1, 0]
    for lie in ([3, 4], [3], [3, 7, 9]):
        with pytest.raises(ValueError, match="party 0: the server's shared sample IDs"):
            shared_rows(ids, lie, "party 0")


@pytest.mark.integration
def test_a_party_dropping_out_mid_run_stops_without_a_final_graph():
    class Offline(Exception):
        pass

    def flaky(msg: Message, context: Context) -> Message:
        cfg = msg.content.config_records.get("config", {})
        if context.node_config["partition-id"] == 2 and \
                msg.metadata.message_type == "train.vfedcd_gradient" and cfg.get("step") == 2:
            raise Offline("party 2 went offline")
        return handle(msg, context)

    saved = []
    strategy = vertical.strategy("vfedcd", RC)
    strategy.checkpoint = lambda r: saved.append(dict(r.estimates))
    result = strategy.start(grid=InProcessGrid(flaky, 3, RC))
    assert result.status.startswith("stopped") and "client 2" in result.status
    assert "vfedcd_gradient" in result.status and len(result.history) == 1
    assert result.estimates == {} and all(e == {} for e in saved)


@pytest.mark.integration
def test_a_users_client_app_is_one_register_call_plus_the_partys_data():
    X, _ = pooled_data({"vertical.d": 6, "vertical.edges": 8, "vertical.n": 24,
                        "vertical.data-seed": 1})
    tr, _ = split_standardised(X)
    columns = [np.array([4, 0]), np.array([2]), np.array([5, 1, 3])]  # any disjoint sets
    xs = [tr[:, c] for c in columns]
    app = ClientApp()
    register(app, "vfedcd", lambda context: {
        "x": xs[context.node_config["partition-id"]],
        "columns": columns[context.node_config["partition-id"]],
        "sample_ids": np.arange(len(tr))})
    # the parties see no run config: the server sends settings; each party's node config
    # consents to the mock backend
    grid = InProcessGrid(app, 3, node_configs={i: {"vfedcd-accept-backends": "mock"}
                                               for i in range(3)})
    strategy = VFedCD(he_backend="mock", batch=8, seed=3)
    result = strategy.start(grid=grid, num_rounds=2)
    assert result.status == "completed" and len(result.history) == 2
    ref = loop.train_reference(xs, strategy.settings, epochs=2)
    order = np.concatenate(columns)
    B = np.zeros((6, 6))
    B[np.ix_(order, order)] = V.graph(ref.F, [2, 1, 3])
    np.testing.assert_allclose(result.estimates["B"], B, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.estimates["dag"],
                                  V.dag_at_threshold(B, strategy.settings.tau))
    np.testing.assert_allclose([h["loss"] for h in result.history],
                               [h["loss"] for h in ref.history], rtol=1e-12)
    assert [h["epoch"] for h in result.history] == [1, 2]
    assert "shd" not in result.metrics  # no truth is known for a user's data
    keys = [m for m in grid.sent if m.metadata.message_type == "train.vfedcd_keys"]
    assert all(dict(m.content["config"])["he_backend"] == "mock" for m in keys)


@pytest.mark.integration
def test_parties_follow_the_servers_settings_not_their_run_config():
    nodes_rc = {**RC, "vertical.lr": 0.5, "vertical.loss": "nll", "vertical.batch": 4,
                "vertical.he-backend": "paillier"}
    grid = InProcessGrid(client_app, 3, nodes_rc)
    result = vertical.strategy("vfedcd", RC).start(grid=grid)
    assert result.status == "completed"
    np.testing.assert_allclose(result.estimates["B"], V.graph(reference(RC).F, [2, 2, 2]),
                               rtol=0, atol=1e-12)


def test_warm_start_and_unknown_arguments_are_rejected():
    grid = InProcessGrid(client_app, 3, RC)
    with pytest.raises(ValueError, match="no model to warm-start"):
        VFedCD(he_backend="mock").start(grid=grid, initial_arrays=[np.zeros((6, 6))])
    with pytest.raises(TypeError, match="unknown settings"):
        VFedCD(he_bakend="mock")
    assert grid.sent == []  # nothing reached a node


def test_app_glue_defaults_and_data_keys_agree_with_the_app_config():
    assert vertical.strategy("vfedcd", APP_CONFIG).settings == VFedCDSettings()
    declared = {k: (APP_CONFIG[k], type(APP_CONFIG[k])) for k in VerticalData().app_config()}
    assert declared == {k: (v, type(v)) for k, v in VerticalData().app_config().items()}
    with pytest.raises(ValueError, match="'vertical.test-fraction' = 1.5"):
        vertical.strategy("vfedcd", {**APP_CONFIG, "vertical.test-fraction": 1.5})
    with pytest.raises(ValueError, match="'vertical.data' = 'dream4'.*'sachs'"):
        vertical.strategy("vfedcd", {**APP_CONFIG, "vertical.data": "dream4"})
