"""PFDBNL ClientApp: each SuperNode reads its own CSV (node config ``data-path``)."""

from pathlib import Path

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import lagged, read_csv

HERE = Path(__file__).resolve().parent


def make(context: Context) -> dict:
    pid = int(context.node_config.get("partition-id", 0))
    # this node's file; without one (plain `flwr run` simulation) the bundled demo CSV
    path = context.node_config.get("data-path") or HERE / "data" / f"site{pid}.csv"
    table = read_csv(path, f"client {pid}")                  # header = variable names
    Xt, Xlag = lagged(table, lags=int(context.run_config["lags"]))
    return {"Xt": Xt, "Xlag": Xlag, "names": table.names}


app = ClientApp()
register(app, "pfdbnl", make)
