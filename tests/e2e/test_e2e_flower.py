"""End to end under real Flower: FDBNL under `flwr run` (Ray simulation).

The run is compared with the in-process reference loop on the same data: the federated W and
A must equal it to 1e-8. FDBNL's deployments: test_e2e_nodes.py (insecure, a SuperNode killed
and restarted), test_e2e_examples.py (TLS + node auth, own CSVs), test_e2e_status.py (a killed
ServerApp); PFDBNL's simulation: test_e2e_deploy_secure.py. About 40 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import FDBNLSettings, PFDBNLSettings

pytestmark = pytest.mark.e2e

RC = {"seed": 7, "dbn.d": 5, "dbn.samples-per-client": 40, "dbn.lambda-w": 0.05,
      "dbn.lambda-a": 0.05, "node-wait-s": 60.0}


def reference(rc: dict, k: int) -> dbn.ServerState:
    rc = view(str(rc["algorithm"]), rc)  # the dbn section's keys, as the App reads them
    moms = [dbn.moments(*client_data(rc, i, k)) for i in range(k)]
    pf = rc.get("algorithm") == "pfdbnl"
    run = dbn.pfdbnl_reference if pf else dbn.fdbnl_reference
    return run(moms, (PFDBNLSettings if pf else FDBNLSettings).from_run_config(rc))[0]


def check_against_reference(result: dict, k: int) -> None:
    state = reference(result["config"]["run_config"], k)  # pyproject defaults merged in
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == k  # the number of clients follows the SuperNodes
    assert result["timing"]["rounds"] == state.round
    np.testing.assert_allclose(result["estimates"]["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result["estimates"]["A"], state.A, rtol=0, atol=1e-8)


@pytest.mark.parametrize("algorithm,k,extra", [
    ("fdbnl", 3, {"dbn.num-rounds": 12}),  # PFDBNL: test_e2e_deploy_secure.py's launcher run
])
def test_flwr_run_simulation_equals_reference(tmp_path, free_ports, flower_pids, algorithm, k,
                                              extra):
    rc = {**RC, "algorithm": algorithm, **extra, "outputs": str(tmp_path), "run-name": "sim"}
    port = free_ports(launch.SIMULATE_PORTS)
    launch.simulate(k, rc, flwr_home=tmp_path / "flwr", timeout=600, port=port)
    assert not flower_pids(port, launch.SIMULATE_PORTS)
    result = load_result(tmp_path / "sim")
    check_against_reference(result, k)
    assert (tmp_path / "sim" / "graphs.png").stat().st_size > 0
    assert len(result["history"]) == result["timing"]["rounds"]
    assert all(h["bytes_up"] > 0 and h["bytes_down"] > 0 for h in result["history"])
