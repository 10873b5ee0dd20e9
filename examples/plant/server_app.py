"""Plant ServerApp: FDBNL with what the engineers know (tiers, an exogenous variable, a
required edge) from the run config's ``dbn.*`` keys."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FDBNL, FDBNLSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = FDBNLSettings.from_run_config(rc)  # dbn.tiers, dbn.exogenous, dbn.require ...
    result = FDBNL(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FDBNL {result.status}: {out}; knowledge {result.metrics.get('knowledge')}")
    for s, t, w, lag in result.edges():
        print(f"  {s} -> {t} (lag {lag}): {w:+.2f}")
