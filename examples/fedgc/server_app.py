"""FedGC ServerApp: causal effects between the plants' hidden states."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedGC, FedGCSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # statespace.ss-window, statespace.ss-epochs: the run config keys of FedGCSettings
    settings = FedGCSettings.from_run_config(rc)
    result = FedGC(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FedGC {result.status}: {out}")
