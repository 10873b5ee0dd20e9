"""FedCF ServerApp: causal effects between the plants' hidden states."""

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedcausal_flwr.strategies import FedCF, FedCFSettings

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    settings = FedCFSettings(window=int(rc["window"]), epochs=int(rc["epochs"]), min_nodes=2)
    result = FedCF(settings).start(grid=grid)
    out = result.save(Path(str(rc["outputs"])) / str(rc["run-name"]))
    print(f"FedCF {result.status}: {out}")
