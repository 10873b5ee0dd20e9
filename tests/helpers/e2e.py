"""What the e2e tests share: the rounds a running App has recorded so far, and the in-process
reference loop that an FDBNL/PFDBNL ``flwr run`` must equal."""

from __future__ import annotations

import json

import numpy as np

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.strategies import FDBNLSettings, PFDBNLSettings


def rounds_done(path) -> int:
    """Rounds recorded in a result.json: while the run goes on its checkpoint is a summary
    that counts them (``history_rounds``); the final one holds the ``history``."""
    try:
        doc = json.loads(path.read_text())
        return int(doc.get("history_rounds", len(doc.get("history", []))))
    except (OSError, ValueError, TypeError):
        return 0


#: the small FDBNL/PFDBNL run of test_e2e_flower.py and test_e2e_flower_versions.py
RC = {"seed": 7, "dbn.d": 5, "dbn.samples-per-client": 40, "dbn.lambda-w": 0.05,
      "dbn.lambda-a": 0.05, "node-wait-s": 60.0}


def reference(rc: dict, k: int) -> dbn.ServerState:
    """The reference loop's final state for run config ``rc`` on ``k`` clients."""
    rc = view(str(rc["algorithm"]), rc)  # the dbn section's keys, as the App reads them
    moms = [dbn.moments(*client_data(rc, i, k)) for i in range(k)]
    pf = rc.get("algorithm") == "pfdbnl"
    run = dbn.pfdbnl_reference if pf else dbn.fdbnl_reference
    return run(moms, (PFDBNLSettings if pf else FDBNLSettings).from_run_config(rc))[0]


def check_against_reference(result: dict, k: int) -> None:
    """A ``flwr run``'s result.json completed on ``k`` clients with the reference's rounds, W
    and A (to 1e-8)."""
    state = reference(result["config"]["run_config"], k)  # pyproject defaults merged in
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == k  # the number of clients follows the SuperNodes
    assert result["timing"]["rounds"] == state.round
    np.testing.assert_allclose(result["estimates"]["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result["estimates"]["A"], state.A, rtol=0, atol=1e-8)
