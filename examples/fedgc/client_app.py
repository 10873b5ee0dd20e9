"""FedGC ClientApp: each plant reads its own sensor CSV (node config ``data-path``)."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data


def make(context: Context) -> dict:
    # sensors z-scored, hidden states identified (run config statespace.ss-p), names from the header
    return node_data("fedgc", context)


app = ClientApp()
register(app, "fedgc", make)
