"""FDBNL ClientApp: each SuperNode reads its own CSV (node config ``data-path``)."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import lagged, node_csv


def make(context: Context) -> dict:
    table = node_csv(context, allow_missing=True)  # node config data-path; header = names;
    # empty cells are missing values; columns are matched by name, a site may lack some
    Xt, Xlag = lagged(table, lags=int(context.run_config["dbn.lags"]))
    return {"Xt": Xt, "Xlag": Xlag, "names": table.names}


app = ClientApp()
register(app, "fdbnl", make)
