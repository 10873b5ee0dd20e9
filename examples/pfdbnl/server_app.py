"""PFDBNL ServerApp: a shared DBN plus one personalized DBN per site."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import PFDBNL, PFDBNLSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # every dbn.* key (pyproject.toml declares them all): penalties, mu, knowledge ...
    settings = PFDBNLSettings.from_run_config(rc)
    result = PFDBNL(settings).start(grid=grid, num_rounds=settings.max_rounds)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"PFDBNL {result.status}: {out}")
