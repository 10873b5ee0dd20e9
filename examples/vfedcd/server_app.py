"""VFedCD ServerApp: one causal graph over the columns the parties hold between them."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import VFedCD, VFedCDSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = VFedCDSettings.from_run_config(rc)  # vertical.num-epochs, vertical.he-backend ...
    result = VFedCD(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"VFedCD {result.status}: {out}")
