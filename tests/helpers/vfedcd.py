"""VFedCD App runs on a small vertical federation with the test-only mock backend and small
keys, through the in-process grid."""

from __future__ import annotations

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical import app as vertical
from fedcausal_flwr.vertical.model import VFedCDSettings

# Test-only opt-ins: small keys (the server's insecure-test-keys) and the built-in parties'
# consent to every backend, mode and key size (run config: the parties of an in-process grid,
# like those of a Ray simulation, have no node config of their own).
INSECURE = {"vertical.insecure-test-keys": True,
            "vertical.vfedcd-accept-backends": "paillier,paillier-packed,mock",
            "vertical.vfedcd-accept-modes": "vfedcd,ctv,framework",
            "vertical.vfedcd-min-key-bits": 256}
# the paper's settings (what these tests have always run) on a small data set
RC = {**VFedCDSettings.paper().app_config(), "algorithm": "vfedcd", "vertical.d": 6,
      "vertical.edges": 8, "vertical.n": 20, "vertical.num-epochs": 2, "vertical.batch": 8,
      "vertical.he-backend": "mock", "vertical.key-bits": 256,
      "node-wait-s": 5.0, "vertical.gamma": 0.5, "seed": 4, **INSECURE}


def run(rc: dict, k: int = 3, app=client_app, node_configs=None):
    grid = InProcessGrid(app, k, rc, node_configs)
    return vertical.strategy("vfedcd", rc).start(grid=grid), grid
