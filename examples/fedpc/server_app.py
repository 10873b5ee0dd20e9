"""FedPC ServerApp: one causal graph from every site's own rows, by the PC algorithm on
pooled moments."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedPC, FedPCSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # every constraint.* key (pyproject.toml declares them all): alpha, knowledge, replicas ...
    settings = FedPCSettings.from_run_config(rc)
    result = FedPC(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FedPC {result.status}: {out}; edges {result.edges()}")
