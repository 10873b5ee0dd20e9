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
    settings = FedPCSettings(alpha=float(rc["constraint.alpha"]), min_nodes=2)
    result = FedPC(settings).start(grid=grid)
    out = result.save(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FedPC {result.status}: {out}; edges {result.edges()}")
