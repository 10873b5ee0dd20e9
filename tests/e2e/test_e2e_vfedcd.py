"""VFedCD end to end under `flwr run` (Ray simulation, mock backend): equal to the in-process
reference loop on the same data. Its secure deployment with real 2048-bit keys:
test_e2e_examples.py (examples/vfedcd, checked against its in-process run, which
test_app_vfedcd.py checks against the reference loop for every backend)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import load_result
from fedcausal_flwr.vertical import loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import party_data
from fedcausal_flwr.vertical.model import VFedCDSettings

pytestmark = pytest.mark.e2e

# Test-only opt-ins: 256-bit keys, and the parties' consent to mock and test keys. The App's
# built-in simulated parties take consent keys their node config lacks from the run config (the
# submitter's consent, logged as such): a Ray simulation has no per-node config to carry it.
RC = {"algorithm": "vfedcd", "vertical.d": 4, "vertical.edges": 4, "vertical.batch": 8,
      "vertical.key-bits": 256, "vertical.insecure-test-keys": True,
      "vertical.vfedcd-accept-backends": "paillier,paillier-packed,mock",
      "vertical.vfedcd-min-key-bits": 256, "node-wait-s": 60.0, "vertical.gamma": 0.5,
      "seed": 2}


def check_against_reference(result: dict, k: int) -> None:
    rc = view("vfedcd", result["config"]["run_config"])
    xs = [party_data(rc, i, k)[0] for i in range(k)]
    ref = loop.train_reference(xs, VFedCDSettings.from_run_config(rc))
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == k
    B = V.graph(ref.F, [x.shape[1] for x in xs])
    np.testing.assert_allclose(result["estimates"]["B"], B, rtol=0, atol=1e-12)
    assert [h["lambda2"] for h in result["history"]] == [h["lambda2"] for h in ref.history]


def test_flwr_run_simulation_equals_reference(tmp_path, free_ports, flower_pids):
    rc = {**RC, "vertical.he-backend": "mock", "vertical.n": 10, "vertical.num-epochs": 1,
          "outputs": str(tmp_path), "run-name": "sim"}
    port = free_ports(launch.SIMULATE_PORTS)
    launch.simulate(3, rc, flwr_home=tmp_path / "flwr", timeout=300, port=port)
    assert not flower_pids(port, launch.SIMULATE_PORTS)
    result = load_result(tmp_path / "sim")
    check_against_reference(result, 3)
    assert all(h["bytes_up"] > 0 for h in result["history"])
