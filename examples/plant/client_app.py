"""Plant ClientApp: each SuperNode reads its own CSV (node config ``data-path``)."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import lagged, node_csv


def make(context: Context) -> dict:
    table = node_csv(context, allow_missing=True)  # header = names, in any order; empty
    Xt, Xlag = lagged(table, lags=int(context.run_config["dbn.lags"]))  # cells missing
    return {"Xt": Xt, "Xlag": Xlag, "names": table.names}


app = ClientApp()
register(app, "fdbnl", make)
