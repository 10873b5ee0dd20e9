"""FedTrees ClientApp: each SuperNode reads its own CSV (node config ``data-path``); a node
given none (a simulation, a FAB run) makes the example's data for its ``partition-id``
(make_data.py). What leaves the node: the importances of its forests, never a row."""

import numpy as np
from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import lagged, node_context, node_csv


def make(context: Context) -> dict:
    table = node_csv(node_context(context, csv_files))  # header = names, rows in time order
    order = sorted(range(len(table.names)), key=lambda j: table.names[j])  # match by name
    xt, xlag = lagged(table.values[:, order], 1, pad="drop")
    return {"Z": np.hstack([xt, xlag]), "d": len(order),
            "names": [table.names[j] for j in order]}


app = ClientApp()
register(app, "fedtrees", make)
