"""FedIV ServerApp: the effect of dose on recovery, learned with an instrument."""

from pathlib import Path

import numpy as np
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedIV, FedIVSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = FedIVSettings(device=str(rc["iv.iv-device"]), local_epochs=2, min_nodes=2)
    result = FedIV(settings).start(grid=grid, num_rounds=int(rc["iv.iv-rounds"]))
    out = result.save(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    doses = np.linspace(-2, 2, 5)[:, None]
    print(f"FedIV {result.status}: {out}; g({doses.ravel()}) = {result.predict(doses).ravel()}")
