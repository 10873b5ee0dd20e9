"""VFedCD through the Message API (in-process Grid): equals the reference loop, relay audit,
bad input stops the run naming the party and reports no graph."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, Message

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.client_app import handle
from fedcausal_flwr.clients.vfedcd import settings_from_run_config
from fedcausal_flwr.core import vfedcd as V
from fedcausal_flwr.data.vertical import party_data
from fedcausal_flwr.strategies import vfedcd
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "vfedcd", "d": 6, "edges": 8, "n": 20, "num-epochs": 2, "batch": 8,
      "he-backend": "mock", "key-bits": 256, "node-wait-s": 5.0, "gamma": 0.5, "seed": 4}


def run(rc: dict, k: int = 3, app=client_app, node_configs=None):
    grid = InProcessGrid(app, k, rc, node_configs)
    return vfedcd.from_run_config(rc).start(grid=grid), grid


def reference(rc: dict, k: int = 3) -> V.State:
    xs = [party_data(rc, i, k)[0] for i in range(k)]
    return V.train_reference(xs, settings_from_run_config(rc))


@pytest.mark.parametrize("backend", ["mock", "paillier", "paillier-packed"])
def test_flower_path_equals_reference(backend):
    rc = {**RC, "he-backend": backend}
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


@pytest.mark.parametrize("mode", ["framework", "ctv", "vfedcd"])
def test_each_mode_in_flower_equals_its_reference_loop(mode):
    rc = {**RC, "mode": mode, "l2": 0.01, "unfreeze": True, "loss": "nll"}
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


def test_laplace_noise_on_graph_fragments_matches_the_reference():
    rc = {**RC, "dp-b": 0.05}
    result, _ = run(rc)
    ref = reference(rc)
    s = settings_from_run_config(rc)
    noisy = V.ctv_graph(ref.F, [2, 2, 2], s, ref.step)
    np.testing.assert_allclose(result.estimates["B"], noisy, rtol=0, atol=1e-12)
    assert np.abs(noisy - V.graph(ref.F, [2, 2, 2])).max() > 0.01
    clean, _ = run(RC)
    assert not np.allclose(clean.estimates["B"], result.estimates["B"])


def test_relay_sees_only_ciphertexts_masked_shares_and_graph_fragments():
    rc = {**RC, "he-backend": "paillier", "num-epochs": 1}
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
            assert set(rec) <= {"num-examples", "loss"}
    assert seen == {"ciphertext", "public key", "share", "graph"}


@pytest.mark.parametrize("node_configs,words", [
    ({1: {"drop-rows": 1}}, ["client 1", "'n'"]),
    ({2: {"sample-perm-seed": 3}}, ["client 2", "samples"]),
    ({1: {"columns": "1,2"}}, ["attribute 1", "party 0", "party 1"]),
    ({0: {"corrupt": 1}}, ["party 0", "non-finite"]),
])
def test_bad_input_stops_naming_the_party_and_reports_no_graph(node_configs, words):
    result, _ = run(RC, node_configs=node_configs)
    assert result.status.startswith("stopped")
    for w in words:
        assert w in result.status, result.status
    assert result.estimates == {} and "shd" not in result.metrics


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
    strategy = vfedcd.from_run_config(RC)
    strategy.checkpoint = lambda r: saved.append(dict(r.estimates))
    result = strategy.start(grid=InProcessGrid(flaky, 3, RC))
    assert result.status.startswith("stopped") and "party 2" in result.status
    assert "gradient" in result.status and len(result.history) == 1
    assert result.estimates == {} and all(e == {} for e in saved)
