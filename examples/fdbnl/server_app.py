"""FDBNL ServerApp: learn one dynamic Bayesian network from every site's own series."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FDBNL, FDBNLSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # every dbn.* key (pyproject.toml declares them all): penalties, knowledge, replicas ...
    settings = FDBNLSettings.from_run_config(rc)
    result = FDBNL(settings).start(grid=grid, num_rounds=settings.max_rounds)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FDBNL {result.status}: {out}; edges {result.edges(tau=settings.tau_w)}")
