"""FedIV end to end under real Flower: `flwr run` (Ray simulation) and a loopback deployment.

Each run is compared with the in-process reference loop on the same data: the federated g and
f parameters and the selected round must equal it.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.iv import data as iv
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import FedIVSettings

pytestmark = pytest.mark.e2e

RC = {"algorithm": "fediv", "seed": 11, "iv.iv-scenario": "abs", "iv.iv-n": 400,
      "iv.iv-lr-g": 0.05, "iv.iv-lr-f": 0.25, "iv.iv-val-features": 8, "iv.iv-device": "cpu",
      "node-wait-s": 60.0}


def check_against_reference(result: dict, k: int) -> None:
    rc = view("fediv", result["config"]["run_config"])  # pyproject defaults merged in
    data = [iv.client_data(rc, i, k) for i in range(k)]
    basis = dg.rff(2, int(rc["iv-val-features"]), int(rc["seed"]))
    st = dg.fedgda_reference(
        [dg.batch(d["train"].x, d["train"].y, d["train"].z) for d in data],
        FedIVSettings.from_run_config(rc), int(rc["seed"]),
        [(dg.batch(d["val"].x, d["val"].y, d["val"].z), dg.features(d["val"].z, basis))
         for d in data])
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == k
    assert result["timing"]["rounds"] == st.round
    for key, want in (("g_params", st.theta), ("f_params", st.tau),
                      ("g_params_selected", st.best_theta)):
        for a, b in zip(result["estimates"][key], want, strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=0, atol=1e-10)
    assert result["estimates"]["selected_round"] == st.best_round


def test_flwr_run_simulation_equals_reference(tmp_path, free_ports, flower_pids):
    rc = {**RC, "iv.iv-rounds": 2, "outputs": str(tmp_path), "run-name": "sim"}
    port = free_ports(launch.SIMULATE_PORTS)
    launch.simulate(3, rc, flwr_home=tmp_path / "flwr", timeout=600, port=port)
    assert not flower_pids(port, launch.SIMULATE_PORTS)
    result = load_result(tmp_path / "sim")
    check_against_reference(result, 3)
    assert (tmp_path / "sim" / "g_vs_g0.png").stat().st_size > 0
    assert all(h["bytes_up"] > 0 and h["bytes_down"] > 0 for h in result["history"])


def test_loopback_deployment_equals_reference(tmp_path, free_ports, flower_pids):
    rc = {**RC, "iv.iv-rounds": 1, "outputs": str(tmp_path), "run-name": "deploy"}
    port = free_ports(launch.deploy_ports(2))
    launch.deploy(2, rc, workdir=tmp_path / "deployment", port=port, timeout=600)
    check_against_reference(load_result(tmp_path / "deploy"), 2)
    assert (tmp_path / "deploy" / "g_vs_g0.png").stat().st_size > 0
    assert not flower_pids(port, launch.deploy_ports(2))
