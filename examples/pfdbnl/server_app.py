"""PFDBNL ServerApp: a shared DBN plus one personalized DBN per site."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import PFDBNL, PFDBNLSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = PFDBNLSettings(lambda_w=float(rc["dbn.pfdbnl-lambda-w"]),
                              lambda_a=float(rc["dbn.pfdbnl-lambda-a"]),
                              mu=float(rc["dbn.mu"]), min_nodes=2)
    result = PFDBNL(settings).start(grid=grid, num_rounds=int(rc["dbn.num-rounds"]))
    out = result.save(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"PFDBNL {result.status}: {out}")
