"""FedGC ClientApp: each plant reads its own sensor CSV (node config ``data-path``); a node given
none (a simulation, a FAB run) makes the example's data for its ``partition-id``
(make_data.py)."""

from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_context, node_data


def make(context: Context) -> dict:
    # sensors z-scored, hidden states identified (run config statespace.ss-p), names from the header
    return node_data("fedgc", node_context(context, csv_files))


app = ClientApp()
register(app, "fedgc", make)
