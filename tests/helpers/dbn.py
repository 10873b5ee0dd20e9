"""FDBNL/PFDBNL App runs on a small synthetic federation, through the in-process grid."""

from __future__ import annotations

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.testing import InProcessGrid

#: a small FDBNL run config: 5 variables, 40 samples a client, at most 40 rounds
RC = {"algorithm": "fdbnl", "seed": 3, "dbn.d": 5, "dbn.lags": 1, "dbn.samples-per-client": 40,
      "dbn.generator": "svar", "dbn.num-rounds": 40, "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05,
      "min-nodes": 2, "node-wait-s": 5.0}


def run_inprocess(rc: dict, k: int, app=client_app):
    """The App's strategy for ``rc`` on ``k`` in-process clients: ``(result, grid)``."""
    grid = InProcessGrid(app, k, rc)
    return app_dbn.strategy(rc["algorithm"], rc).start(grid=grid), grid
