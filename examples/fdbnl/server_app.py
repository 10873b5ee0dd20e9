"""FDBNL ServerApp: learn one dynamic Bayesian network from every site's own series."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FDBNL, FDBNLSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = FDBNLSettings(lambda_w=float(rc["dbn.lambda-w"]),
                             lambda_a=float(rc["dbn.lambda-a"]),
                             min_nodes=2)
    result = FDBNL(settings).start(grid=grid, num_rounds=int(rc["dbn.num-rounds"]))
    out = result.save(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FDBNL {result.status}: {out}; edges {result.edges(tau=settings.tau_w)}")
