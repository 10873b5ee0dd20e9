"""FedGC/FedCF end to end: `flwr run` (Ray simulation) and a loopback deployment.

The state-space keys travel in a JSON file named by ``statespace.data-path`` (its keys bare,
over the run config's). Each run must equal the in-process reference loop.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import load_result
from fedcausal_flwr.statespace import app as app_ss
from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.data import all_clients, merged_config

pytestmark = pytest.mark.e2e

SS = {"ss-t": 200, "ss-window": 50, "ss-epochs": 2, "ss-cf-delta": "1,0"}


def run_config(tmp_path, algorithm: str, name: str, **extra) -> dict:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({**SS, **extra}))
    return {"algorithm": algorithm, "seed": 4, "statespace.data-path": str(path),
            "node-wait-s": 60.0, "outputs": str(tmp_path), "run-name": name}


def check_against_reference(result: dict, algorithm: str) -> None:
    full = merged_config(result["config"]["run_config"], algorithm)
    sys, clients = all_clients(full)
    ref = loop.reference(clients, app_ss.settings(algorithm, full))
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == 2
    assert len(result["history"]) == len(ref.history)
    np.testing.assert_allclose(result["estimates"]["A_hat"], ref.server.A_hat, atol=1e-10)
    assert all(h["bytes_up"] > 0 for h in result["history"])
    if algorithm == "fedcf":
        np.testing.assert_allclose(result["estimates"]["B_hat"], ref.server.B_hat, atol=1e-10)
        B10 = ss.block(ref.server.B_hat, sys.P, sys.U, 1, 0)
        np.testing.assert_allclose(result["metrics"]["counterfactual"]["delta_y"],
                                   clients[1].C @ B10 @ np.array([1.0, 0.0]), atol=1e-10)


def test_flwr_run_simulation_equals_reference(tmp_path, free_ports, flower_pids):
    algorithm = "fedcf"  # FedCF runs FedGC's protocol loop too; each test costs ~60 s
    rc = run_config(tmp_path, algorithm, f"sim-{algorithm}")
    port = free_ports(launch.SIMULATE_PORTS)
    launch.simulate(2, rc, flwr_home=tmp_path / "flwr", timeout=600, port=port)
    assert not flower_pids(port, launch.SIMULATE_PORTS)
    check_against_reference(load_result(tmp_path / f"sim-{algorithm}"), algorithm)


def test_loopback_deployment_equals_reference(tmp_path, free_ports, flower_pids):
    rc = run_config(tmp_path, "fedgc", "deploy", **{"ss-window": 100, "ss-epochs": 1})
    port = free_ports(launch.deploy_ports(2))
    launch.deploy(2, rc, workdir=tmp_path / "deployment", port=port, timeout=600)
    check_against_reference(load_result(tmp_path / "deploy"), "fedgc")
    assert not flower_pids(port, launch.deploy_ports(2))
