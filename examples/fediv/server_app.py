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
    settings = FedIVSettings.from_run_config(rc)  # every iv.* key (pyproject.toml: all)
    result = FedIV(settings).start(grid=grid, num_rounds=settings.rounds)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    doses = np.linspace(-2, 2, 5)[:, None]
    print(f"FedIV {result.status}: {out}; g({doses.ravel()}) = {result.predict(doses).ravel()}")
