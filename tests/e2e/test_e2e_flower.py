"""End to end under real Flower: FDBNL under `flwr run` (Ray simulation).

The run is compared with the in-process reference loop on the same data: the federated W and
A must equal it to 1e-8. FDBNL's deployments: test_e2e_nodes.py (insecure, a SuperNode killed
and restarted), test_e2e_examples.py (TLS + node auth, own CSVs), test_e2e_status.py (a killed
ServerApp); PFDBNL's simulation: test_e2e_deploy_secure.py. About 40 s.
"""

from __future__ import annotations

import pytest

from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import load_result
from tests.helpers.e2e import RC, check_against_reference

pytestmark = pytest.mark.e2e

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
