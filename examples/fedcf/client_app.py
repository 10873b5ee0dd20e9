"""FedCF ClientApp: each plant reads its own CSV (node config ``data-path``): its sensors, and
the valve named by node config ``input-columns`` as its known input."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data


def make(context: Context) -> dict:
    # sensors z-scored, hidden states and the valve's B_mm identified (run config
    # statespace.ss-p), names from the header
    return node_data("fedcf", context)


app = ClientApp()
register(app, "fedcf", make)
