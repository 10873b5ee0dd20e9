"""FedTrees ServerApp: one ranked causal graph from every site's own series, by the sites'
forests' importances (dynGENIE3)."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedTrees, FedTreesSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # every trees.* key (pyproject.toml declares them all): trees, lags, edge-factor ...
    settings = FedTreesSettings.from_run_config(rc)
    result = FedTrees(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FedTrees {result.status}: {out}; edges {result.edges()}")
