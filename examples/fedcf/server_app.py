"""FedCF ServerApp: causal effects between the plants' hidden states, and a counterfactual:
how would the turbine's sensors change had the boiler's valve been opened by one unit?"""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedCF, FedCFSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    # statespace.ss-window, statespace.ss-cf-*, ...: the run config keys of FedCFSettings
    settings = FedCFSettings.from_run_config(rc)
    result = FedCF(settings).start(grid=grid)
    # a folder of its own, <run-name>/<timestamp>/; <run-name>/latest: the last completed run
    out = result.save_run(Path(str(rc["outputs"])) / str(rc["run-name"]), plots=True)
    print(f"FedCF {result.status}: {out}; counterfactual {result.metrics.get('counterfactual')}")
