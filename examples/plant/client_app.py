"""Plant ClientApp: each SuperNode reads its own CSV (node config ``data-path``); a node given
none (a simulation, a FAB run) makes the example's data for its ``partition-id``
(make_data.py)."""

from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import lagged, node_context, node_csv


def make(context: Context) -> dict:
    table = node_csv(node_context(context, csv_files), allow_missing=True)  # header = names;
    # empty cells are missing values; columns are matched by name, a site may lack some
    Xt, Xlag = lagged(table, lags=int(context.run_config["dbn.lags"]))
    return {"Xt": Xt, "Xlag": Xlag, "names": table.names}


app = ClientApp()
register(app, "fdbnl", make)
