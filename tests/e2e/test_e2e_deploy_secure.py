"""End to end: the launcher beside other Flower work, and PFDBNL under `flwr run`.

Issue 10, item 5. The ``other_flower_work`` fixture (conftest.py) runs a second, unrelated
SuperLink on Flower's default local port 39091 (the port ``flwr run ... local`` would otherwise
attach to) and plain sockets on 9200 (the launcher's old fixed port) and 8000
(``flower-superlink``'s default). ``launch main simulate`` with its defaults (free ports, no
``--port``) and ``FLWR_HOME`` set must use that home, exit 0, leave all of them alone, and its
PFDBNL run (heterogeneous clients) must equal the reference loop to 1e-8. The secure
deployment beside the same fixture: test_e2e_examples.py. About 40 s.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.cli import launch, supervisor
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import PFDBNLSettings

pytestmark = pytest.mark.e2e

RC = {"algorithm": "pfdbnl", "seed": 7, "dbn.d": 5, "dbn.samples-per-client": 40,
      "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05, "node-wait-s": 60.0, "dbn.num-rounds": 4,
      "dbn.heterogeneous": True}


def test_launcher_simulate_with_defaults_keeps_flwr_home_and_other_superlink(
        tmp_path, monkeypatch, other_flower_work):
    home = tmp_path / "users-flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    t0 = time.time()
    code = launch.main(["simulate", "--nodes", "2", "--run-config",
                        launch.run_config_arg({**RC, "outputs": str(tmp_path),
                                               "run-name": "sim"})])
    print(f"simulation {time.time() - t0:.0f}s")
    assert code == 0
    other_flower_work()
    assert (home / "local-superlink" / "superlink.log").exists()  # the user's FLWR_HOME used
    assert not [pid for pid, argv in supervisor._cmdlines().items()  # its SuperLink is stopped
                if any(str(home) in a for a in argv)]
    result = load_result(tmp_path / "sim")
    rc = view("pfdbnl", result["config"]["run_config"])  # pyproject defaults merged in
    moms = [dbn.moments(*client_data(rc, i, 2)) for i in range(2)]
    state = dbn.pfdbnl_reference(moms, PFDBNLSettings.from_run_config(rc))[0]
    assert result["status"] == "completed" and result["metrics"]["clients"] == 2
    assert result["timing"]["rounds"] == state.round
    np.testing.assert_allclose(result["estimates"]["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result["estimates"]["A"], state.A, rtol=0, atol=1e-8)
