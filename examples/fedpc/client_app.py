"""FedPC ClientApp: each SuperNode reads its own CSV (node config ``data-path``); a node given
none (a simulation, a FAB run) makes the example's data for its ``partition-id``
(make_data.py). What leaves the node: sums over its rows (moments), never a row."""

from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_context, node_csv


def make(context: Context) -> dict:
    table = node_csv(node_context(context, csv_files), allow_missing=True)  # header = names
    order = sorted(range(len(table.names)), key=lambda j: table.names[j])  # match by name
    return {"Z": table.values[:, order], "names": [table.names[j] for j in order]}


app = ClientApp()
register(app, "fedpc", make)
